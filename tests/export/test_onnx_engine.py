"""transcribe --engine onnx: the torch engine's text from an ONNX export, with torch not importable; a
damaged or wrong export is refused in one line."""

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers.cli_helpers import one_error, run


def _json(res):
    assert res.exit_code == 0, res.output
    return [json.loads(ln) for ln in res.stdout.splitlines()]


@pytest.mark.parametrize("variant", ["stack", "conv"])
def test_onnx_engine_gives_the_torch_engines_text_and_word_times(exported, wavs, variant):
    exp, out = exported(variant)
    want = _json(run("transcribe", exp, *wavs, "--format", "json"))
    got = _json(run("transcribe", "--engine", "onnx", out, *wavs, "--format", "json"))
    assert [r["text"] for r in got] == [r["text"] for r in want]
    assert [r["words"] for r in got] == [r["words"] for r in want]
    assert any(r["text"] for r in want)  # non-empty hypotheses, so the comparison says something


def test_onnx_engine_with_an_lm_gives_the_torch_engines_lexicon_search_text(exported, wavs, tmp_path):
    from asrtrain.lm.ngram import train_ngram
    exp, out = exported("stack")
    train_ngram([["yes", "no"], ["one", "two", "three"], ["go", "stop"], ["pep", "yes"]], order=2
                ).write_arpa(tmp_path / "lm.arpa")
    want = run("transcribe", exp, *wavs, "--lm", tmp_path / "lm.arpa")
    got = run("transcribe", "--engine", "onnx", out, *wavs, "--lm", tmp_path / "lm.arpa")
    assert got.exit_code == 0 == want.exit_code, got.output
    assert got.stdout == want.stdout and len(got.stdout.splitlines()) == 3
    assert any(len(ln.split()) > 1 for ln in got.stdout.splitlines())  # words found: not a vacuous match


@pytest.mark.slow
def test_onnx_engine_runs_with_torch_and_torchaudio_not_importable(exported, wavs):
    exp, out = exported("conv")
    want = run("transcribe", exp, *wavs).stdout
    code = ("import sys; sys.modules['torch'] = None; sys.modules['torchaudio'] = None\n"
            "from asrtrain.cli import cli\n"
            f"cli(['transcribe', '--engine', 'onnx', {str(out)!r}, *{[str(w) for w in wavs]!r}])\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout == want and "Traceback" not in res.stderr


def test_a_changed_or_missing_model_onnx_is_refused_in_one_line(exported, wavs, tmp_path):
    import shutil
    _, out = exported("stack")
    bad = tmp_path / "changed"
    shutil.copytree(out, bad)
    with open(bad / "model.onnx", "ab") as fh:
        fh.write(b"x")
    err = one_error(run("transcribe", "--engine", "onnx", bad, wavs[0]))
    assert "model.onnx is missing or changed since it was exported" in err and "export the model again" in err
    assert "packing" not in err and "packed" not in err
    (bad / "model.onnx").unlink()
    assert "model.onnx is missing or changed" in one_error(run("transcribe", "--engine", "onnx", bad, wavs[0]))
    from asrtrain.transcribe.manifest import write_manifest
    write_manifest(bad)  # a manifest without it: the engine's own checks
    assert "missing from the export" in one_error(run("transcribe", "--engine", "onnx", bad, wavs[0]))
    (bad / "model.onnx").write_bytes(b"\x08\x07garbage")
    write_manifest(bad)
    assert "onnxruntime cannot load it" in one_error(run("transcribe", "--engine", "onnx", bad, wavs[0]))


def test_a_torchscript_export_or_an_exp_dir_is_refused_by_the_onnx_engine_in_one_line(exported, wavs):
    exp, ts = exported("stack", "torchscript")
    assert "torchscript export" in one_error(run("transcribe", "--engine", "onnx", ts, wavs[0]))
    err = one_error(run("transcribe", "--engine", "onnx", exp, wavs[0]))
    assert "is an exp dir, not an ONNX export" in err and "asrtrain export" in err


def test_a_pack_given_to_the_onnx_engine_and_an_export_to_the_torch_engine_say_what_they_are(exported, wavs,
                                                                                              tmp_path):
    import asrtrain
    from asrtrain.errors import AsrError
    from asrtrain.transcribe.pack import pack
    exp, onnx_dir = exported("stack")
    _, ts_dir = exported("stack", "torchscript")
    packed = pack(exp, tmp_path / "pack")
    err = one_error(run("transcribe", "--engine", "onnx", packed, wavs[0]))
    assert "is a pack, not an ONNX export" in err and f"asrtrain export {packed} OUT --format onnx" in err
    err = one_error(run("transcribe", onnx_dir, wavs[0]))
    assert "is an ONNX export" in err and "--engine onnx" in err and "final.pt" not in err
    with pytest.raises(AsrError, match="is an ONNX export"):
        asrtrain.Transcriber.load(onnx_dir)
    err = one_error(run("transcribe", ts_dir, wavs[0]))
    assert "is a TorchScript export" in err and "exported from" in err
    err = one_error(run("export", onnx_dir, tmp_path / "again"))
    assert "is an ONNX export" in err


def test_audio_at_another_rate_is_refused_not_resampled(exported):
    from asrtrain.errors import AsrError
    from asrtrain.transcribe.onnx_engine import OnnxTranscriber
    from tests.helpers.tiny_exp import speechy
    tr = OnnxTranscriber.load(exported("stack")[1])
    assert tr.transcribe(speechy(1.0, 16000), sample_rate=16000).segments == [(0.0, 1.0)]
    with pytest.raises(AsrError, match="does not resample"):
        tr.transcribe(speechy(1.0, 8000), sample_rate=8000)
    with pytest.raises(AsrError, match="shorter than one frame"):
        tr.transcribe(np.zeros(100, np.float32), sample_rate=16000)


def test_dither_is_added_at_the_trained_level_and_the_same_for_every_call(exported):
    from asrtrain.features.fbank import fbank
    from asrtrain.transcribe.onnx_engine import OnnxTranscriber
    tr = OnnxTranscriber.load(exported("conv")[1])  # features.dither = 1
    silence = np.zeros(8000, np.float32)  # digital silence: without dither every bin sits at the log floor
    a, b = tr.raw_features(silence), tr.raw_features(silence)
    assert np.array_equal(a, b)
    torch_engine = fbank(silence, 16000, tr.cfg.features, seed="transcribe")
    assert abs(float(a.mean()) - float(torch_engine.mean())) < 0.2 and a.std() > 0.3


def test_an_export_with_a_bad_manifest_line_is_one_line_and_an_empty_line_is_skipped(exported, wavs, tmp_path):
    import shutil
    _, out = exported("stack")
    bad = tmp_path / "bad"
    shutil.copytree(out, bad)
    with open(bad / "MANIFEST.sha256", "a") as fh:
        fh.write("\n")
    assert run("transcribe", "--engine", "onnx", bad, wavs[0]).exit_code == 0
    n = len((bad / "MANIFEST.sha256").read_text().splitlines())
    with open(bad / "MANIFEST.sha256", "a") as fh:
        fh.write("garbage\n")
    err = one_error(run("transcribe", "--engine", "onnx", bad, wavs[0]))
    assert f"MANIFEST.sha256:{n + 1}: not a manifest line" in err and "export the model again" in err


def test_an_export_without_its_manifest_is_refused(exported, wavs, tmp_path):
    import shutil
    _, out = exported("stack")
    bad = tmp_path / "nomanifest"
    shutil.copytree(out, bad)
    (bad / "MANIFEST.sha256").unlink()
    err = one_error(run("transcribe", "--engine", "onnx", bad, wavs[0]))
    assert "no MANIFEST.sha256: this is an export" in err and "export the model again" in err


def test_a_changed_meta_json_is_caught_by_the_manifest_before_it_is_read(exported, wavs, tmp_path):
    import shutil
    _, out = exported("stack")
    bad = tmp_path / "meta"
    shutil.copytree(out, bad)
    (bad / "meta.json").write_text((bad / "meta.json").read_text()[:-5])
    assert "meta.json is missing or changed since it was exported" in one_error(
        run("transcribe", "--engine", "onnx", bad, wavs[0]))

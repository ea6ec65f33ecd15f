"""pack -> transcribe in a fresh dir with the exp dir deleted; a changed file is refused."""

import shutil

import numpy as np
import pytest
import soundfile as sf
import torch



def test_pack_then_transcribe_with_the_exp_dir_deleted(exp, tmp_path, speechy):
    import asrtrain
    from asrtrain.transcribe.pack import pack
    wave = speechy(1.5, 16000)
    before = asrtrain.Transcriber.load(exp).transcribe(wave, sample_rate=16000).text
    copy = tmp_path / "exp"
    shutil.copytree(exp, copy)
    (copy / "decode_greedy_test" / "scoring").mkdir(parents=True)
    (copy / "decode_greedy_test" / "scoring" / "wer").write_text("%WER 12.50 [ 1 / 8, 0 ins, 0 del, 1 sub ]\n")
    (copy / "data.json").write_text('{"train": {"name": "train_sp", "utterances": 948, "hours": 1.2345}}\n')
    packed = pack(copy, tmp_path / "fresh" / "model")
    shutil.rmtree(copy)
    card = (packed / "MODEL.md").read_text()
    assert "%WER 12.50" in card and "asrtrain 0" in card and "decode_greedy_test" in card
    assert "train data: train_sp: 948 utterances, 1.23 hours" in card and "epochs" in card
    # the weights are safetensors (no pickle, so nothing runs on load), the same tensors as the exp's final.pt
    from safetensors.torch import load_file
    from asrtrain.model.files import load_checked
    assert not (packed / "final.pt").exists()
    got = load_file(str(packed / "model.safetensors"))
    want = load_checked(exp / "final.pt")["model"]
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)
    sf.write(tmp_path / "a.wav", wave, 16000)
    from tests.helpers.cli_helpers import run
    res = run("transcribe", packed, tmp_path / "a.wav")
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == f"a {before}".strip()


def test_a_pack_whose_file_changed_is_refused_in_one_line(exp, tmp_path):
    from asrtrain.transcribe.pack import pack
    from tests.helpers.cli_helpers import one_error, run
    packed = pack(exp, tmp_path / "model")
    assert "training data: not recorded" in (packed / "MODEL.md").read_text()  # this exp has no data.json
    with open(packed / "tokenizer.model", "ab") as fh:
        fh.write(b"x")
    sf.write(tmp_path / "a.wav", np.zeros(16000, np.float32), 16000)
    assert "changed since packing" in one_error(run("transcribe", packed, tmp_path / "a.wav"))


def test_a_cut_safetensors_file_is_one_line(exp, tmp_path):
    from asrtrain.transcribe.pack import pack, write_manifest
    from tests.helpers.cli_helpers import one_error, run
    packed = pack(exp, tmp_path / "model")
    data = (packed / "model.safetensors").read_bytes()
    (packed / "model.safetensors").write_bytes(data[: len(data) // 2])
    write_manifest(packed)  # a manifest that matches the cut file: the reader itself names the file
    sf.write(tmp_path / "a.wav", np.zeros(16000, np.float32), 16000)
    err = one_error(run("transcribe", packed, tmp_path / "a.wav"))
    assert "model.safetensors" in err and "not a safetensors file" in err


def test_a_pack_without_its_manifest_is_refused_and_an_exp_dir_is_not_checked(exp, tmp_path):
    import asrtrain
    from asrtrain.errors import AsrError
    from asrtrain.transcribe.pack import MANIFEST, pack
    from tests.helpers.cli_helpers import one_error, run
    packed = pack(exp, tmp_path / "model")
    (packed / MANIFEST).unlink()
    sf.write(tmp_path / "a.wav", np.zeros(16000, np.float32), 16000)
    for res in (run("transcribe", packed, tmp_path / "a.wav"), run("export", packed, tmp_path / "out")):
        err = one_error(res)
        assert f"no {MANIFEST}: this is a pack" in err and "pack the model again" in err
    with pytest.raises(AsrError, match=f"no {MANIFEST}"):
        asrtrain.Transcriber.load(packed)
    assert not (tmp_path / "out").exists()
    assert run("transcribe", exp, tmp_path / "a.wav").exit_code == 0  # an exp dir has no manifest to check


@pytest.mark.parametrize("added", ["lm.arpa", "final.pt"])
def test_a_file_dropped_into_a_pack_after_packing_is_refused(exp, tmp_path, added):
    from asrtrain.transcribe.pack import pack
    from tests.helpers.cli_helpers import one_error, run
    packed = pack(exp, tmp_path / "model")
    shutil.copy(exp / "final.pt", packed / "final.pt") if added == "final.pt" else \
        (packed / "lm.arpa").write_text("\\data\\\nngram 1=1\n\n\\1-grams:\n-1.0 yes\n\n\\end\\\n")
    sf.write(tmp_path / "a.wav", np.zeros(16000, np.float32), 16000)
    assert f"{added} is not in the manifest" in one_error(run("transcribe", packed, tmp_path / "a.wav"))


def test_pack_reads_its_lm_and_params_as_transcribe_does_and_refuses_bad_ones(exp, tmp_path):
    from asrtrain.lm.ngram import train_ngram
    from tests.helpers.cli_helpers import one_error, run
    train_ngram([["yes", "no"], ["go", "stop"]], order=2).write_arpa(tmp_path / "lm.arpa")
    (tmp_path / "bad.arpa").write_text("lm bad\n")
    (tmp_path / "typo.yaml").write_text("lm_wieght: 0.5\n")
    (tmp_path / "nan.yaml").write_text("lm_weight: .nan\nword_bonus: 1\nbeam_size: 4\n")
    err = one_error(run("pack", exp, tmp_path / "p1", "--lm", tmp_path / "bad.arpa"))
    assert "bad.arpa" in err and "not an ARPA file" in err
    err = one_error(run("pack", exp, tmp_path / "p2", "--lm", tmp_path / "lm.arpa", "--params", tmp_path / "typo.yaml"))
    assert "typo.yaml" in err and "no 'lm_weight'" in err
    err = one_error(run("pack", exp, tmp_path / "p3", "--lm", tmp_path / "lm.arpa", "--params", tmp_path / "nan.yaml"))
    assert "nan.yaml:1" in err and "'lm_weight' must be a finite number" in err
    err = one_error(run("pack", exp, tmp_path / "p4", "--params", tmp_path / "typo.yaml"))
    assert "--params is for the lexicon search" in err and "--lm" in err
    assert not any((tmp_path / f"p{i}").exists() for i in range(1, 5))
    assert run("pack", exp, tmp_path / "ok", "--lm", tmp_path / "lm.arpa").exit_code == 0

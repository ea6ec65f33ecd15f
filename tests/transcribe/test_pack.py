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


def _lm_and_params(tmp_path):
    from asrtrain.lm.ngram import train_ngram
    train_ngram([["yes", "no"], ["go", "stop"]], order=2).write_arpa(tmp_path / "lm.arpa")
    train_ngram([["one", "two"], ["three"]], order=2).write_arpa(tmp_path / "other.arpa")
    (tmp_path / "best.yaml").write_text("lm_weight: 0.5\nword_bonus: 1.0\nbeam_size: 4\n")
    (tmp_path / "best2.yaml").write_text("lm_weight: 0.25\nword_bonus: 2.0\nbeam_size: 4\n")
    return tmp_path / "lm.arpa", tmp_path / "other.arpa", tmp_path / "best.yaml", tmp_path / "best2.yaml"


def test_packing_a_tampered_pack_is_refused_not_laundered(exp, tmp_path):
    from asrtrain.transcribe.pack import pack
    from tests.helpers.cli_helpers import one_error, run
    packed = pack(exp, tmp_path / "model")
    data = bytearray((packed / "model.safetensors").read_bytes())
    data[-100] ^= 1
    (packed / "model.safetensors").write_bytes(bytes(data))
    err = one_error(run("pack", packed, tmp_path / "again"))
    assert "MANIFEST.sha256:" in err and "model.safetensors is missing or changed since packing" in err
    assert not (tmp_path / "again").exists()


def test_re_packing_a_pack_carries_its_lm_params_scores_and_says_where_the_weights_came_from(exp, tmp_path):
    from asrtrain.transcribe.pack import pack
    from tests.helpers.cli_helpers import run
    lm, other, best, best2 = _lm_and_params(tmp_path)
    copy = tmp_path / "exp"
    shutil.copytree(exp, copy)
    (copy / "decode_greedy_test" / "scoring").mkdir(parents=True)
    (copy / "decode_greedy_test" / "scoring" / "wer").write_text("%WER 12.50 [ 1 / 8, 0 ins, 0 del, 1 sub ]\n")
    first = pack(copy, tmp_path / "first", lm=lm, params=best)
    again = pack(first, tmp_path / "again")
    for name in ("lm.arpa", "params.yaml", "config.yaml", "tokenizer.model"):
        assert (again / name).read_bytes() == (first / name).read_bytes(), name
    from safetensors.torch import load_file
    a, b = load_file(str(again / "model.safetensors")), load_file(str(first / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    card = (again / "MODEL.md").read_text()
    assert "weights: the pack first's model.safetensors (checked against its MANIFEST.sha256)" in card and "final.pt" not in card
    assert "- lm.arpa: from the pack first" in card and "- params.yaml: from the pack first" in card
    assert "%WER 12.50" in card and "Scores (from the card of the pack first)" in card
    sf.write(tmp_path / "a.wav", np.zeros(16000, np.float32), 16000)
    assert run("transcribe", again, tmp_path / "a.wav").stdout == run("transcribe", first, tmp_path / "a.wav").stdout
    # --lm wins over the pack's LM and drops its params (tuned for the old LM) unless --params is given
    new_lm = pack(first, tmp_path / "new_lm", lm=other)
    assert (new_lm / "lm.arpa").read_bytes() == other.read_bytes() and not (new_lm / "params.yaml").exists()
    assert "- lm.arpa: from --lm other.arpa" in (new_lm / "MODEL.md").read_text()
    both = pack(first, tmp_path / "both", lm=other, params=best2)
    assert (both / "params.yaml").read_bytes() == best2.read_bytes()
    # --params alone replaces the pack's params and keeps its LM
    new_params = pack(first, tmp_path / "new_params", params=best2)
    assert (new_params / "params.yaml").read_bytes() == best2.read_bytes()
    assert (new_params / "lm.arpa").read_bytes() == lm.read_bytes()


def test_the_card_gives_the_epochs_the_model_file_records(exp, tmp_path):
    from asrtrain.model.files import load_checked, save_checked
    from asrtrain.transcribe.pack import pack
    copy = tmp_path / "exp"
    shutil.copytree(exp, copy)
    card = (pack(copy, tmp_path / "old") / "MODEL.md").read_text()  # a final.pt that records no epochs
    assert "training: train.epochs" in card and "does not record how many epochs ran" in card
    payload = load_checked(copy / "final.pt")
    save_checked({**payload, "epochs": 7, "averaged": 3}, copy / "final.pt")
    first = pack(copy, tmp_path / "new")
    assert "- training: 7 epochs, the average of the last 3 epoch checkpoint(s)" in (first / "MODEL.md").read_text()
    assert "- training: 7 epochs, the average" in (pack(first, tmp_path / "again") / "MODEL.md").read_text()

"""pack -> transcribe in a fresh dir with the exp dir deleted; a changed file is refused."""

import shutil

import numpy as np
import soundfile as sf



def test_pack_then_transcribe_with_the_exp_dir_deleted(exp, tmp_path, speechy):
    import asrtrain
    from asrtrain.transcribe.pack import pack
    wave = speechy(1.5, 16000)
    before = asrtrain.Transcriber.load(exp).transcribe(wave, sample_rate=16000).text
    copy = tmp_path / "exp"
    shutil.copytree(exp, copy)
    (copy / "decode_greedy_test" / "scoring").mkdir(parents=True)
    (copy / "decode_greedy_test" / "scoring" / "wer").write_text("%WER 12.50 [ 1 / 8, 0 ins, 0 del, 1 sub ]\n")
    packed = pack(copy, tmp_path / "fresh" / "model")
    shutil.rmtree(copy)
    card = (packed / "MODEL.md").read_text()
    assert "%WER 12.50" in card and "asrtrain" in card
    sf.write(tmp_path / "a.wav", wave, 16000)
    from tests.helpers.cli_helpers import run
    res = run("transcribe", packed, tmp_path / "a.wav")
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == f"a {before}".strip()


def test_a_pack_whose_file_changed_is_refused_in_one_line(exp, tmp_path):
    from asrtrain.transcribe.pack import pack
    from tests.helpers.cli_helpers import one_error, run
    packed = pack(exp, tmp_path / "model")
    with open(packed / "tokenizer.model", "ab") as fh:
        fh.write(b"x")
    sf.write(tmp_path / "a.wav", np.zeros(16000, np.float32), 16000)
    assert "changed since packing" in one_error(run("transcribe", packed, tmp_path / "a.wav"))

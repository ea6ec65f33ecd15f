"""Attention rescoring in transcribe: tune-lm's params with att_rescore > 0 give decode's text."""

import pytest
import soundfile as sf

from tests.helpers.wav_dir import wav_data_and_feats

from tests.helpers.tiny_exp import make_exp


def _params(path, att, nbest=4):
    path.write_text(f"lm_weight: 0.5\nword_bonus: 1.0\nbeam_size: 6\noov_penalty: closed\natt_rescore: {att}\n"
                    f"nbest: {nbest}\n")
    return path


def _lines(text):
    """Kaldi text -> {utt: text} (a hypothesis's trailing space, which decode's text may keep, dropped)."""
    return {k: v.strip() for k, v in (ln.split(" ", 1) if " " in ln else (ln, "") for ln in text.splitlines())}


@pytest.mark.slow
def test_transcribe_rescores_like_decode_over_the_same_utterances(tmp_path, speechy):
    from tests.helpers.cli_helpers import run
    exp = make_exp(tmp_path / "exp", att_weight=0.3)
    data = wav_data_and_feats(tmp_path, speechy, 4, 0.3)
    r = run("lm", "train", "--text", exp / "text", "--out", tmp_path / "lm", "--order", "2")
    assert r.exit_code == 0, r.output
    lm = tmp_path / "lm" / "lm.arpa"
    texts = {}
    for att in (0.0, 5.0):
        params = _params(tmp_path / f"best{att}.yaml", att)
        res = run("decode", exp, tmp_path / "feats", tmp_path / f"dec{att}", "--lm", lm, "--params", params,
                  "--device", "cpu")
        assert res.exit_code == 0, res.output
        want = _lines((tmp_path / f"dec{att}" / "text").read_text())
        res = run("transcribe", exp, data / "wav.scp", "--lm", lm, "--params", params)
        assert res.exit_code == 0, res.output
        assert _lines(res.stdout) == want and any(want.values())
        texts[att] = want
    assert texts[0.0] != texts[5.0]  # the rescoring changed some hypothesis: the comparison says something


def test_rescoring_params_for_a_model_without_a_decoder_or_params_without_an_lm_are_one_line(exp, tmp_path,
                                                                                              speechy):
    from tests.helpers.cli_helpers import one_error, run
    sf.write(tmp_path / "a.wav", speechy(1.0, 16000), 16000)
    (tmp_path / "lm.arpa").write_text("\\data\\\nngram 1=4\n\n\\1-grams:\n-0.5 <s>\n-0.5 </s>\n-0.5 yes\n-0.5 no\n\n"
                                      "\\end\\\n")
    params = _params(tmp_path / "best.yaml", 0.5)
    err = one_error(run("transcribe", exp, tmp_path / "a.wav", "--lm", tmp_path / "lm.arpa", "--params", params))
    assert "attention decoder" in err
    assert "--params is for the lexicon search" in one_error(run("transcribe", exp, tmp_path / "a.wav",
                                                                 "--params", params))

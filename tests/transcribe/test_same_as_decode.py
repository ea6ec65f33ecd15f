"""Transcribe of raw wavs gives the text decode gives over the same utterances' features."""

import pytest
import soundfile as sf

from tests.helpers.wav_dir import wav_data_and_feats


@pytest.mark.slow
def test_transcribe_of_wavs_equals_decode_of_their_features(exp, tmp_path, speechy):
    from tests.helpers.cli_helpers import run
    data = wav_data_and_feats(tmp_path, speechy, 3, 0.4)
    res = run("decode", exp, tmp_path / "feats", tmp_path / "dec", "--method", "greedy", "--device", "cpu")
    assert res.exit_code == 0, res.output
    decoded = dict(ln.split(" ", 1) if " " in ln else (ln, "") for ln in
                   (tmp_path / "dec" / "text").read_text().splitlines())
    res = run("transcribe", exp, data / "wav.scp")
    assert res.exit_code == 0, res.output
    got = dict(ln.split(" ", 1) if " " in ln else (ln, "") for ln in res.stdout.splitlines())
    assert got == decoded and any(decoded.values())  # non-empty hypotheses, so the comparison says something


@pytest.mark.slow
def test_utt2spk_gives_decode_of_per_speaker_cmvn_features(exp, tmp_path, speechy):
    """Two utterances of one speaker: --utt2spk normalises with their joint stats, as features did."""
    from tests.helpers.cli_helpers import run
    data = tmp_path / "data"
    data.mkdir()
    utts = ["s1-a", "s1-b", "s2-a"]
    for i, u in enumerate(utts):
        sf.write(tmp_path / f"{u}.wav", speechy(1.0 + 0.5 * i, 16000, seed=i) * (1 + 2 * i), 16000)
    (data / "wav.scp").write_text("".join(f"{u} {tmp_path / f'{u}.wav'}\n" for u in utts))
    (data / "utt2spk").write_text("".join(f"{u} {u[:2]}\n" for u in utts))
    (data / "spk2utt").write_text("s1 s1-a s1-b\ns2 s2-a\n")
    (data / "text").write_text("".join(f"{u} yes\n" for u in utts))
    assert run("features", data, tmp_path / "feats", "--set", "num_mel_bins=23", "--set", "cmvn=speaker"
               ).exit_code == 0
    assert run("decode", exp, tmp_path / "feats", tmp_path / "dec", "--method", "greedy",
               "--device", "cpu").exit_code == 0
    want = (tmp_path / "dec" / "text").read_text().split("\n")
    res = run("transcribe", exp, data / "wav.scp", "--utt2spk", data / "utt2spk")
    assert res.exit_code == 0, res.output
    assert [ln.rstrip() for ln in res.stdout.splitlines()] == [ln.rstrip() for ln in want if ln]

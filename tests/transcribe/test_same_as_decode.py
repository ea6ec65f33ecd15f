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


def test_utt2spk_featurises_each_file_once_and_equals_two_passes(exp, tmp_path, speechy, monkeypatch):
    """Speaker CMVN through ``utt2spk``: one fbank pass a file (before, the stats took a pass of their
    own), the same hypotheses as stats taken first and handed in as ``speaker_stats``, and the same
    again when a speaker's frames are over what is held (those files are featurised a second time)."""
    from asrtrain.features import cmvn
    from asrtrain.transcribe import batching
    from asrtrain.transcribe.model import Transcriber

    tr = Transcriber.load(exp)
    utts = ["s1-a", "s1-b", "s2-a", "s1-c"]
    pairs = []
    for i, u in enumerate(utts):
        sf.write(tmp_path / f"{u}.wav", speechy(0.8 + 0.4 * i, 16000, seed=i) * (1 + 2 * i), 16000)
        pairs.append((u, str(tmp_path / f"{u}.wav")))
    spk = {u: u[:2] for u in utts}
    stats = {}
    for u, path in pairs:
        stats[spk[u]] = cmvn.accumulate(tr.raw_features(tr.audio(path)), stats.get(spk[u]))
    want = [(u, r.text, [w.start for w in r.words]) for u, r in
            tr.transcribe_many(pairs, speaker_stats={u: stats[spk[u]] for u in utts})]
    calls = []
    real = Transcriber.raw_features
    monkeypatch.setattr(Transcriber, "raw_features", lambda self, w: calls.append(len(w)) or real(self, w))
    got = [(u, r.text, [w.start for w in r.words]) for u, r in tr.transcribe_many(pairs, utt2spk=spk)]
    assert got == want and [u for u, _, _ in got] == utts  # input order, not speaker order
    assert len(calls) == len(utts)
    calls.clear()
    monkeypatch.setattr(batching, "KEEP_FRAMES", 150)  # about one file's frames held per speaker
    assert [(u, r.text, [w.start for w in r.words]) for u, r in tr.transcribe_many(pairs, utt2spk=spk)] == want
    assert len(utts) < len(calls) < 2 * len(utts)

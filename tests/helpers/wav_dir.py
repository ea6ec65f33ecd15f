"""A Kaldi data dir of synthetic wavs and its features, for tests that compare transcribe with decode."""

from pathlib import Path

import soundfile as sf

from tests.helpers.cli_helpers import run


def wav_data_and_feats(tmp_path: Path, speechy, n: int, step: float) -> Path:
    """``n`` wavs u0.. of 1 + step * i seconds in ``tmp_path/data`` (one speaker each, so per-utterance
    CMVN is per-speaker CMVN), their 23-bin speaker-CMVN features in ``tmp_path/feats``; returns the data
    dir."""
    data = tmp_path / "data"
    data.mkdir()
    utts = [f"u{i}" for i in range(n)]
    for i, u in enumerate(utts):
        sf.write(tmp_path / f"{u}.wav", speechy(1.0 + step * i, 16000, seed=i), 16000)
    (data / "wav.scp").write_text("".join(f"{u} {tmp_path / f'{u}.wav'}\n" for u in utts))
    (data / "utt2spk").write_text("".join(f"{u} {u}\n" for u in utts))
    (data / "spk2utt").write_text("".join(f"{u} {u}\n" for u in utts))
    (data / "text").write_text("".join(f"{u} yes\n" for u in utts))
    assert run("features", data, tmp_path / "feats", "--set", "num_mel_bins=23", "--set", "cmvn=speaker"
               ).exit_code == 0
    return data

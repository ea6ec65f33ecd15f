"""asrtrain data info: counts, sample rate and hours of a data dir."""

from pathlib import Path

import numpy as np
import soundfile as sf
from tests.helpers.cli_helpers import one_error, run


def make_dir(tmp_path: Path, rates, seconds=1.0, speeds=None) -> Path:
    d = tmp_path / "d"
    d.mkdir()
    ids = [f"s{i}-u{i}" for i in range(len(rates))]
    for u, r in zip(ids, rates):
        sf.write(tmp_path / f"{u}.wav", np.zeros(int(r * seconds), np.float32), r)
    (d / "wav.scp").write_text("".join(f"{u} {tmp_path / u}.wav\n" for u in ids))
    (d / "text").write_text("".join(f"{u} A\n" for u in ids))
    (d / "utt2spk").write_text("".join(f"{u} {u.split('-')[0]}\n" for u in ids))
    (d / "spk2utt").write_text("".join(f"{u.split('-')[0]} {u}\n" for u in ids))
    if speeds:
        (d / "reco2speed").write_text("".join(f"{u} {f}\n" for u, f in zip(ids, speeds)))
    return d


def test_prints_counts_rate_and_hours(tmp_path):
    d = make_dir(tmp_path, [8000, 8000], seconds=1.8)
    r = run("data", "info", d)
    assert r.exit_code == 0, r.output
    assert "utterances: 2" in r.output and "sample_rate: 8000" in r.output and "hours: 0.001" in r.output
    r = run("data", "info", d, "--key", "sample_rate")
    assert r.stdout.strip() == "8000"


def test_hours_count_speed_factors(tmp_path):
    d = make_dir(tmp_path, [16000, 16000], seconds=36.0, speeds=[0.8, 1.2])  # 45 s + 30 s
    r = run("data", "info", d, "--key", "hours")
    assert r.exit_code == 0 and float(r.stdout.strip()) == round(75 / 3600, 3)


def test_mixed_rates_are_one_line_naming_both(tmp_path):
    d = make_dir(tmp_path, [8000, 16000])
    r = run("data", "info", d, "--key", "sample_rate")
    line = one_error(r)
    assert "8000 Hz (s0-u0)" in line and "16000 Hz (s1-u1)" in line and "wav.scp" in line

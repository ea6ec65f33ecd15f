"""``asrtrain data perturb-speed``: Kaldi's 3-way speed perturbation (ids, speakers, times, audio)."""

from pathlib import Path

import numpy as np
import pytest

from asrtrain.data.resample import speed_perturb
from asrtrain.data.perturb import parse_factors, perturb_speed, sox_entry
from asrtrain.data.table import read_table
from asrtrain.data.validate import validate
from tests.helpers.cli_helpers import one_error, run
from tests.helpers.sphere_fixture import make_data_dir


def _peak_hz(x: np.ndarray, rate: int) -> float:
    spec = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    return float(np.argmax(spec) * rate / len(x))


def test_speed_perturb_changes_tempo_and_pitch_together():
    rate = 16000
    t = np.arange(rate) / rate
    x = (0.5 * np.sin(2 * np.pi * 400 * t)).astype(np.float32)
    for f in (0.9, 1.1):
        y = speed_perturb(x, rate, f)
        assert abs(len(y) - len(x) / f) <= 1
        assert abs(_peak_hz(y, rate) - 400 * f) < 3  # sox speed: pitch moves with tempo
    assert speed_perturb(x, rate, 1.0) is x


def test_perturb_ids_speakers_durations_and_features(tmp_path):
    src = make_data_dir(tmp_path / "src", n_utts=4, audio_format="sph")
    (src / "utt2dur").write_text("".join(f"{u} 1.0\n" for u in read_table(src / "utt2spk")))
    (src / "spk2gender").write_text("spk0 f\nspk1 m\n")
    out = tmp_path / "sp"
    r = run("data", "perturb-speed", src, out, "--factors", "0.9,1.0,1.1")
    assert r.exit_code == 0, r.output
    assert "12 utterances, 6 speakers" in r.output
    d = validate(out, audio=True)
    for name in ("wav.scp", "text", "utt2spk", "spk2utt", "utt2dur", "utt2uniq", "reco2speed", "spk2gender"):
        keys = [line.split()[0] for line in (out / name).read_text().splitlines()]
        assert keys == sorted(keys), name
    orig = sorted(read_table(src / "utt2spk"))
    assert sorted(d.utt2spk) == sorted(orig + [f"sp0.9-{u}" for u in orig] + [f"sp1.1-{u}" for u in orig])
    assert d.utt2spk["sp0.9-spk0-utt0"] == "sp0.9-spk0" and d.utt2spk["spk0-utt0"] == "spk0"  # kept apart
    assert d.text["sp1.1-spk1-utt1"] == read_table(src / "text")["spk1-utt1"]
    assert read_table(out / "utt2uniq")["sp0.9-spk1-utt3"] == "spk1-utt3"
    dur = read_table(out / "utt2dur")
    assert float(dur["sp0.9-spk0-utt0"]) == pytest.approx(1 / 0.9, abs=1e-4)
    assert float(dur["sp1.1-spk0-utt0"]) == pytest.approx(1 / 1.1, abs=1e-4)
    assert read_table(out / "reco2speed")["sp1.1-spk0-utt2"] == "1.1"
    assert read_table(out / "spk2gender")["sp1.1-spk1"] == "m"
    assert d.wav_scp["sp0.9-spk0-utt0"] == d.wav_scp["spk0-utt0"]  # the reader applies reco2speed
    # features see perturbed audio: frame counts scale by about 1 / factor
    feats = tmp_path / "feats"
    r = run("features", out, feats, "--set", "num_mel_bins=23", "--set", "cmvn=speaker")
    assert r.exit_code == 0, r.output
    frames = {k: int(v) for k, v in read_table(feats / "utt2num_frames").items()}
    for u in orig:
        for f in (0.9, 1.1):
            assert frames[f"sp{f}-{u}"] / frames[u] == pytest.approx(1 / f, abs=0.02), (u, f)
    assert "sp0.9-spk0" in read_table(feats / "cmvn.scp")  # perturbed speakers get their own CMVN stats


def test_perturb_scales_segments(tmp_path):
    src = make_data_dir(tmp_path / "src", n_utts=2, seconds=1.0)
    recs = read_table(src / "wav.scp")
    # two segments per recording (utterance ids now differ from recording ids)
    utts = {}
    for r in recs:
        utts[f"{r}-a"] = (r, 0.1, 0.5)
        utts[f"{r}-b"] = (r, 0.5, 1.0)
    (src / "segments").write_text("".join(f"{u} {r} {s} {e}\n" for u, (r, s, e) in sorted(utts.items())))
    spk = read_table(src / "utt2spk")
    text = read_table(src / "text")
    (src / "utt2spk").write_text("".join(f"{u} {spk[r]}\n" for u, (r, _, _) in sorted(utts.items())))
    (src / "text").write_text("".join(f"{u} {text[r]}\n" for u, (r, _, _) in sorted(utts.items())))
    (src / "spk2utt").unlink()
    assert run("data", "fix", src, "--no-audio").exit_code == 0
    out = tmp_path / "sp"
    perturb_speed(src, out, "0.9,1.1")  # no 1.0: only perturbed copies
    d = validate(out, audio=True)  # the last 0.9 segment ends past the original file: validate scales it
    seg = d.segments["sp0.9-spk0-utt0-b"]
    assert seg.rec == "sp0.9-spk0-utt0"
    assert (seg.start, seg.end) == (round(0.5 / 0.9, 4), round(1.0 / 0.9, 4))
    assert d.segments["sp1.1-spk1-utt1-a"].end == round(0.5 / 1.1, 4)
    assert all(u.startswith("sp") for u in d.utt2spk)


def test_sox_form_and_bad_input(tmp_path):
    assert sox_entry("/a/b.wav", 0.9) == "sox /a/b.wav -t wav - speed 0.9 |"
    assert sox_entry("/a/b.sph", 1.1) == "sph2pipe -f wav -p /a/b.sph | sox -t wav - -t wav - speed 1.1 |"
    assert sox_entry("gen x |", 0.9) == "gen x | sox -t wav - -t wav - speed 0.9 |"
    src = make_data_dir(tmp_path / "src", n_utts=2)
    out = tmp_path / "sox"
    assert run("data", "perturb-speed", src, out, "--sox", "--always-include-prefix").exit_code == 0
    wav = read_table(out / "wav.scp")
    assert wav["sp0.9-spk0-utt0"].endswith("speed 0.9 |") and not wav["sp1.0-spk0-utt0"].endswith("|")
    assert not (out / "reco2speed").exists()
    assert parse_factors("0.9, 1.1") == [0.9, 1.1]
    assert "is given twice" in one_error(run("data", "perturb-speed", src, tmp_path / "x", "--factors", "0.9,0.9"))
    assert "not a number" in one_error(run("data", "perturb-speed", src, tmp_path / "x", "--factors", "fast"))
    # a perturbed dir perturbed again: sp0.9- of the original would occur twice; --sox cannot stack
    once = tmp_path / "once"
    perturb_speed(src, once, "0.9,1.0")
    assert "would occur twice" in one_error(run("data", "perturb-speed", once, tmp_path / "y", "--factors", "0.9,1.0"))
    assert "reco2speed" in one_error(run("data", "perturb-speed", once, tmp_path / "z", "--sox"))


def test_a_copy_sped_up_below_one_frame_is_left_to_features_whose_fix_keeps_the_perturbation(tmp_path):
    import soundfile as sf
    src = make_data_dir(tmp_path / "src", n_utts=2)
    utt, path = (src / "wav.scp").read_text().splitlines()[0].split()
    x, rate = sf.read(path, dtype="int16")
    sf.write(path, x[:416], rate, subtype="PCM_16")  # 26 ms: one frame, but 23.6 ms sped up 1.1 times
    assert validate(src, audio=True)
    out = tmp_path / "sp"
    assert run("data", "perturb-speed", src, out, "--factors", "1.0,1.1").exit_code == 0
    err = one_error(run("data", "validate", out))
    assert f"utterance 'sp1.1-{utt}' is 379 samples (23.7 ms), shorter than one 25 ms" in err
    err = one_error(run("features", out, tmp_path / "f"))
    assert f"utterance 'sp1.1-{utt}' is shorter than one frame" in err and f"asrtrain data fix {out}" in err
    assert run("data", "fix", out).exit_code == 0
    assert run("features", out, tmp_path / "f", "--set", "num_mel_bins=23").exit_code == 0

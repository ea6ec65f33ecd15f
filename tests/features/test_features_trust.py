"""``asrtrain features`` under bad input: NaN audio is a named bad utterance, a failed rerun keeps the old
output, a full disk is one line."""

import errno
import os

import kaldiio
import numpy as np
import pytest
import soundfile as sf

from asrtrain.features.reader import FeatureReader
from tests.helpers.cli_helpers import one_error, run
from tests.helpers.sphere_fixture import make_data_dir


def _float_wav(path, nan_at=None, inf_at=None, seconds=0.6, rate=16000):
    x = (0.2 * np.sin(np.arange(int(seconds * rate)) * 0.05)).astype(np.float32)
    if nan_at is not None:
        x[nan_at] = np.nan
    if inf_at is not None:
        x[inf_at] = np.inf
    sf.write(str(path), x, rate, subtype="FLOAT")


def _snapshot(out):
    return {p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


@pytest.fixture
def data(tmp_path):
    return make_data_dir(tmp_path, n_utts=4, speakers=2)


def test_nan_audio_is_a_named_bad_utterance_end_to_end(data, tmp_path):
    lines = (data / "wav.scp").read_text().splitlines()
    nan_utt, nan_path = lines[1].split()
    inf_utt, inf_path = lines[3].split()
    _float_wav(nan_path, nan_at=1234)
    _float_wav(inf_path, inf_at=7)
    out = tmp_path / "fbank"
    err = one_error(run("features", data, out))
    assert f"{data}/wav.scp:2: utterance '{nan_utt}' has 1 NaN or Inf audio sample(s) (first at sample 1234)" in err
    assert "--skip-bad" in err and not out.exists()
    r = run("features", data, out, "--skip-bad", "--set", "num_mel_bins=23")
    assert r.exit_code == 0, r.output
    assert "4 utterances in, 2 out, 2 bad" in r.stdout
    report = (out / "bad_utts.txt").read_text().splitlines()
    assert [ln.split()[0] for ln in report] == sorted([nan_utt, inf_utt]) and all("NaN or Inf" in ln for ln in report)
    stats = kaldiio.load_mat(str(out / "cmvn_global.ark"))
    assert np.isfinite(stats).all() and stats[0, -1] > 0
    reader = FeatureReader(out)
    assert nan_utt not in reader and inf_utt not in reader and len(reader) == 2
    assert all(np.isfinite(reader.load(u)).all() for u in reader.keys())


def test_nan_in_one_segment_spoils_only_that_segment(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    rate = 16000
    x = (0.2 * np.sin(np.arange(2 * rate) * 0.05)).astype(np.float32)
    x[int(1.5 * rate)] = np.nan  # inside the second segment only
    sf.write(str(tmp_path / "rec.wav"), x, rate, subtype="FLOAT")
    (data / "wav.scp").write_text(f"rec {tmp_path / 'rec.wav'}\n")
    (data / "segments").write_text("rec-a rec 0.0 1.0\nrec-b rec 1.0 2.0\n")
    (data / "text").write_text("rec-a hello\nrec-b world\n")
    (data / "utt2spk").write_text("rec-a rec\nrec-b rec\n")
    (data / "spk2utt").write_text("rec rec-a rec-b\n")
    err = one_error(run("features", data, tmp_path / "a"))
    assert f"{data}/segments:2: utterance 'rec-b' has 1 NaN or Inf audio sample(s)" in err
    r = run("features", data, tmp_path / "b", "--skip-bad")
    assert r.exit_code == 0 and "2 utterances in, 1 out, 1 bad" in r.stdout, r.output


@pytest.mark.parametrize("times", ["nan 1.0", "0.0 inf", "-0.5 1.0", "0.0 -inf", "0.5 0.2", "x 1"])
def test_segment_times_refused_by_validate_fix_and_features(tmp_path, times):
    data = make_data_dir(tmp_path, n_utts=2, speakers=1)
    recs = [ln.split()[0] for ln in (data / "wav.scp").read_text().splitlines()]
    (data / "segments").write_text(f"{recs[0]} {recs[0]} 0.0 0.5\n{recs[1]} {recs[1]} {times}\n")
    err = one_error(run("data", "validate", data))
    assert f"{data}/segments:2: malformed record for '{recs[1]}'" in err
    err = one_error(run("features", data, tmp_path / "f"))
    assert f"{data}/segments:2: malformed record" in err
    r = run("data", "fix", data)
    assert r.exit_code == 0 and "2 utterances in, 1 out" in r.stdout, r.output
    assert recs[1] not in (data / "segments").read_text()


def test_failed_rerun_leaves_the_old_output_intact(data, tmp_path):
    out = tmp_path / "fbank"
    assert run("features", data, out, "--nj", 2).exit_code == 0
    before = _snapshot(out)
    keys = FeatureReader(out).keys()
    for line in (data / "wav.scp").read_text().splitlines():  # every recording now bad
        _float_wav(line.split()[1], nan_at=0)
    err = one_error(run("features", data, out, "--skip-bad", "--nj", 2))
    aside = tmp_path / "fbank.bad_utts.txt"
    assert f"no utterances left out of 4: all 4 are bad (fix: see the reasons in {aside})" in err
    assert len(aside.read_text().splitlines()) == 4 and "NaN" in aside.read_text()
    assert _snapshot(out) == before  # byte for byte
    err = one_error(run("features", data, out))  # no --skip-bad: the first bad utterance stops it
    assert "NaN or Inf audio" in err and _snapshot(out) == before
    reader = FeatureReader(out)
    assert reader.keys() == keys and all(reader.load(u).shape[0] > 0 for u in keys)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".fbank.")]  # no staging left


def test_killed_swap_is_mended_and_foreign_dirs_are_not_replaced(data, tmp_path):
    out = tmp_path / "fbank"
    assert run("features", data, out).exit_code == 0
    os.replace(out, tmp_path / ".fbank.old")  # killed between the two renames of the swap
    (tmp_path / ".fbank.new").mkdir()  # and a half-built staging dir
    r = run("features", data, out)
    assert r.exit_code == 0 and "already complete" in r.stdout, r.output
    assert not (tmp_path / ".fbank.old").exists() and not (tmp_path / ".fbank.new").exists()
    (out / ".stage.done").touch()  # a recipe's marker does not stop a rerun
    assert run("features", data, out, "--set", "num_mel_bins=30").exit_code == 0
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("precious\n")
    err = one_error(run("features", data, mine))
    assert f"{mine}: OUT_DIR holds 'notes.txt'" in err and (mine / "notes.txt").exists()


def test_full_disk_while_writing_an_ark_is_one_line(data, tmp_path, monkeypatch):
    out = tmp_path / "fbank"
    assert run("features", data, out).exit_code == 0
    before = _snapshot(out)
    import kaldiio.matio

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(kaldiio.matio, "write_array", full)
    err = one_error(run("features", data, out, "--set", "num_mel_bins=40"))
    assert "no space left writing this file" in err and "feats.1.ark" in err and "df -h" in err
    assert _snapshot(out) == before


def test_full_disk_anywhere_under_the_cli_is_one_line(data, tmp_path, monkeypatch):
    import asrtrain.data.validate as validate

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(validate, "find_problems", full)
    err = one_error(run("data", "validate", data))
    assert err == ("asrtrain: error: no space left on device writing output (fix: free disk space "
                   "(df -h shows which file system is full) and run again)")


def test_symlinked_out_dir_is_replaced_where_it_points(data, tmp_path):
    real = tmp_path / "real"
    assert run("features", data, real).exit_code == 0
    link = tmp_path / "link"
    link.symlink_to(real)
    r = run("features", data, link, "--set", "num_mel_bins=40")
    assert r.exit_code == 0, r.output
    assert link.is_symlink() and FeatureReader(link).dim == 40 == FeatureReader(real).dim
    assert all(str(real) in ln for ln in (link / "feats.scp").read_text().splitlines())


def test_an_utterance_shorter_than_one_frame_names_a_fix_the_recipe_can_follow(data, tmp_path):
    utt, path = (data / "wav.scp").read_text().splitlines()[0].split()
    x, rate = sf.read(path, dtype="int16")
    sf.write(path, x[:320], rate, subtype="PCM_16")  # 20 ms: under one 25 ms frame
    err = one_error(run("features", data, tmp_path / "f"))
    assert f"{data}/wav.scp:1: utterance '{utt}' is shorter than one frame (320 samples < 400" in err
    assert f"asrtrain data fix {data} drops it" in err and "--skip-bad" in err
    assert run("data", "fix", data).exit_code == 0  # which it does, and features then run
    assert run("features", data, tmp_path / "f", "--set", "num_mel_bins=23").exit_code == 0

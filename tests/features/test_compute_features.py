"""``asrtrain features``: ark/scp Kaldi can read, CMVN against numpy, reader, idempotence, bad input."""

import pickle
import shutil

import kaldiio
import numpy as np
import pytest
import soundfile as sf

from asrtrain.config import FeatureConfig
from asrtrain.data.audio import load_audio
from asrtrain.features.fbank import fbank
from asrtrain.features.reader import FeatureReader
from tests.helpers.sphere_fixture import make_data_dir, tone, write_sphere


from tests.helpers.cli_helpers import one_error, run  # noqa: F401


@pytest.fixture
def data(tmp_path):
    return make_data_dir(tmp_path, n_utts=6, speakers=3)


def expected_feats(data, conf):
    """Features recomputed directly from the audio: utt -> [T, D]."""
    out = {}
    for line in (data / "wav.scp").read_text().splitlines():
        utt, path = line.split(maxsplit=1)
        wave, rate = load_audio(path, target_rate=conf.sample_rate)
        out[utt] = fbank(wave, rate, conf, seed=utt)
    return out


def test_features_global_cmvn_kaldi_readable(data, tmp_path):
    out = tmp_path / "fbank"
    r = run("features", data, out, "--nj", 2, "--set", "num_mel_bins=40")
    assert r.exit_code == 0, r.output
    assert "6 utterances in, 6 out, 0 bad" in r.stdout
    conf = FeatureConfig(num_mel_bins=40)
    want = expected_feats(data, conf)
    # kaldiio reads the scp (absolute ark paths, ark.J:offset) as Kaldi would
    scp = kaldiio.load_scp(str(out / "feats.scp"))
    assert sorted(scp) == list(scp) == sorted(want)
    for utt, mat in scp.items():
        np.testing.assert_array_equal(mat, want[utt])
    assert all(line.split()[1].startswith(str(out.resolve() / "arks" / "feats."))
               for line in (out / "feats.scp").read_text().splitlines())
    assert len(list((out / "arks").glob("feats.*.ark"))) == 2 and not list((out / "arks").glob(".*tmp"))
    # each ark is a valid sequential Kaldi archive too (ark:feats.J.ark)
    seq = {k: m for j in (1, 2) for k, m in kaldiio.load_ark(str(out / "arks" / f"feats.{j}.ark"))}
    assert sorted(seq) == sorted(want) and all(np.array_equal(seq[u], want[u]) for u in want)
    frames = dict(ln.split() for ln in (out / "utt2num_frames").read_text().splitlines())
    assert {u: int(n) for u, n in frames.items()} == {u: m.shape[0] for u, m in want.items()}
    assert (out / "feat_dim").read_text() == "40\n"
    for name in ("text", "utt2spk", "spk2utt", "wav.scp"):
        assert (out / name).read_text() == (data / name).read_text()
    # global stats: Kaldi's [2, D+1] float64 layout
    stats = kaldiio.load_mat(str(out / "cmvn_global.ark"))
    allf = np.concatenate(list(want.values())).astype(np.float64)
    assert stats.shape == (2, 41) and stats.dtype == np.float64
    np.testing.assert_allclose(stats[0, :40], allf.sum(0), rtol=1e-9)
    np.testing.assert_allclose(stats[1, :40], (allf ** 2).sum(0), rtol=1e-9)
    assert stats[0, 40] == allf.shape[0] and stats[1, 40] == 0
    # the reader applies it: zero mean, unit variance over the whole set
    reader = FeatureReader(out)
    assert reader.dim == 40 and reader.config == conf and reader.keys() == sorted(want)
    normed = np.concatenate([reader.load(u) for u in reader.keys()]).astype(np.float64)
    np.testing.assert_allclose(normed.mean(0), 0, atol=1e-4)
    np.testing.assert_allclose(normed.std(0), 1, atol=1e-4)
    utt = reader.keys()[2]
    assert reader.num_frames(utt) == want[utt].shape[0]
    mean, std = allf.mean(0), allf.std(0)
    np.testing.assert_allclose(reader.load(utt), (want[utt] - mean) / std, atol=1e-4)
    clone = pickle.loads(pickle.dumps(reader))
    np.testing.assert_array_equal(clone.load(utt), reader.load(utt))


def test_speaker_cmvn_and_idempotence(data, tmp_path):
    out = tmp_path / "fbank"
    (tmp_path / "fbank.yaml").write_text("num_mel_bins: 23\ncmvn: speaker\ncmvn_norm_vars: false\n")
    r = run("features", data, out, "--conf", tmp_path / "fbank.yaml")
    assert r.exit_code == 0, r.output
    conf = FeatureConfig(num_mel_bins=23, cmvn="speaker", cmvn_norm_vars=False)
    want = expected_feats(data, conf)
    cmvn = kaldiio.load_scp(str(out / "cmvn.scp"))
    assert [k for k, _ in kaldiio.load_ark(str(out / "cmvn.ark"))] == ["spk0", "spk1", "spk2"]
    assert sorted(cmvn) == ["spk0", "spk1", "spk2"]
    reader = FeatureReader(out)
    for spk in cmvn:
        mats = [want[u] for u in want if u.startswith(spk + "-")]
        allf = np.concatenate(mats).astype(np.float64)
        np.testing.assert_allclose(cmvn[spk][0, :23], allf.sum(0), rtol=1e-9)
        assert cmvn[spk][0, 23] == allf.shape[0]
        utt = next(u for u in want if u.startswith(spk + "-"))
        # norm_vars false: only the speaker mean is removed
        np.testing.assert_allclose(reader.load(utt), want[utt] - allf.mean(0), atol=1e-4)
    stamp = (out / ".done").stat().st_mtime_ns
    r = run("features", data, out, "--conf", tmp_path / "fbank.yaml")
    assert "already complete" in r.stdout and (out / ".done").stat().st_mtime_ns == stamp
    r = run("features", data, out, "--set", "cmvn=none")  # another config: recomputed
    assert "already complete" not in r.stdout
    assert not (out / "cmvn.scp").exists() and not (out / "cmvn_global.ark").exists()
    utt = FeatureReader(out).keys()[0]
    np.testing.assert_array_equal(FeatureReader(out).load(utt), FeatureReader(out).load_raw(utt))


def test_audio_replaced_in_place_is_recomputed(data, tmp_path):
    """The .done marker stamps each audio file's size and mtime: the same data dir over new audio (a
    re-recorded or re-converted file at the same path) computes the features again."""
    out = tmp_path / "fbank"
    assert run("features", data, out, "--set", "cmvn=none").exit_code == 0
    utt, path = (data / "wav.scp").read_text().splitlines()[0].split(maxsplit=1)
    before = FeatureReader(out).load_raw(utt)
    audio, rate = sf.read(path, dtype="int16")
    sf.write(path, np.ascontiguousarray(audio[::-1]), rate, subtype="PCM_16")  # same size, new samples
    r = run("features", data, out, "--set", "cmvn=none")
    assert r.exit_code == 0 and "already complete" not in r.stdout, r.output
    after = FeatureReader(out).load_raw(utt)
    assert after.shape == before.shape and not np.allclose(after, before)
    r = run("features", data, out, "--set", "cmvn=none")  # unchanged since: skipped
    assert "already complete" in r.stdout


def _break(data, tmp_path):
    """Missing audio for the 2nd utterance, a truncated file for the 4th; returns their ids."""
    lines = (data / "wav.scp").read_text().splitlines()
    missing, truncated = lines[1].split()[0], lines[3].split()[0]
    shutil.move(lines[1].split()[1], tmp_path / "moved.wav")
    path = lines[3].split()[1]
    raw = open(path, "rb").read()
    open(path, "wb").write(raw[: len(raw) // 2])
    return missing, truncated


def test_bad_audio_without_and_with_skip_bad(data, tmp_path):
    missing, truncated = _break(data, tmp_path)
    out = tmp_path / "fbank"
    err = one_error(run("features", data, out))
    assert f"{data}/wav.scp:2: audio file not found" in err
    assert not (out / ".done").exists() and not list((out / "arks").glob("*"))
    r = run("features", data, out, "--skip-bad", "--nj", 1)
    assert r.exit_code == 0, r.output
    assert "6 utterances in, 4 out, 2 bad" in r.stdout
    report = (out / "bad_utts.txt").read_text().splitlines()
    assert len(report) == 2
    assert report[0].startswith(f"{missing} {data}/wav.scp:2: audio file not found")
    assert report[1].startswith(f"{truncated} {data}/wav.scp:4: audio file") and "truncated" in report[1]
    assert missing not in (out / "text").read_text() and missing not in (out / "feats.scp").read_text()
    assert len(FeatureReader(out)) == 4


def test_data_level_problems_with_skip_bad(data, tmp_path):
    text = data / "text"
    lines = text.read_text().splitlines()
    empty = lines[2].split()[0]
    lines[2] = empty
    text.write_text("\n".join(lines) + "\n")
    err = one_error(run("features", data, tmp_path / "a"))
    assert f"{text}:3: empty transcript for utterance '{empty}'" in err
    r = run("features", data, tmp_path / "b", "--skip-bad")
    assert r.exit_code == 0 and "6 utterances in, 5 out, 1 bad" in r.stdout
    assert (tmp_path / "b" / "bad_utts.txt").read_text().startswith(f"{empty} {text}:3: empty transcript")
    # dir-level problems are never skipped
    wav = data / "wav.scp"
    wl = wav.read_text().splitlines(keepends=True)
    wav.write_text("".join([wl[1], wl[0]] + wl[2:]))
    err = one_error(run("features", data, tmp_path / "c", "--skip-bad"))
    assert f"{wav}:2: not sorted" in err


def test_sample_rate_mismatch_and_resampling(tmp_path):
    data = make_data_dir(tmp_path, n_utts=2, rate=8000, speakers=1)
    err = one_error(run("features", data, tmp_path / "a"))  # resample: false (default), as Kaldi
    assert f"{data}/wav.scp:1: sample rate 8000 Hz does not match features.sample_rate 16000 Hz" in err
    assert "features.sample_rate=8000" in err and not (tmp_path / "a").exists()
    r = run("features", data, tmp_path / "b", "--set", "resample=true")  # asked for: upsampled
    assert r.exit_code == 0, r.output
    r8 = run("features", data, tmp_path / "c", "--set", "sample_rate=8000", "--set", "num_mel_bins=40")
    assert r8.exit_code == 0, r8.output
    a, c = FeatureReader(tmp_path / "b"), FeatureReader(tmp_path / "c")
    assert a.num_frames(a.keys()[0]) == c.num_frames(c.keys()[0])


def test_bad_yaml_key(data, tmp_path):
    (tmp_path / "f.yaml").write_text("num_mel_bins: 40\nnum_mel_bin: 3\n")
    err = one_error(run("features", data, tmp_path / "a", "--conf", tmp_path / "f.yaml"))
    assert f"{tmp_path / 'f.yaml'}:2: unknown config key 'num_mel_bin'" in err


def test_two_channel_sphere_segments_and_pipes(tmp_path):
    """Switchboard shape: 8 kHz 2-channel µ-law SPHERE, sides A/B by reco2file_and_channel, segments;
    plus a recording read through a pipe."""
    d = tmp_path / "swb"
    d.mkdir()
    left, right = tone(3.0, 8000, 300, seed=1), tone(3.0, 8000, 900, amplitude=2000, seed=2)
    sph = write_sphere(tmp_path / "sw01.sph", np.stack([left, right], 1), coding="ulaw")
    mono = tmp_path / "p.wav"
    sf.write(mono, left, 8000, subtype="PCM_16")
    (d / "wav.scp").write_text(f"p1 cat {mono} |\nsw01-A {sph}\nsw01-B {sph}\n")
    (d / "reco2file_and_channel").write_text("p1 p 1\nsw01-A sw01 A\nsw01-B sw01 B\n")
    segs = [("p1_0", "p1", 0.0, 1.0), ("sw01-A_0", "sw01-A", 0.5, 1.5), ("sw01-A_1", "sw01-A", 2.0, 3.2),
            ("sw01-B_0", "sw01-B", 0.5, 1.5)]
    (d / "segments").write_text("".join(f"{u} {r} {s} {e}\n" for u, r, s, e in segs))
    (d / "text").write_text("".join(f"{u} hi\n" for u, *_ in segs))
    (d / "utt2spk").write_text("".join(f"{u} {r}\n" for u, r, *_ in segs))
    (d / "spk2utt").write_text("p1 p1_0\nsw01-A sw01-A_0 sw01-A_1\nsw01-B sw01-B_0\n")
    out = tmp_path / "fb"
    r = run("features", d, out, "--set", "sample_rate=8000", "--set", "num_mel_bins=40", "--nj", 2)
    assert r.exit_code == 0, r.output
    conf = FeatureConfig(sample_rate=8000, num_mel_bins=40)
    feats = kaldiio.load_scp(str(out / "feats.scp"))
    for utt, rec, start, end in segs:
        ch = {"A": 0, "B": 1}.get(rec[-1], 0)
        wave, _ = load_audio(str(sph), start=start, end=end, channel=ch) if rec != "p1" else \
            load_audio(str(mono), start=start, end=end)
        np.testing.assert_array_equal(feats[utt], fbank(wave, 8000, conf, seed=utt))
    assert feats["sw01-A_1"].shape[0] == 98  # clipped at 3.0 s: 1.0 s -> 98 frames
    assert not np.allclose(feats["sw01-A_0"], feats["sw01-B_0"])  # the two sides differ
    for name in ("segments", "reco2file_and_channel"):
        assert (out / name).read_text() == (d / name).read_text()


@pytest.mark.slow
def test_reader_in_dataloader_workers(data, tmp_path):
    """The reader works in forked DataLoader workers after the parent already opened the arks."""
    import torch
    out = tmp_path / "fbank"
    assert run("features", data, out, "--set", "num_mel_bins=23").exit_code == 0
    reader = FeatureReader(out)
    keys = reader.keys()
    direct = {u: reader.load(u) for u in keys}  # fills the parent's ark handle cache

    class DS(torch.utils.data.Dataset):
        def __len__(self):
            return len(keys)

        def __getitem__(self, i):
            return keys[i], torch.from_numpy(reader.load(keys[i]))

    loader = torch.utils.data.DataLoader(DS(), batch_size=None, num_workers=2,
                                         multiprocessing_context="fork")
    got = dict(loader)
    assert sorted(got) == keys
    for u in keys:
        np.testing.assert_array_equal(got[u].numpy(), direct[u])


@pytest.mark.parametrize("damage", ["truncated", "corrupt", "empty"])
def test_damaged_audio_one_line_error(data, tmp_path, damage):
    path = (data / "wav.scp").read_text().splitlines()[2].split()[1]
    raw = open(path, "rb").read()
    new = {"truncated": raw[: len(raw) - 3000], "corrupt": b"RIFF\x00\x01junk" + bytes(range(256)) * 4,
           "empty": b""}[damage]
    open(path, "wb").write(new)
    err = one_error(run("features", data, tmp_path / "out"))
    assert err.startswith(f"asrtrain: error: {data}/wav.scp:3: ") and path in err
    assert {"truncated": "truncated", "corrupt": "corrupt", "empty": "corrupt"}[damage] in err


def test_no_wav_scp(data, tmp_path):
    (data / "wav.scp").unlink()
    err = one_error(run("features", data, tmp_path / "out"))
    assert f"{data}/wav.scp: missing wav.scp" in err


def test_error_in_a_parallel_job(data, tmp_path):
    """An error in the second of two jobs reaches the user as the same one-line message; no partial output."""
    path = (data / "wav.scp").read_text().splitlines()[5].split()[1]
    shutil.move(path, tmp_path / "moved.wav")
    err = one_error(run("features", data, tmp_path / "out", "--nj", 2))
    assert f"{data}/wav.scp:6: audio file not found: {path}" in err
    assert not list((tmp_path / "out" / "arks").glob("*")) and not (tmp_path / "out" / ".done").exists()


@pytest.mark.parametrize("kind", ["global", "speaker"])
def test_subset_and_split_of_a_features_dir(data, tmp_path, kind):
    """Shards of a features dir (per learner) are features dirs giving the same normalised features."""
    out = tmp_path / "fbank"
    assert run("features", data, out, "--set", "num_mel_bins=23", "--set", f"cmvn={kind}").exit_code == 0
    full = FeatureReader(out)
    assert run("data", "split", out, 2).exit_code == 0
    assert run("data", "subset", out, tmp_path / "sub", "--last", 2).exit_code == 0
    parts = [FeatureReader(out / "split2" / "1"), FeatureReader(out / "split2" / "2"),
             FeatureReader(tmp_path / "sub")]
    assert sorted(parts[0].keys() + parts[1].keys()) == full.keys() and parts[2].keys() == full.keys()[-2:]
    for part in parts:
        for utt in part.keys():
            np.testing.assert_array_equal(part.load(utt), full.load(utt))

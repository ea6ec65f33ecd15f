"""FeatureReader's batch path (memory-mapped plain float matrices, CMVN written into the padded batch, one
finiteness check a batch) gives what per-utterance ``load`` gives, bit for bit, and the same errors."""

import sys
from pathlib import Path

import kaldiio
import numpy as np
import pytest

from asrtrain.errors import AsrError
from asrtrain.features.reader import FeatureReader
from tests.helpers.cli_helpers import run
from tests.helpers.sphere_fixture import make_data_dir

from tests.helpers.featfix import make_feat_dir


def _padded_by_load(reader, utts):
    mats = [reader.load(u) for u in utts]
    x = np.zeros((len(mats), max(m.shape[0] for m in mats), reader.dim), dtype=np.float32)
    for i, m in enumerate(mats):
        x[i, : m.shape[0]] = m
    return x, [m.shape[0] for m in mats]


def _kaldiio_mats(feats):
    return {k: np.asarray(v, dtype=np.float32) for k, v in kaldiio.load_scp(str(feats / "feats.scp")).items()}


def test_mapped_read_is_kaldiio_read_and_the_batch_is_per_utterance_load(tmp_path):
    feats = make_feat_dir(tmp_path / "f", 9, dim=13)
    reader = FeatureReader(feats)
    want = _kaldiio_mats(feats)
    for u in reader.keys():
        got = reader.load_raw(u)
        assert got.flags.writeable and np.array_equal(got, want[u])  # a copy, not a view of the map
    utts = reader.keys()[2:8]
    x, lens = reader.load_padded(utts)
    ref, ref_lens = _padded_by_load(reader, utts)
    assert lens == ref_lens and x.dtype == np.float32 and np.array_equal(x, ref)
    assert not np.array_equal(x[0, : lens[0]], want[utts[0]])  # global CMVN was applied
    assert x.shape == (6, max(lens), 13)
    short = int(np.argmin(lens))
    assert not x[short, lens[short]:].any()  # the padding stays zero


@pytest.mark.parametrize("cmvn", ["speaker", "none"])
def test_batch_path_matches_load_for_speaker_and_no_cmvn(tmp_path, cmvn):
    data = make_data_dir(tmp_path, n_utts=6, speakers=3)
    out = tmp_path / "feats"
    r = run("features", data, out, "--set", f"cmvn={cmvn}", "--set", "num_mel_bins=23")
    assert r.exit_code == 0, r.output
    reader = FeatureReader(out)
    utts = reader.keys()
    x, lens = reader.load_padded(utts)
    ref, ref_lens = _padded_by_load(reader, utts)
    assert lens == ref_lens and np.array_equal(x, ref)


def test_compressed_and_double_matrices_fall_back_to_kaldiio(tmp_path):
    """Kaldi's own recipes write compressed features by default; those are read by kaldiio, unchanged."""
    feats = make_feat_dir(tmp_path / "f", 4, dim=13)
    mats = _kaldiio_mats(feats)
    keys = sorted(mats)
    with kaldiio.WriteHelper(f"ark,scp:{feats}/c.ark,{feats}/feats.scp", compression_method=2) as w:
        for k in keys[:2]:
            w(k, mats[k])
    with kaldiio.WriteHelper(f"ark,scp:{feats}/d.ark,{feats}/d.scp") as w:
        for k in keys[2:]:
            w(k, mats[k].astype(np.float64))
    with open(feats / "feats.scp", "a") as fh:
        fh.write((feats / "d.scp").read_text())
    reader = FeatureReader(feats)
    want = _kaldiio_mats(feats)
    for k in keys:
        assert np.array_equal(reader.load_raw(k), want[k])
    x, _ = reader.load_padded(keys)
    assert np.array_equal(x, _padded_by_load(reader, keys)[0])


def test_a_bad_utterance_in_a_batch_raises_its_own_error(tmp_path):
    """NaN in one stored matrix: the batch path names that utterance and its feats.scp line, as load does."""
    feats = make_feat_dir(tmp_path / "f", 5, dim=13)
    rows = (feats / "feats.scp").read_text().splitlines()
    utt, spec = rows[3].split()
    ark, off = spec.rsplit(":", 1)
    with open(ark, "r+b") as fh:  # the first value of its data: 15 header bytes after the offset
        fh.seek(int(off) + 15 + 4 * 20)
        fh.write(np.array([np.nan], dtype="<f4").tobytes())
    reader = FeatureReader(feats)
    with pytest.raises(AsrError, match=f"features of '{utt}' hold NaN or Inf") as caught:
        reader.load_padded(reader.keys())
    assert caught.value.render().startswith(f"{feats / 'feats.scp'}:4: ")
    reader.load_padded([k for k in reader.keys() if k != utt])  # the others still read


def test_an_entry_past_the_end_of_its_ark_is_named_in_a_batch(tmp_path):
    feats = make_feat_dir(tmp_path / "f", 4, dim=13)
    rows = (feats / "feats.scp").read_text().splitlines()
    utt, spec = rows[1].split()
    ark, off = spec.rsplit(":", 1)
    rows[1] = f"{utt} {ark}:{Path(ark).stat().st_size - 20}"  # a header cut short by the file's end
    (feats / "feats.scp").write_text("\n".join(rows) + "\n")
    reader = FeatureReader(feats)
    with pytest.raises(AsrError, match=f"cannot read features of '{utt}'") as caught:
        reader.load_padded(reader.keys())
    assert caught.value.render().startswith(f"{feats / 'feats.scp'}:2: ")


def test_reader_pickles_without_its_maps(tmp_path):
    import pickle

    feats = make_feat_dir(tmp_path / "f", 3, dim=13)
    reader = FeatureReader(feats)
    u = reader.keys()[0]
    first = reader.load(u)
    clone = pickle.loads(pickle.dumps(reader))
    assert np.array_equal(clone.load(u), first)
    reader.close()
    assert np.array_equal(reader.load(u), first)  # maps reopen after close


@pytest.mark.slow
def test_an_ark_cut_short_in_place_after_mapping_is_an_error_not_a_crash(tmp_path):
    """Reading past the end of a shrunk mapped file would end the process with SIGBUS; the reader sees
    the file shrink and lets kaldiio report the cut entry (run in a child, so a regression fails here)."""
    import subprocess

    feats = make_feat_dir(tmp_path / "f", 60, dim=13)  # ~170 KB: the last entries lie pages past the cut
    code = f"""
import os, sys
from asrtrain.errors import AsrError
from asrtrain.features.reader import FeatureReader
r = FeatureReader({str(feats)!r})
keys = r.keys()
r.load_padded(keys)  # mapped
ark = {str(feats / 'feats.ark')!r}
os.truncate(ark, os.path.getsize(ark) // 4)
try:
    r.load_padded(keys[-3:])
except AsrError as err:
    print("ERR", err.render())
    sys.exit(0)
print("NO ERROR")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    assert "ERR" in out.stdout and "cannot read features of" in out.stdout and "feats.scp:" in out.stdout


def test_a_header_cut_inside_its_column_count_is_named(tmp_path):
    """The fuzz test's case: an ark cut between the header's row and column counts (kaldiio then reports it)."""
    feats = make_feat_dir(tmp_path / "f", 3, dim=5)
    rows = (feats / "feats.scp").read_text().splitlines()
    utt, spec = rows[-1].split()
    ark, off = spec.rsplit(":", 1)
    with open(ark, "r+b") as fh:
        fh.truncate(int(off) + 12)  # "\0BFM \4" + rows + "\4" + one byte of the column count
    with pytest.raises(AsrError, match=f"cannot read features of '{utt}'"):
        FeatureReader(feats).load(utt)

"""Long files and many files: each frame computed once and sliced among segments, no word lost at a cut,
and files batched across by length with the text each gets alone, in input order."""

import numpy as np
import pytest
import soundfile as sf

from asrtrain.transcribe.batching import length_batches
from asrtrain.transcribe.segment import cut_points


def test_length_batches_sort_cap_the_count_and_the_padded_frames():
    lengths = [50, 10, 40, 10, 30, 100]
    got = length_batches(lengths, batch_size=2, batch_frames=100)
    assert got == [[1, 3], [4, 2], [0], [5]]  # by (length, index); 2 x 50 = 100 fits, 50 + 100 would not
    assert sorted(i for b in got for i in b) == list(range(6))
    assert length_batches([500], 4, 100) == [[0]]  # longer than the cap: alone


def test_cuts_fall_on_frame_shifts_and_segment_frames_are_the_whole_files(exp, speechy):
    import asrtrain
    tr = asrtrain.Transcriber.load(exp, max_segment_s=2.0)
    wave = speechy(7.3, 16000)
    pieces = cut_points(wave, 16000, 2.0, align=tr.shift)
    assert len(pieces) >= 4 and all(lo % tr.shift == 0 for lo, _ in pieces)
    whole = tr.raw_features(wave)
    seen = []
    real = tr.raw_features
    tr.raw_features = lambda w: seen.append(len(w)) or real(w)
    parts = tr.segment_features(wave, pieces)
    assert [len(p) for p in parts[:-1]] == [(hi - lo) // tr.shift for lo, hi in pieces[:-1]]
    assert np.allclose(np.concatenate(parts), whole, atol=1e-4)
    # each sample is read once, plus the window's overlap at each cut; never the whole file a second time
    assert sum(seen) == len(wave) + (len(pieces) - 1) * (tr.window - tr.shift) and max(seen) < len(wave)
    # a speaker-CMVN file is normalised with its whole-file stats
    from asrtrain.features import cmvn
    got = tr.prepare(wave, 16000)
    want = cmvn.apply(whole, cmvn.accumulate(whole), True)
    assert np.allclose(np.concatenate(got.feats), want, atol=1e-3)


def test_without_snip_edges_the_whole_file_is_computed_and_sliced(exp, speechy):
    from dataclasses import replace

    import asrtrain
    tr = asrtrain.Transcriber.load(exp, max_segment_s=2.0)
    tr.cfg = replace(tr.cfg, features=replace(tr.cfg.features, snip_edges=False))
    wave = speechy(5.0, 16000)
    pieces = cut_points(wave, 16000, 2.0, align=tr.shift)
    parts = tr.segment_features(wave, pieces)
    assert len(parts) == len(pieces) and np.array_equal(np.concatenate(parts), tr.raw_features(wave))


@pytest.mark.slow
def test_no_word_is_lost_at_a_cut_in_ten_minutes(tone_exp):
    """Ten minutes of a trained model's utterances (each recognised alone) over short pauses, cut into
    segments of at most 8 s: the words are the utterances' transcripts, in order, none lost or doubled."""
    import asrtrain
    from tests.helpers.tone_model import RATE, silence
    exp, corpus = tone_exp
    tr = asrtrain.Transcriber.load(exp, max_segment_s=8.0)
    assert [tr.transcribe(w, sample_rate=RATE).text for _, w in corpus] == [t for t, _ in corpus]
    rng = np.random.default_rng(3)
    parts, words, n = [], [], 0
    while n < 600 * RATE:
        text, w = corpus[len(parts) // 2 % len(corpus)]
        parts += [w, silence(rng.uniform(0.05, 0.5), rng)]
        words += text.split()
        n += len(parts[-2]) + len(parts[-1])
    res = tr.transcribe(np.concatenate(parts), sample_rate=RATE)
    assert len(res.segments) >= 75 and max(hi - lo for lo, hi in res.segments) <= 8.0
    assert res.text.split() == words
    assert [w.word for w in res.words] == words and all(a.start <= b.start for a, b in zip(res.words, res.words[1:]))


@pytest.mark.slow
def test_files_batched_across_give_the_text_each_gets_alone_in_input_order(tone_exp, tmp_path):
    import asrtrain
    from tests.helpers.cli_helpers import run
    from tests.helpers.tone_model import RATE
    exp, corpus = tone_exp
    tr = asrtrain.Transcriber.load(exp, max_segment_s=3.0)
    # files of 1 to 4 utterances (the longer ones cut into segments), in an order that is not by length
    files = [np.concatenate([w for _, w in corpus[i:i + k]]) for i, k in ((0, 4), (4, 1), (5, 3), (8, 1), (9, 2))]
    alone = [tr.transcribe(w, sample_rate=RATE) for w in files]
    batches = []
    real = tr.log_probs
    tr.log_probs = lambda feats, with_enc=False: batches.append([len(f) for f in feats]) or real(feats, with_enc)
    got = list(tr.transcribe_many([(f"f{i}", w) for i, w in enumerate(files)], batch_size=4))
    assert [k for k, _ in got] == [f"f{i}" for i in range(len(files))]
    assert [r.text for _, r in got] == [r.text for r in alone] and all(r.text for r in alone)
    assert [r.segments for _, r in got] == [r.segments for r in alone]
    assert sum(len(b) for b in batches) > len(files) and max(len(b) for b in batches) == 4  # across files
    assert all(b == sorted(b) for b in batches)
    flat = [n for b in batches for n in b]
    assert flat == sorted(flat)  # the window's segments sorted by length
    # the CLI: --batch-size 1 and 3 write the same lines, in the order given
    for i, w in enumerate(files):
        sf.write(tmp_path / f"f{i}.wav", w, RATE)
    order = [tmp_path / f"f{i}.wav" for i in (3, 0, 4, 1, 2)]
    outs = []
    for size in ("1", "3"):
        res = run("transcribe", exp, *order, "--batch-size", size, "--max-segment", "3")
        assert res.exit_code == 0, res.output
        outs.append(res.stdout.splitlines())
    assert outs[0] == outs[1] == [f"f{i} {alone[i].text}" for i in (3, 0, 4, 1, 2)]


def test_bad_batch_options_are_one_line(exp, tmp_path, speechy):
    from tests.helpers.cli_helpers import one_error, run
    sf.write(tmp_path / "a.wav", speechy(1.0, 16000), 16000)
    assert "--batch-size 0" in one_error(run("transcribe", exp, tmp_path / "a.wav", "--batch-size", "0"))
    assert "--batch-frames" in one_error(run("transcribe", exp, tmp_path / "a.wav", "--batch-frames", "-5"))
    assert "--max-segment" in one_error(run("transcribe", exp, tmp_path / "a.wav", "--max-segment", "0"))
    assert "--device" in one_error(run("transcribe", exp, tmp_path / "a.wav", "--device", "gpu"))
    assert "--threads" in one_error(run("transcribe", exp, tmp_path / "a.wav", "--threads", "-1"))

"""Many files through the model in batches sorted by length, results in input order.

:func:`transcribe_many` reads and featurises files (:meth:`~asrtrain.transcribe.model.Transcriber.prepare`)
into a window of about ``WINDOW_BATCHES`` batches' worth of segments, sorts the window's segments by length,
runs them in batches of at most ``batch_size`` segments and ``batch_frames`` padded frames
(:func:`length_batches`, as decode batches a feature dir), decodes each segment, and yields the window's
files in input order before reading the next window; the window bounds what is held in memory. Padding does
not change a segment's log-probs (the encoder honours each one's length), so the text is the one each file
gets alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from asrtrain.errors import AsrError

WINDOW_BATCHES = 8  # batches' worth of segments read ahead and sorted together


def length_batches(lengths: Sequence[int], batch_size: int, batch_frames: int) -> List[List[int]]:
    """Indices of ``lengths`` sorted by (length, index), cut into batches of at most ``batch_size`` items
    whose padded size (longest x count) is at most ``batch_frames``; an item longer than that goes alone."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    out: List[List[int]] = []
    for i in order:
        if out and len(out[-1]) < batch_size and lengths[i] * (len(out[-1]) + 1) <= batch_frames:
            out[-1].append(i)
        else:
            out.append([i])
    return out


def check_batching(batch_size: int, batch_frames: int) -> None:
    """One line for a batch size or frame cap that is not an integer in 1 .. the limits'."""
    from asrtrain.limits import MAX_BATCH_FRAMES, MAX_BATCH_UTTS

    for option, value, top in (("--batch-size", batch_size, MAX_BATCH_UTTS),
                               ("--batch-frames", batch_frames, MAX_BATCH_FRAMES)):
        if isinstance(value, bool) or int(value) != value or not 1 <= value <= top:
            raise AsrError(f"{option} {value} must be an integer in 1 .. {top}", fix=f"give e.g. {option} 16"
                           if option == "--batch-size" else f"give e.g. {option} 40000")


def decode_prepared(tr, prepared: Sequence, batch_size: int = 16, batch_frames: Optional[int] = None) -> List:
    """:class:`~asrtrain.transcribe.model.Prepared` files -> their :class:`~asrtrain.transcribe.model.Result`
    each, the segments of all of them batched by length."""
    from asrtrain.transcribe.result import Result

    batch_frames = batch_frames or tr.batch_frames
    flat = [(i, k) for i, p in enumerate(prepared) for k, f in enumerate(p.feats) if len(f)]
    done = [[("", [])] * len(p.feats) for p in prepared]
    rescore = tr.att_rescore > 0
    for batch in length_batches([len(prepared[i].feats[k]) for i, k in flat], batch_size, batch_frames):
        items = [flat[j] for j in batch]
        feats = [prepared[i].feats[k] for i, k in items]
        outs = tr.log_probs(feats, with_enc=True) if rescore else tr.log_probs(feats)
        for (i, k), out in zip(items, outs):
            lp, enc = out if rescore else (out, None)
            done[i][k] = tr.decode(lp, prepared[i].pieces[k][0] / tr.rate, enc)
    results = []
    for p, segs in zip(prepared, done):
        results.append(Result(" ".join(t for t, _ in segs if t), [w for _, ws in segs for w in ws], p.name,
                              [(lo / tr.rate, hi / tr.rate) for lo, hi in p.pieces]))
    return results


def transcribe_many(tr, inputs: Iterable[Tuple[str, object]], channel: Optional[int],
                    speaker_stats: Mapping[str, np.ndarray], batch_size: int, batch_frames: int
                    ) -> Iterator[Tuple[str, Union[object, AsrError]]]:
    """:meth:`asrtrain.transcribe.model.Transcriber.transcribe_many`."""
    check_batching(batch_size, batch_frames)

    def prepared():
        for key, audio in inputs:
            try:
                yield key, tr.prepare(audio, _rate(tr, audio), channel, speaker_stats.get(key))
            except AsrError as err:
                yield key, err

    yield from _windows(tr, prepared(), batch_size, batch_frames)


KEEP_FRAMES = 1_000_000  # a speaker's fbank frames held between the stats and the decode (~3 h, 320 MB at 80 dims)


def transcribe_by_speaker(tr, inputs: Iterable[Tuple[str, object]], channel: Optional[int],
                          utt2spk: Mapping[str, str], batch_size: int, batch_frames: int
                          ) -> Iterator[Tuple[str, Union[object, AsrError]]]:
    """:meth:`~asrtrain.transcribe.model.Transcriber.transcribe_many` with ``utt2spk``: speaker by speaker,
    each file's fbank is computed once, its frames added to the speaker's CMVN stats and kept until the
    speaker's files are normalised and decoded. A speaker with more than ``KEEP_FRAMES`` frames keeps only
    the first ones; the rest are featurised again for the decode (memory stays bounded). Results in
    input order, once all are done."""
    from asrtrain.features import cmvn

    check_batching(batch_size, batch_frames)
    inputs = list(inputs)
    by_spk: dict = {}
    for i, (key, _) in enumerate(inputs):
        by_spk.setdefault(utt2spk[key], []).append(i)
    done: dict = {}
    for members in by_spk.values():
        raw, stats, kept = {}, None, 0
        for i in members:
            audio = inputs[i][1]
            try:
                got = tr.raw(audio, _rate(tr, audio), channel)
            except AsrError as err:
                done[i] = err
                continue
            for f in got.feats:
                stats = cmvn.accumulate(f, stats) if len(f) else stats
            frames = sum(len(f) for f in got.feats)
            raw[i] = got if kept + frames <= KEEP_FRAMES else None
            kept += frames if raw[i] is not None else 0
        done.update(_windows(tr, _normalised(tr, inputs, raw, stats, channel), batch_size, batch_frames))
    for i, (key, _) in enumerate(inputs):
        yield key, done[i]


def _normalised(tr, inputs, raw, stats, channel) -> Iterator[Tuple[int, object]]:
    """A speaker's files as (input index, normalised prepared file or error); a file whose fbank was not
    kept (``None`` in ``raw``) is featurised again. Each raw copy is dropped once its normalised one exists."""
    for i, got in raw.items():
        if got is None:
            audio = inputs[i][1]
            try:
                got = tr.raw(audio, _rate(tr, audio), channel)
            except AsrError as err:  # changed or gone since the stats were taken
                yield i, err
                continue
        raw[i] = None  # the normalised copy is the one held
        yield i, tr.normalised(got, stats)


def _rate(tr, audio) -> Optional[int]:
    """The sample rate to read ``audio`` at: a path's own (None), or the model's for samples in memory."""
    return None if isinstance(audio, (str, Path)) else tr.rate


def _windows(tr, entries: Iterable[Tuple[object, object]], batch_size: int, batch_frames: int) -> Iterator:
    """(key, prepared file or error) entries gathered into windows of about ``WINDOW_BATCHES`` batches'
    worth of segments or frames; each window is decoded together and yielded, errors included, in order."""
    window: List[Tuple[object, object]] = []
    segments = frames = 0
    for key, got in entries:
        window.append((key, got))
        if not isinstance(got, AsrError):
            segments += len(got.feats)
            frames += sum(len(f) for f in got.feats)
        if segments >= WINDOW_BATCHES * batch_size or frames >= WINDOW_BATCHES * batch_frames:
            yield from _flush(tr, window, batch_size, batch_frames)
            window, segments, frames = [], 0, 0
    yield from _flush(tr, window, batch_size, batch_frames)


def _flush(tr, window, batch_size: int, batch_frames: int):
    """Decode a window's prepared files together; yield every entry, errors included, in input order."""
    ready = [got for _, got in window if not isinstance(got, AsrError)]
    results = iter(decode_prepared(tr, ready, batch_size, batch_frames))
    for key, got in window:
        yield key, got if isinstance(got, AsrError) else next(results)

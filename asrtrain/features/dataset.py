"""Utterances for training: features (via FeatureReader) with token or frame targets, padded batches."""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence

import numpy as np
import torch

from asrtrain.data.table import read_table
from asrtrain.errors import AsrError

log = logging.getLogger(__name__)
_NO_TARGETS = np.zeros(0, dtype=np.int64)


@dataclass
class Batch:
    """``feats`` (N, T, D) float32, ``feat_lens`` (N,), ``targets`` (N, S) int64 padded with -1 (CTC
    tokens, or CE frame labels at the subsampled rate), ``target_lens`` (N,), ``utts`` the ids."""
    utts: List[str]
    feats: torch.Tensor
    feat_lens: torch.Tensor
    targets: torch.Tensor
    target_lens: torch.Tensor

    @property
    def num_frames(self) -> int:
        return int(self.feat_lens.sum())

    def examples(self) -> Iterator["Batch"]:
        """The batch one utterance at a time, padding trimmed (DP clips each example's gradient)."""
        for i, utt in enumerate(self.utts):
            t, s = int(self.feat_lens[i]), int(self.target_lens[i])
            yield Batch([utt], self.feats[i:i + 1, :t], self.feat_lens[i:i + 1],
                        self.targets[i:i + 1, :max(1, s)], self.target_lens[i:i + 1])

    def pin(self) -> "Batch":
        """The padded tensors in page-locked host memory, so the copy to a GPU can be asynchronous."""
        return Batch(self.utts, self.feats.pin_memory(), self.feat_lens, self.targets.pin_memory(),
                     self.target_lens)

    def to(self, device: torch.device) -> "Batch":
        """Features and targets on ``device`` (``non_blocking``: from pinned memory the copy overlaps the
        GPU's work). The lengths stay on the host: packing sequences and CTC read them there."""
        if device.type == "cpu":
            return self
        return Batch(self.utts, self.feats.to(device, non_blocking=True), self.feat_lens,
                     self.targets.to(device, non_blocking=True), self.target_lens)


def ctc_feasible(num_frames: int, tokens: Sequence[int], subsample: int) -> bool:
    """CTC needs one output frame per token plus one blank between repeated tokens."""
    out = (num_frames + subsample - 1) // subsample
    repeats = sum(1 for a, b in zip(tokens, tokens[1:]) if a == b)
    return out >= len(tokens) + repeats


class AsrDataset:
    """A feature dir (``asrtrain features`` output) with its targets.

    Args:
        feat_dir: data dir with feats.scp and features.yaml.
        tokenizer: for CTC targets (encodes ``text``); None with ``alignments``.
        alignments: {utt: int array of per-frame labels} for CE training (10 ms frames).
        subsample: the model's output frame rate divisor.
    """

    def __init__(self, feat_dir: Path, subsample: int, tokenizer=None,
                 alignments: Optional[Dict[str, np.ndarray]] = None):
        from asrtrain.features.reader import FeatureReader

        self.dir = Path(feat_dir)
        self.reader = FeatureReader(self.dir)
        self.subsample = subsample
        self.targets: Dict[str, np.ndarray] = {}
        self.lengths: Dict[str, int] = {}
        self.dropped: Dict[str, str] = {}
        keys = list(self.reader.keys())
        if alignments is not None:
            self._align_targets(keys, alignments)
        elif tokenizer is not None:
            self._token_targets(keys, tokenizer)
        else:
            self.lengths = {u: self.reader.num_frames(u) for u in keys}
        if self.dropped:
            why = {}
            for utt, reason in sorted(self.dropped.items()):
                why.setdefault(reason, utt)
            log.warning("%s: %d of %d utterances dropped (%s)%s", self.dir, len(self.dropped), len(keys),
                        ", ".join(f"{r}: e.g. '{u}'" for r, u in why.items()),
                        " (for 'too short': a lower model.subsample, or a tokenizer with longer pieces)"
                        if "too short for its transcript" in why else "")
        log.info("%s: %d utterances in, %d used", self.dir, len(keys), len(self.lengths))
        if not self.lengths:
            raise AsrError("no usable utterances", self.dir / "feats.scp")

    @property
    def dim(self) -> int:
        return self.reader.dim

    def _token_targets(self, keys: List[str], tokenizer) -> None:
        text_path = self.dir / "text"
        text = read_table(text_path, min_fields=1)
        unk = tokenizer.sp.unk_id()
        with_unk = []
        for utt in keys:
            words = text.get(utt)
            if words is None:
                self.dropped[utt] = "no transcript"
                continue
            ids = tokenizer.encode(words)
            n = self.reader.num_frames(utt)
            if not ids:
                self.dropped[utt] = "empty transcript"
            elif not ctc_feasible(n, ids, self.subsample):
                self.dropped[utt] = "too short for its transcript"
            else:
                self.targets[utt] = np.asarray(ids, dtype=np.int64)
                self.lengths[utt] = n
                if unk in ids:
                    with_unk.append(utt)
        if with_unk:  # Kaldi's prepare_lang names OOV words; here the tokenizer lacks pieces for some text
            log.warning("%s: %d of %d transcripts hold text the tokenizer has no piece for, learnt as <unk> "
                        "(e.g. '%s': %s); train the tokenizer on this data's text", text_path, len(with_unk),
                        len(keys), with_unk[0], text[with_unk[0]][:80])

    def _align_targets(self, keys: List[str], alignments: Dict[str, np.ndarray]) -> None:
        s = self.subsample
        for utt in keys:
            ali = alignments.get(utt)
            if ali is None:
                self.dropped[utt] = "no alignment"
                continue
            n = self.reader.num_frames(utt)
            # Kaldi alignments may differ from the features by a frame or two (snip-edges, extension).
            if abs(len(ali) - n) > 2 * s:
                self.dropped[utt] = "alignment length differs from features"
                continue
            ali = np.asarray(ali, dtype=np.int64)
            if len(ali) < n:
                ali = np.concatenate([ali, np.full(n - len(ali), ali[-1], dtype=np.int64)])
            # One label per output frame: the label of the frame each subsampled output is centred on.
            out = (n + s - 1) // s
            centre = np.minimum(np.arange(out) * s + s // 2, n - 1)
            self.targets[utt] = ali[centre]
            self.lengths[utt] = n

    def collate(self, utts: Sequence[str]) -> Batch:
        x, lens = self.reader.load_padded(utts)
        n = len(utts)
        tg = [self.targets.get(u, _NO_TARGETS) for u in utts]
        s = max((len(a) for a in tg), default=0)
        y = np.full((n, s), -1, dtype=np.int64)
        for i, a in enumerate(tg):
            y[i, : len(a)] = a
        return Batch(list(utts), torch.from_numpy(x), torch.tensor(lens, dtype=torch.long),
                     torch.from_numpy(y), torch.tensor([len(a) for a in tg], dtype=torch.long))


def prefetch(dataset: AsrDataset, batches: Sequence[Sequence[str]], depth: int = 2,
             device: Optional[torch.device] = None) -> Iterator[Batch]:
    """Collate batches on a background thread, ``depth`` ahead of the consumer (reading and padding
    overlap with compute; the order and content are unchanged, so resume is unaffected). For a GPU
    ``device`` (the learner's), batches are collated into pinned host memory on that thread, which is
    bound to the learner's GPU first (:func:`asrtrain.device.bind_thread`)."""
    from asrtrain.device import bind_thread

    pin = device is not None and device.type == "cuda"

    def make(b):
        batch = dataset.collate(b)
        return batch.pin() if pin else batch

    if depth <= 0:
        for b in batches:
            yield make(b)
        return
    q: "queue.Queue" = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def work():
        try:
            bind_thread(device)
            for b in batches:
                if stop.is_set():
                    return
                q.put(make(b))
            q.put(None)
        except BaseException as err:  # surfaced in the consumer
            q.put(err)

    th = threading.Thread(target=work, daemon=True, name="prefetch")
    live = (stop, q, th)
    _LIVE.add(live)
    th.start()
    try:
        while True:
            item = q.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        _LIVE.discard(live)
        _end(stop, q, th)


# Prefetch threads not yet ended. A consumer's ``for`` loop left by an exception (Ctrl-C) does not close
# its generator: the traceback keeps its frame, and its ``finally`` would run only when that is freed,
# maybe during interpreter shutdown, with the thread still collating in native code (a crash).
_LIVE: set = set()


def _end(stop, q, th) -> None:
    stop.set()
    while th.is_alive():
        try:
            q.get_nowait()
        except queue.Empty:
            th.join(timeout=0.05)


def stop_prefetch() -> None:
    """End every prefetch thread still running (the training loop's way out of an error or Ctrl-C)."""
    for live in list(_LIVE):
        _LIVE.discard(live)
        _end(*live)

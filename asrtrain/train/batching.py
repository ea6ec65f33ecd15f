"""Length-bucketed batches limited by padded frames, deterministic per (seed, epoch), split across learners.

A *global* batch holds up to ``max_frames * group_size`` padded input frames (and ``max_utts *
group_size`` utterances). Global batches are dealt to groups round-robin (group ``g`` of ``G`` takes
batches ``g, g+G, ...``) and each batch is sliced among the group's members, as
:class:`asrtrain.distributed.base.Partition` describes. Because the batch list is a pure function of
``(lengths, seed, epoch)``, the sampler position is just ``(epoch, index)`` and resuming is exact.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Dict, List, Sequence

from asrtrain.distributed.base import Partition

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchSpec:
    max_frames: int
    max_utts: int
    bucket_width: int
    seed: int
    sortagrad: bool = False


def make_batches(lengths: Dict[str, int], spec: BatchSpec, epoch: int, group_size: int = 1
                 ) -> List[List[str]]:
    """Global batches of utterance ids for ``epoch``.

    Utterances are shuffled, then stably sorted by length bucket, so batches hold similar lengths and
    waste little padding; the batch order is shuffled again. A batch's cost is ``len(batch) * longest``
    padded frames. An utterance longer than the limit gets a batch of its own (and a warning), so no
    batch ever holds two of them.
    """
    rng = random.Random(spec.seed * 1_000_003 + epoch)
    cap_frames = spec.max_frames * group_size
    cap_utts = spec.max_utts * group_size
    utts = sorted(lengths)
    rng.shuffle(utts)
    width = max(1, spec.bucket_width)
    utts.sort(key=lambda u: lengths[u] // width)
    batches: List[List[str]] = []
    cur: List[str] = []
    longest = 0
    for utt in utts:
        n = lengths[utt]
        new_longest = max(longest, n)
        if cur and (new_longest * (len(cur) + 1) > cap_frames or len(cur) + 1 > cap_utts):
            batches.append(cur)
            cur, new_longest = [], n
        cur.append(utt)
        longest = new_longest
    if cur:
        batches.append(cur)
    rng.shuffle(batches)
    if spec.sortagrad and epoch == 0:
        # SortaGrad (Amodei et al. 2016): short utterances first in the first epoch; CTC aligns them
        # sooner, which shortens its initial all-blank plateau.
        batches.sort(key=lambda b: max(lengths[u] for u in b))
    return batches


def slice_for(batch: Sequence[str], lengths: Dict[str, int], member: int, group_size: int) -> List[str]:
    """The ``member``-th of ``group_size`` slices of a global batch, balanced by length (round-robin
    over the length-sorted batch). A slice may be empty when the batch has fewer utterances."""
    if group_size == 1:
        return list(batch)
    ordered = sorted(batch, key=lambda u: (-lengths[u], u))
    return ordered[member::group_size]


def learner_batches(lengths: Dict[str, int], spec: BatchSpec, epoch: int, part: Partition
                    ) -> List[List[str]]:
    """This learner's batches for ``epoch`` (some may be empty slices under synchronous groups)."""
    batches = make_batches(lengths, spec, epoch, part.group_size)
    # Every group gets the same number of batches, so all learners take the same number of steps per
    # epoch (and meet at the same checkpoints): when the batches do not divide evenly, the groups that
    # are short take one more batch from the start of the list (a few utterances seen twice, none lost).
    per_group = -(-len(batches) // part.num_groups)
    mine = [batches[(part.group + i * part.num_groups) % len(batches)] for i in range(per_group)]
    return [slice_for(b, lengths, part.member, part.group_size) for b in mine]


def oversized(lengths: Dict[str, int], max_frames: int) -> List[str]:
    """Utterances longer than the per-learner frame budget (each will be batched alone)."""
    return [u for u, n in lengths.items() if n > max_frames]

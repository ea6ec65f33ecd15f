"""Length-bucketed batches limited by padded frames, deterministic per (seed, epoch), split across learners.

A *global* batch holds up to ``max_frames * group_size`` padded input frames (and ``max_utts *
group_size`` utterances). Global batches are dealt to groups round-robin (group ``g`` of ``G`` takes
batches ``g, g+G, ...``) and each batch is sliced among the group's members, as
:class:`asrtrain.distributed.base.Partition` describes. Because the batch list is a pure function of
``(lengths, seed, epoch)``, the sampler position is just ``(epoch, index)`` and resuming is exact.

That equal static share is ``train.balance = static`` (:class:`BatchSource`). With ``dynamic``
(:class:`DynamicBatchSource`) groups claim global batches one by one from a shared counter instead,
so under ADPSGD a fast learner takes more batches rather than waiting for a slow one.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from asrtrain.distributed.base import Partition
from asrtrain.errors import AsrError

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


def warn_if_too_few(batches: Sequence[Sequence[str]], part: Partition) -> None:
    """Say so when the data cannot give every learner its own data: fewer global batches than groups
    (the short groups train on batches another group also takes, each epoch) or fewer utterances in a
    batch than a group has members (some members step on an empty slice)."""
    if len(batches) < part.num_groups:
        log.warning("%d global batch(es) an epoch for %d learner groups: groups repeat other groups' batches; "
                    "fewer learners (or a smaller train.max_frames) give each its own data", len(batches),
                    part.num_groups)
    short = sum(len(b) < part.group_size for b in batches)
    if part.group_size > 1 and short:
        log.warning("%d of %d global batches hold fewer utterances than the %d learners that share each: some "
                    "learners step on an empty slice; fewer learners (or a larger train.max_frames) fill them",
                    short, len(batches), part.group_size)


def oversized(lengths: Dict[str, int], max_frames: int) -> List[str]:
    """Utterances longer than the per-learner frame budget (each will be batched alone)."""
    return [u for u, n in lengths.items() if n > max_frames]


class BatchSource:
    """The batches one learner trains on, epoch by epoch: ``train.balance = static``.

    Static balance deals every group an equal share of the epoch's global batches up front
    (:func:`learner_batches`). Under ADPSGD a fast learner then finishes its share and waits for the
    slowest one at the end of the epoch. :class:`DynamicBatchSource` lets groups claim batches instead.
    """

    #: batches collated ahead of the step by the loop's prefetch thread
    prefetch_depth = 2

    def __init__(self, lengths: Dict[str, int], spec: BatchSpec, part: Partition):
        self.lengths, self.spec, self.part = lengths, spec, part
        if part.group == 0 and part.member == 0:
            warn_if_too_few(make_batches(lengths, spec, 0, part.group_size), part)

    def steps_per_epoch(self) -> int:
        """This learner's steps per epoch under static balance (the lr schedule's unit)."""
        return len(learner_batches(self.lengths, self.spec, 0, self.part))

    def batches(self, epoch: int, start: int) -> Iterator[List[str]]:
        """This learner's batches of ``epoch`` from its ``start``-th on (resume)."""
        return iter(learner_batches(self.lengths, self.spec, epoch, self.part)[start:])

    def remaining(self, epoch: int, done: int) -> Optional[int]:
        """Batches of ``epoch`` this learner still has after ``done`` (None: not known in advance)."""
        return len(learner_batches(self.lengths, self.spec, epoch, self.part)) - done

    def schedule_step(self, step: int) -> int:
        """The step the lr schedule is evaluated at for this learner's optimizer step ``step``."""
        return step

    def privacy_steps(self, epochs: int) -> Tuple[int, int]:
        """(batches in one pass over this learner's data, the most steps it takes in an epoch) over
        ``epochs`` epochs: what DP's sampling rate and step count are computed from. Each epoch's
        shuffle packs the batches a little differently, so the fewest batches of any epoch (the largest
        sampling rate) and the most (the most steps) are taken: the epsilon spent never passes the
        target because one epoch had a batch more than the first."""
        counts = [len(learner_batches(self.lengths, self.spec, e, self.part)) for e in range(max(1, epochs))]
        return min(counts), max(counts)


class DynamicBatchSource(BatchSource):
    """``train.balance = dynamic``: groups claim the epoch's global batches one at a time.

    An atomic counter ``asrtrain/claim/e<epoch>`` in the rendezvous store hands out indices into
    :func:`make_batches`'s list, so each global batch is trained on exactly once per epoch and a fast
    group simply takes more of them. In a synchronous group (H-ADPSGD) member 0 claims and publishes
    the index of the group's step ``s`` under ``asrtrain/claim/e<epoch>/g<group>/s<s>``; the other members
    read it (a blocking get), so the group always steps together, each on its own slice. A claim
    past the end of the list ends the epoch for the whole group.

    Claims happen right before each step (no prefetch), so a slow learner never holds batches it has
    not started. The lr schedule follows the claimed index (:meth:`schedule_step`). Mid-epoch
    checkpoints are refused (the learners' batch positions do not line up), so a resume always starts
    an epoch from 0.
    """

    prefetch_depth = 0

    def __init__(self, lengths: Dict[str, int], spec: BatchSpec, part: Partition, rank: int,
                 timeout_s: float = 60.0):
        super().__init__(lengths, spec, part)
        self.rank, self.timeout_s = rank, timeout_s
        self._store = None
        self.taken: Dict[int, int] = {}  # epoch -> global batches this learner stepped on
        self._per_epoch = self.steps_per_epoch()
        self._at = 0.0  # the current batch's position in the job, in static steps

    def _connect(self):
        import datetime
        import os

        import torch.distributed as dist
        if self._store is None:
            # Our own client: the process group and the heartbeat use theirs from other threads.
            host, port = os.environ["MASTER_ADDR"], int(os.environ.get("MASTER_PORT", "29500"))
            from asrtrain.distributed.runtime.attempt import attempt_store
            self._store = attempt_store(dist.TCPStore(host, port, None, False,
                                                      timeout=datetime.timedelta(seconds=self.timeout_s)))
        return self._store

    def batches(self, epoch: int, start: int) -> Iterator[List[str]]:
        if start:
            raise AsrError(f"train.balance=dynamic cannot resume in the middle of epoch {epoch + 1}",
                           fix="resume from an epoch checkpoint (train.checkpoint_every_steps=0)")
        return self._claim(epoch)

    def _claims(self, epoch: int, count: int, cap: Optional[int] = None) -> Iterator[int]:
        """The indices into the epoch's ``count`` global batches that this group claims, one right before
        each step, until they run out (or after ``cap`` claims); counted in ``taken``, and each one
        moves the schedule position."""
        store = self._connect()
        counter = f"asrtrain/claim/e{epoch}"
        self.taken[epoch] = 0
        while cap is None or self.taken[epoch] < cap:
            key = f"{counter}/g{self.part.group}/s{self.taken[epoch]}"
            if self.part.member == 0:
                index = int(store.add(counter, 1)) - 1
                if self.part.group_size > 1:
                    store.set(key, str(index))
            else:
                index = int(store.get(key))
            if index >= count:
                break
            self.taken[epoch] += 1
            self._at = epoch * self._per_epoch + index / self.part.num_groups
            yield index

    def _claim(self, epoch: int) -> Iterator[List[str]]:
        glob = make_batches(self.lengths, self.spec, epoch, self.part.group_size)
        for index in self._claims(epoch, len(glob)):
            yield slice_for(glob[index], self.lengths, self.part.member, self.part.group_size)
        log.info("epoch %d: learner %d took %d of %d global batches (dynamic balance)", epoch + 1, self.rank,
                 self.taken[epoch], len(glob))

    def remaining(self, epoch: int, done: int) -> Optional[int]:
        return None

    def schedule_step(self, step: int) -> int:
        """The job's progress, not this learner's step count: a fast learner takes more steps than
        the static share the schedule's ``total_steps`` counts, and must not reach the end of a
        cosine schedule early. The current global batch index, in static steps, says where the
        whole job is."""
        return int(self._at)


def private_shard(lengths: Dict[str, int], part: Partition) -> Dict[str, int]:
    """Group ``part.group``'s fixed share of the utterances (``num_groups`` disjoint shards of similar
    size and length profile: round-robin over the utterances sorted by length, then id). The same in
    every epoch and every resume: a learner's data never moves to another learner."""
    ordered = sorted(lengths, key=lambda u: (lengths[u], u))
    return {u: lengths[u] for u in ordered[part.group::part.num_groups]}


class PrivateBatchSource(DynamicBatchSource):
    """``train.balance = dynamic`` under ``--dp`` (A(DP)^2SGD with heterogeneous learners).

    Plain dynamic balance hands a fast learner other learners' batches; under DP each learner (a site:
    a hospital, a call centre) must train on its own data only, and the number of steps it takes is
    what its privacy budget is computed for. So here the shared counter only *paces* the epoch: a
    claim is a turn, not a batch. Each turn the learner takes the next batch of its own fixed shard
    (:func:`private_shard`), batched per pass with :func:`make_batches` (pass ``k`` of epoch ``e`` is
    shuffled by ``(seed, e, k)``; when a fast learner runs out of its shard it starts the next pass).
    The epoch ends when the turns (the epoch's global batch count) run out, as in plain dynamic
    balance, or, for this learner, when it has taken ``cap`` turns in the epoch: ``dp.max_step_share``
    times its equal share. DP's sigma is computed for ``cap`` steps an epoch at sampling rate
    1 / (batches in one pass over the shard) (:meth:`privacy_steps`), so no learner's epsilon can
    exceed the target however fast it is; a slower learner spends less (logged).
    """

    def __init__(self, lengths: Dict[str, int], spec: BatchSpec, part: Partition, rank: int,
                 timeout_s: float = 60.0, max_share: float = 2.0):
        if part.group_size != 1:
            raise AsrError("private dynamic balance needs learners that step alone (ADPSGD), "
                           f"not groups of {part.group_size}", fix="use --strategy adpsgd with --dp")
        super().__init__(lengths, spec, part, rank, timeout_s)
        self.shard = private_shard(lengths, part)
        self.cap = max(1, int(max_share * self._per_epoch + 1e-9))

    def own_pass(self, epoch: int, k: int) -> List[List[str]]:
        """Pass ``k`` of ``epoch`` over this learner's shard (pass 0 of epoch 0 is SortaGrad's)."""
        return make_batches(self.shard, self.spec, epoch * 1000 + k, 1)

    def privacy_steps(self, epochs: int) -> Tuple[int, int]:
        return min(len(self.own_pass(e, 0)) for e in range(max(1, epochs))), self.cap

    def _claim(self, epoch: int) -> Iterator[List[str]]:
        turns = len(make_batches(self.lengths, self.spec, epoch, 1))
        k, own = 0, iter(self.own_pass(epoch, 0))
        for _ in self._claims(epoch, turns, self.cap):
            batch = next(own, None)
            if batch is None:
                k += 1
                own = iter(self.own_pass(epoch, k))
                batch = next(own)
            yield batch
        log.info("epoch %d: learner %d took %d of %d global batches (dynamic balance, own shard of %d "
                 "utterances, %d passes begun, at most %d)", epoch + 1, self.rank, self.taken[epoch], turns,
                 len(self.shard), k + 1, self.cap)

def batch_source(balance: str, lengths: Dict[str, int], spec: BatchSpec, part: Partition, rank: int,
                 timeout_s: float = 60.0, private: bool = False, max_share: float = 2.0) -> BatchSource:
    """The learner's :class:`BatchSource` for ``train.balance``. With one group (single, SSGD) dynamic
    and static deal the same batches, so the static source serves both. ``private`` (``--dp``): dynamic
    balance over each learner's own shard (:class:`PrivateBatchSource`)."""
    if balance == "dynamic" and part.num_groups > 1:
        if private:
            return PrivateBatchSource(lengths, spec, part, rank, timeout_s, max_share)
        return DynamicBatchSource(lengths, spec, part, rank, timeout_s)
    return BatchSource(lengths, spec, part)

import random

from asrtrain.distributed.base import Partition
from asrtrain.train.batching import BatchSpec, learner_batches, make_batches
from asrtrain.train.lr import lr_at
from asrtrain.config import TrainConfig


def lengths(n=300, seed=0):
    rng = random.Random(seed)
    return {f"u{i:04d}": rng.randint(50, 1200) for i in range(n)}


def test_batches_cover_every_utterance_once_within_budget():
    ls = lengths()
    spec = BatchSpec(max_frames=4000, max_utts=50, bucket_width=100, seed=3)
    batches = make_batches(ls, spec, epoch=0)
    flat = [u for b in batches for u in b]
    assert sorted(flat) == sorted(ls)
    for b in batches:
        assert len(b) == 1 or max(ls[u] for u in b) * len(b) <= 4000
        assert len(b) <= 50


def test_batches_deterministic_per_epoch_and_differ_between_epochs():
    ls = lengths()
    spec = BatchSpec(4000, 50, 100, 3)
    assert make_batches(ls, spec, 1) == make_batches(ls, spec, 1)
    assert make_batches(ls, spec, 1) != make_batches(ls, spec, 2)


def test_long_utterance_alone():
    ls = {"a": 100, "b": 9000, "c": 120}
    batches = make_batches(ls, BatchSpec(1000, 10, 100, 0), 0)
    assert ["b"] in batches


def test_partitions_cover_the_global_batches():
    ls = lengths(101)
    spec = BatchSpec(3000, 50, 100, 1)
    # ssgd-like: 1 group of 3 -> slices of each global batch, together the whole epoch
    parts = [learner_batches(ls, spec, 0, Partition(0, 1, m, 3)) for m in range(3)]
    assert len({len(p) for p in parts}) == 1
    assert sorted(u for p in parts for b in p for u in b) == sorted(ls)
    # adpsgd-like: 3 groups of 1 -> disjoint streams that together cover everything
    parts = [learner_batches(ls, spec, 0, Partition(g, 3, 0, 1)) for g in range(3)]
    flat = [u for p in parts for b in p for u in b]
    assert set(flat) == set(ls)  # nothing lost
    assert len({len(p) for p in parts}) == 1  # same number of steps for every learner
    n_global = len(make_batches(ls, spec, 0))
    assert sum(len(p) for p in parts) - n_global < 3  # at most one wrapped batch per short group


def test_lr_warmup_then_anneal():
    cfg = TrainConfig(lr=1.0, warmup_steps=10, anneal="exp", anneal_factor=0.5, anneal_every_steps=10,
                      min_lr=0.01)
    assert lr_at(0, cfg, 100) == 0.1
    assert lr_at(9, cfg, 100) == 1.0
    assert abs(lr_at(20, cfg, 100) - 0.5) < 1e-12
    assert lr_at(10_000, cfg, 100) == 0.01
    cos = TrainConfig(lr=1.0, warmup_steps=0, anneal="cosine", min_lr=0.0)
    assert abs(lr_at(50, cos, 100) - 0.5) < 1e-9 and lr_at(100, cos, 100) == 0.0


def test_batches_by_utterance_count_when_frames_are_out_of_reach():
    """train.max_utts caps a batch by utterances beside train.max_frames: with the frame cap out of reach
    every batch holds exactly max_utts utterances, but for one remainder (a fixed-size batch)."""
    rng = random.Random(0)
    ls = {f"u{i:03d}": rng.randint(50, 800) for i in range(301)}
    spec = BatchSpec(max_frames=10 ** 9, max_utts=32, bucket_width=100, seed=1)
    sizes = sorted(len(b) for b in make_batches(ls, spec, epoch=0))
    assert sizes == [301 - 9 * 32] + [32] * 9


def test_too_few_batches_or_utterances_for_the_learners_are_warned_of(caplog):
    """3 utterances in one batch for 4 ADPSGD learners trained all 4 on the same batch, and SSGD gave a
    learner an empty slice, without a word."""
    from asrtrain.distributed.base import Partition
    from asrtrain.train.batching import BatchSource, BatchSpec
    lengths = {"a": 100, "b": 110, "c": 120}
    spec = BatchSpec(max_frames=1000, max_utts=256, bucket_width=100, seed=1)
    BatchSource(lengths, spec, Partition(group=0, num_groups=4, member=0, group_size=1))
    assert "1 global batch(es) an epoch for 4 learner groups" in caplog.text
    caplog.clear()
    BatchSource(lengths, spec, Partition(group=0, num_groups=1, member=0, group_size=4))
    assert "1 of 1 global batches hold fewer utterances than the 4 learners" in caplog.text
    caplog.clear()
    BatchSource(lengths, spec, Partition(group=0, num_groups=1, member=0, group_size=2))
    BatchSource(lengths, spec, Partition(group=1, num_groups=4, member=0, group_size=1))  # only group 0 says it
    assert caplog.text == ""

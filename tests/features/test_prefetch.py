"""The batch prefetch thread (asrtrain/features/dataset.py's prefetch) binds the learner's device before it
pins memory."""

import torch


def test_prefetch_thread_binds_the_learners_gpu_before_it_pins(tmp_path, monkeypatch):
    """A new thread starts on GPU 0: the prefetch thread must make the learner's GPU current before it
    pins a batch, or every learner of a node opens a context on GPU 0. (CUDA faked: set_device and pin
    are recorded with the thread that called them.) On the CPU nothing is bound and nothing pinned."""
    import threading

    from tests.helpers.featfix import make_feat_dir
    from asrtrain.features.dataset import AsrDataset, Batch, prefetch

    calls = []

    def note(what):
        calls.append((threading.current_thread().name, what))

    monkeypatch.setattr(torch.cuda, "set_device", lambda d: note(str(d)))
    monkeypatch.setattr(Batch, "pin", lambda self: note("pin") or self)
    ds = AsrDataset(make_feat_dir(tmp_path / "f", 6), 1)
    batches = [[u] for u in sorted(ds.lengths)[:3]]
    assert len(list(prefetch(ds, batches, depth=2, device=torch.device("cpu")))) == 3
    assert calls == []
    assert len(list(prefetch(ds, batches, depth=2, device=torch.device("cuda", 1)))) == 3
    assert calls == [("prefetch", "cuda:1")] + [("prefetch", "pin")] * 3


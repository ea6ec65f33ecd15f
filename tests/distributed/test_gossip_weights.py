"""ADPSGD's gossip state and staged weights (asrtrain/distributed/gossip.py, gossip_weights.py): a pending
averaging survives a checkpoint, snapshots never overwrite the claimed buffer, and a fold is not lost."""

import pytest
import torch


@pytest.mark.parametrize("kind", ["host", "staged"])
def test_pending_averaging_survives_a_checkpoint(kind, monkeypatch):
    """What landed but is not folded is saved with the strategy state: x + D is kept exactly."""
    from asrtrain.distributed import gossip as comm, gossip_weights as weights

    if kind == "staged":
        monkeypatch.setattr(comm, "make_weights", weights.DeviceWeights)
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(5, 3)), torch.nn.Parameter(torch.randn(4))]
    g = comm.Gossip(params, [0, 1], 0, group=None)
    g.stage()
    msg, step = g._snapshot()
    g._write_back(msg[:-1], msg[:-1] + torch.randn(msg.numel() - 1), step)
    eff = g.effective()
    state = g.pending_state()
    fresh = [torch.nn.Parameter(p.detach().clone()) for p in params]
    g2 = comm.Gossip(fresh, [0, 1], 0, group=None)
    g2.load_pending_state(state)
    assert torch.equal(g2.effective(), eff)
    assert g2.fold()
    torch.testing.assert_close(g2.effective(), eff, rtol=0, atol=1e-12)


def test_staged_snapshots_never_overwrite_the_claimed_buffer():
    from asrtrain.distributed.gossip_weights import DeviceWeights

    p = torch.nn.Parameter(torch.zeros(4))
    w = DeviceWeights([p])
    with torch.no_grad():
        p.fill_(1.0)
    w.stage()
    w.claim()  # the thread holds the snapshot of 1s ...
    with torch.no_grad():
        p.fill_(2.0)
    w.stage()
    w.stage()  # ... while the main thread stages twice more
    out = torch.empty(4)
    w.wait_claimed()
    w.snapshot_into(out)
    assert torch.equal(out, torch.ones(4))
    w.claim()
    w.snapshot_into(out)
    assert torch.equal(out, torch.full((4,), 2.0))


def test_a_fold_between_claim_and_read_is_not_left_out_of_the_snapshot(monkeypatch):
    """The gossip thread claims a staged copy, waits for it without the lock, then reads copy + D. A fold
    in that gap moves D into the weights after the copy was taken and zeroes D: the thread must read
    a copy taken after the fold, so the pair still averages x + D (what the learner holds)."""
    from asrtrain.distributed import gossip as comm, gossip_weights as weights

    monkeypatch.setattr(comm, "make_weights", weights.DeviceWeights)  # the GPU path's staging, on the CPU
    p = torch.nn.Parameter(torch.ones(4))
    g = comm.Gossip([p], [0, 1], 0, None)
    g.stage()
    with g.locked():
        g.weights.delta += 0.5  # an averaging that landed and is not folded yet
        g._pending = True
    wait = g.weights.wait_claimed
    folds = []

    def wait_then_fold():  # the main thread reaches a step boundary while the thread waits
        wait()
        if not folds:
            folds.append(g.fold())

    monkeypatch.setattr(g.weights, "wait_claimed", wait_then_fold)
    msg, _ = g._snapshot()
    assert folds == [True] and torch.equal(p.detach(), torch.full((4,), 1.5))
    assert torch.equal(msg[:-1], torch.full((4,), 1.5))

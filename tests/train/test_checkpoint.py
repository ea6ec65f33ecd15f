"""Checkpoints (asrtrain/train/checkpoint.py and the loop's use of them): RNG state across devices, no
command runs from a pickle payload, a corrupt one is named, resume and restart, and pruning."""

import os

import torch
from click.testing import CliRunner

from asrtrain.cli import cli

from tests.helpers.cli_helpers import one_error
from tests.helpers.train_runs import data, train  # noqa: F401 - the module-scoped feature fixture


def test_numpy_rng_state_restores_from_a_checkpoint_mapped_onto_a_gpu():
    """--resume loads a checkpoint with map_location=the learner's device, so on a GPU every tensor in it,
    numpy's generator state included, arrives in device memory, where .numpy() raises. Stand-in: a tensor
    that refuses .numpy() as a CUDA tensor does until it is copied to the host."""
    import numpy as np

    from asrtrain.train.checkpoint import rng_state, set_rng_state

    class OnGpu:
        def __init__(self, t):
            self.t = t

        def numpy(self):
            raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu()")

        def cpu(self):
            return self.t

    np.random.seed(3)
    state = rng_state()
    want = np.random.rand(4)
    state["numpy"][1] = OnGpu(state["numpy"][1])
    np.random.seed(99)
    set_rng_state(state)
    assert np.array_equal(np.random.rand(4), want)


class _Payload:
    """Unpickling this runs a command that creates a marker file: what a malicious checkpoint does."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_no_command_runs_a_pickle_payload(data, tmp_path):
    exp = tmp_path / "exp"
    assert train(data, exp, "--set", "train.epochs=1").exit_code == 0
    tr, dev, _ = data
    marker = tmp_path / "pwned"
    evil = {"model": _Payload(marker), "avg_model": _Payload(marker)}
    torch.save(evil, exp / "final.pt")
    (exp / "final.pt.sha256").unlink()
    ck = exp / "checkpoints" / "epoch-0001.rank0.pt"
    torch.save(dict(evil, step=1, epoch=1, batch_index=0, optimizer={}, rng={}), ck)
    (exp / "checkpoints" / "epoch-0001.rank0.pt.sha256").unlink()
    runner = CliRunner()
    calls = [["decode", exp, dev, tmp_path / "d"], ["decode", exp, dev, tmp_path / "d2", "--checkpoint", ck],
             ["forward", exp, dev, tmp_path / "f.ark"], ["average", exp, "--last", "1", "--out", tmp_path / "a.pt"]]
    for call in calls:
        line = one_error(runner.invoke(cli, [str(a) for a in call]))
        assert "refused to load" in line and "pickle" in line, line
    # (a finished run's --resume loads nothing: extend it, so the checkpoint is read)
    r = train(data, exp, "--set", "train.epochs=2", "--resume")
    assert r.exit_code == 1 and "refused to load" in r.output and "Traceback" not in r.output
    assert not marker.exists()


def test_a_corrupt_checkpoint_is_named_not_resumed(data, tmp_path):
    exp = tmp_path / "exp"
    assert train(data, exp, "--set", "train.epochs=2").exit_code == 0
    ck = exp / "checkpoints" / "epoch-0002.rank0.pt"
    blob = bytearray(ck.read_bytes())
    for i in range(len(blob) // 2, len(blob) // 2 + 400):  # flip 400 bytes in the middle
        blob[i] ^= 0xFF
    ck.write_bytes(bytes(blob))
    r = train(data, exp, "--set", "train.epochs=3", "--resume")  # extended: the finished run is read on
    assert r.exit_code == 1 and "checksum mismatch" in r.output and "epoch-0002.rank0.pt" in r.output


def test_resume_without_latest_is_an_error_and_restart_starts_over(data, tmp_path):
    exp = tmp_path / "exp"
    assert train(data, exp, "--set", "train.epochs=1").exit_code == 0
    (exp / "checkpoints" / "latest").unlink()
    r = train(data, exp, "--set", "train.epochs=1", "--resume")
    assert r.exit_code == 1 and "latest is missing" in r.output and "--restart" in r.output
    r = train(data, exp)  # a fresh run must not overwrite them either
    assert r.exit_code == 1 and "already holds a training run" in r.output
    (exp / "checkpoints" / ".epoch-0001.rank0.pt.abc.tmp").write_bytes(b"half")
    r = train(data, exp, "--set", "train.epochs=1", "--restart")
    assert r.exit_code == 0, r.output
    assert not list((exp / "checkpoints").glob(".*.tmp"))
    assert (exp / "checkpoints" / "latest").read_text().strip() == "epoch-0001"


def test_epoch_checkpoints_are_pruned_but_averaging_keeps_its_own(data, tmp_path):
    exp = tmp_path / "exp"
    r = train(data, exp, "--set", "train.epochs=5", "--set", "train.keep_checkpoints=1",
              "--set", "train.average_last=2")
    assert r.exit_code == 0, r.output
    names = sorted(p.name for p in (exp / "checkpoints").glob("epoch-*.pt"))
    assert names == ["epoch-0004.rank0.pt", "epoch-0005.rank0.pt"]

"""The real training loop under each distributed strategy (spawned gloo learners on CPU)."""

import pytest
import torch
from click.testing import CliRunner

from asrtrain.cli import cli
from tests.helpers.strategy_runs import data, final, train  # noqa: F401 - the module-scoped feature fixture

pytestmark = pytest.mark.slow  # spawned learners


def test_ssgd_two_learners_equal_one_learner_with_the_same_global_batch(data, tmp_path):
    r = train(data, tmp_path / "one", ["train.max_frames=1600"])
    assert r.exit_code == 0, r.output
    r = train(data, tmp_path / "two", ["train.max_frames=800"], "--strategy", "ssgd", "--learners", "2")
    assert r.exit_code == 0, r.output
    a, b = final(tmp_path / "one"), final(tmp_path / "two")
    for k in a:
        assert torch.allclose(a[k], b[k], atol=2e-5, rtol=1e-4), (k, (a[k] - b[k]).abs().max())
    # and training did move the weights (the comparison is not vacuous)
    init = torch.load(tmp_path / "one" / "checkpoints" / "epoch-0001.rank0.pt", weights_only=True)["model"]
    assert any(not torch.allclose(init[k], a[k]) for k in a)


def test_adpsgd_trains_averages_and_logs_its_metrics(data, tmp_path):
    exp = tmp_path / "adpsgd"
    r = train(data, exp, ["train.max_frames=800"], "--strategy", "adpsgd", "--learners", "2",
              "--averaging", "random", "--delay-by-one")
    assert r.exit_code == 0, r.output
    for rank in (0, 1):
        assert (exp / "checkpoints" / f"epoch-0002.rank{rank}.pt").is_file()
    log = (exp / "train.log").read_text()
    assert "exchanges_per_step=" in log and "consensus_distance=" in log and "[1]" in log
    # final.pt is the average of both learners' last weights
    m0 = torch.load(exp / "checkpoints" / "epoch-0002.rank0.pt", weights_only=True)
    m1 = torch.load(exp / "checkpoints" / "epoch-0002.rank1.pt", weights_only=True)
    f = final(exp)
    for k in f:
        assert torch.allclose(f[k], m0["avg_model"][k], atol=1e-6)
        assert torch.allclose(m0["avg_model"][k], (m0["model"][k] + m1["model"][k]) / 2, atol=1e-5)


def test_hadpsgd_group_members_identical_and_resume(data, tmp_path):
    exp = tmp_path / "h"
    opts = ["--strategy", "h-adpsgd", "--learners", "4", "--learners-per-node", "2"]
    r = train(data, exp, ["train.max_frames=600", "train.epochs=3"], *opts, "--stop-after-steps", "3")
    assert r.exit_code == 0, r.output
    r = train(data, exp, ["train.max_frames=600", "train.epochs=3"], *opts, "--resume")
    assert r.exit_code == 0, r.output
    ck = [torch.load(exp / "checkpoints" / f"epoch-0003.rank{r}.pt", weights_only=True)["model"] for r in range(4)]
    for k in ck[0]:
        assert torch.equal(ck[0][k], ck[1][k]) and torch.equal(ck[2][k], ck[3][k]), k
    assert (exp / "final.pt").is_file()


def test_ssgd_mid_epoch_resume_reports_the_whole_epochs_train_loss_on_every_learner(data, tmp_path):
    """Each learner keeps its own running loss of the epoch in its step checkpoint: after a resume from
    the middle of epoch 1 both learners' epoch rows (train.log, TensorBoard, curves.png) are the
    uninterrupted run's."""
    sets = ["train.max_frames=600", "train.checkpoint_every_steps=2"]
    opts = ["--strategy", "ssgd", "--learners", "2"]
    r = train(data, tmp_path / "full", sets, *opts)
    assert r.exit_code == 0, r.output
    cut = tmp_path / "cut"
    r = train(data, cut, sets, *opts, "--stop-after-steps", "3")
    assert r.exit_code == 0, r.output
    assert (cut / "checkpoints" / "latest").read_text().strip() == "step-00000002"
    r = train(data, cut, sets, *opts, "--resume")
    assert r.exit_code == 0, r.output
    for rank in (0, 1):
        want = torch.load(tmp_path / "full" / "checkpoints" / f"epoch-0002.rank{rank}.pt", weights_only=True)
        got = torch.load(cut / "checkpoints" / f"epoch-0002.rank{rank}.pt", weights_only=True)
        assert [h["train_loss"] for h in got["history"]] == \
            pytest.approx([h["train_loss"] for h in want["history"]], rel=1e-6), rank


def test_odd_ring_is_refused_before_spawning(data, tmp_path):
    tr, dev, tok = data
    r = CliRunner().invoke(cli, ["train", "--train-data", str(tr), "--tokenizer", str(tok), "--exp-dir",
                                 str(tmp_path / "x"), "--strategy", "adpsgd", "--learners", "3"])
    assert r.exit_code == 1 and "3" in r.output and "Traceback" not in r.output


def test_dynamic_balance_adpsgd_stops_mid_epoch_and_resumes_from_the_epoch_checkpoint(data, tmp_path):
    """Under dynamic balance the learners' step counts differ; a stop at a job position ends both
    without a hang, and --resume restarts the unfinished epoch from its start with the strategy state."""
    from asrtrain.config import TrainConfig
    from asrtrain.distributed.base import Partition
    from asrtrain.train.batching import BatchSpec, learner_batches, make_batches
    from asrtrain.features.dataset import AsrDataset

    tr, _, _ = data
    t = TrainConfig()
    lengths = AsrDataset(tr, 2, None, None).lengths
    spec = BatchSpec(600, t.max_utts, t.bucket_width, t.seed, t.sortagrad)
    per_epoch = len(learner_batches(lengths, spec, 0, Partition(group=0, num_groups=2, member=0, group_size=1)))
    assert len(make_batches(lengths, spec, 1)) >= 4  # room for both learners to stop inside epoch 2
    exp = tmp_path / "dyn"
    sets = ["train.max_frames=600", "train.balance=dynamic"]
    opts = ["--strategy", "adpsgd", "--learners", "2"]
    r = train(data, exp, sets, *opts, "--stop-after-steps", str(per_epoch + per_epoch // 2))
    assert r.exit_code == 0, r.output
    ck = exp / "checkpoints"
    assert (ck / "epoch-0001.rank0.pt").is_file() and not (ck / "epoch-0002.rank0.pt").exists()
    round_1 = torch.load(ck / "epoch-0001.rank0.pt", weights_only=True)["strategy"]["round"]
    assert round_1 > 0
    r = train(data, exp, sets, *opts, "--resume")
    assert r.exit_code == 0, r.output
    log = (exp / "train.log").read_text()
    assert "resumed from epoch-0001" in log
    done = torch.load(ck / "epoch-0002.rank0.pt", weights_only=True)
    assert done["strategy"]["round"] > round_1 and [h["epoch"] for h in done["history"]] == [1, 2]
    assert (exp / "final.pt").is_file()

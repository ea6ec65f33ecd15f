"""Training loop contracts: exact resume, self-describing exp dir, final averaging, CLI."""

import torch
from click.testing import CliRunner

from asrtrain.cli import cli

from tests.helpers.train_runs import data, params, train  # noqa: F401 - the module-scoped feature fixture

def test_resume_reproduces_uninterrupted_run(data, tmp_path):
    r = train(data, tmp_path / "full", "--set", "train.checkpoint_every_steps=4")
    assert r.exit_code == 0, r.output
    # killed mid-epoch at step 6 (checkpoint at step 4), then resumed
    r = train(data, tmp_path / "cut", "--set", "train.checkpoint_every_steps=4", "--stop-after-steps", "6")
    assert r.exit_code == 0, r.output
    assert not (tmp_path / "cut" / "final.pt").exists()
    latest = (tmp_path / "cut" / "checkpoints" / "latest").read_text().strip()
    assert latest.startswith("step-")
    r = train(data, tmp_path / "cut", "--set", "train.checkpoint_every_steps=4", "--resume")
    assert r.exit_code == 0, r.output
    a, b = params(tmp_path / "full" / "final.pt"), params(tmp_path / "cut" / "final.pt")
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    # an epoch-end resume point gives the same too
    e1 = torch.load(tmp_path / "full" / "checkpoints" / "epoch-0003.rank0.pt", weights_only=True)
    e2 = torch.load(tmp_path / "cut" / "checkpoints" / "epoch-0003.rank0.pt", weights_only=True)
    assert e1["step"] == e2["step"] and e1["history"][0]["train_loss"] == e2["history"][0]["train_loss"]
    # the epoch resumed mid-way reports the whole epoch's train_loss (its batches before the checkpoint
    # count too): train.log's epoch lines and the history (TensorBoard, curves.png) are the full run's
    assert [h["train_loss"] for h in e2["history"]] == [h["train_loss"] for h in e1["history"]]
    assert epoch_lines(tmp_path / "cut") == epoch_lines(tmp_path / "full")


def epoch_lines(exp):
    """train.log's ``epoch N: train_loss .. dev_loss .. lr ..`` lines, without the time they took."""
    return [line.split("INFO asrtrain.train: ")[1].rsplit(" (", 1)[0]
            for line in (exp / "train.log").read_text().splitlines() if "INFO asrtrain.train: epoch " in line]


def test_resume_from_a_step_checkpoint_without_the_running_loss(data, tmp_path):
    """A step checkpoint of an older asrtrain kept no running loss: it resumes, and the log says the
    epoch's train_loss covers only the batches since the resume."""
    from asrtrain.train import checkpoint as ckpt

    exp = tmp_path / "old"
    r = train(data, exp, "--set", "train.checkpoint_every_steps=4", "--stop-after-steps", "6")
    assert r.exit_code == 0, r.output
    tag = ckpt.latest_tag(exp)
    payload = ckpt.load(exp, tag, 0)
    assert tag.startswith("step-") and payload["batch_index"] > 0 and payload["epoch_count"] > 0
    del payload["epoch_loss_sum"], payload["epoch_count"]
    ckpt.save(exp, tag, 0, payload)
    r = train(data, exp, "--set", "train.checkpoint_every_steps=4", "--resume")
    assert r.exit_code == 0, r.output
    log = (exp / "train.log").read_text()
    assert (f"learner 0: {tag} predates the epoch's running loss in step checkpoints: epoch "
            f"{payload['epoch'] + 1}'s train_loss covers the batches since the resume (from batch "
            f"{payload['batch_index'] + 1})") in log, log
    assert (exp / "final.pt").is_file()


def test_exp_dir_describes_itself(data, tmp_path):
    exp = tmp_path / "exp"
    r = train(data, exp)
    assert r.exit_code == 0, r.output
    for name in ["config.yaml", "tokenizer.model", "final.pt", "curves.png", "train.log"]:
        assert (exp / name).is_file(), name
    assert list((exp / "tensorboard" / "rank0").glob("events.out.tfevents*"))
    text = (exp / "config.yaml").read_text()
    assert "input_dim: 13" in text and "num_targets:" in text
    log = (exp / "train.log").read_text()
    assert "epoch 3:" in log and "dev_loss" in log
    # final.pt is the average of the last 3 epochs' models
    eps = [torch.load(exp / "checkpoints" / f"epoch-000{i}.rank0.pt", weights_only=True)["avg_model"]
           for i in (1, 2, 3)]
    final = params(exp / "final.pt")
    k = "head.weight"
    # one learner: the averaged model is its model, stored once (shared storage, not a second copy)
    e3 = torch.load(exp / "checkpoints" / "epoch-0003.rank0.pt", weights_only=True)
    assert torch.equal(e3["avg_model"][k], e3["model"][k])
    assert e3["avg_model"][k].untyped_storage().data_ptr() == e3["model"][k].untyped_storage().data_ptr()
    assert torch.allclose(final[k], (eps[0][k] + eps[1][k] + eps[2][k]) / 3, atol=1e-6)
    # a second fresh run into the same dir is refused, with the fix named
    r = CliRunner().invoke(cli, ["train", "--train-data", str(data[0]), "--tokenizer", str(data[2]),
                                 "--exp-dir", str(exp)])
    assert r.exit_code == 1 and "--resume" in r.output
    # resume with a changed config is refused
    r = train(data, exp, "--resume", "--set", "train.lr=0.5")
    assert r.exit_code == 1 and "train.lr" in r.output


def test_decode_and_average_cli(data, tmp_path):
    exp = tmp_path / "exp"
    assert train(data, exp).exit_code == 0
    tr, dev, _ = data
    for method in ("greedy", "beam"):
        out = tmp_path / f"dec_{method}"
        r = CliRunner().invoke(cli, ["decode", str(exp), str(dev), str(out), "--method", method])
        assert r.exit_code == 0, r.output
        lines = (out / "text").read_text().splitlines()
        assert [l.split()[0] for l in lines] == sorted(l.split()[0] for l in (dev / "text").read_text().splitlines())
    # lexicon search with a word LM of the training transcripts: only vocabulary words come out
    r = CliRunner().invoke(cli, ["lm", "train", "--text", str(tr / "text"), "--out", str(tmp_path / "lm")])
    assert r.exit_code == 0, r.output
    vocab = set((tmp_path / "lm" / "words.txt").read_text().split())
    out = tmp_path / "dec_lm"
    r = CliRunner().invoke(cli, ["decode", str(exp), str(dev), str(out), "--lm", str(tmp_path / "lm" / "lm.arpa"),
                                 "--beam-size", "8"])
    assert r.exit_code == 0, r.output
    lines = (out / "text").read_text().splitlines()
    assert len(lines) == len((dev / "text").read_text().splitlines())
    assert {w for l in lines for w in l.split()[1:]} <= vocab
    from asrtrain.decode.flashlight import available
    if available():  # the opt-in C++ engine through the same command
        r = CliRunner().invoke(cli, ["decode", str(exp), str(dev), str(tmp_path / "dec_fl"), "--beam-size", "8",
                                     "--lm", str(tmp_path / "lm" / "lm.arpa"), "--engine", "flashlight"])
        assert r.exit_code == 0, r.output
        fl = (tmp_path / "dec_fl" / "text").read_text().splitlines()
        assert [l.split()[0] for l in fl] == [l.split()[0] for l in lines]
        assert {w for l in fl for w in l.split()[1:]} <= vocab
    # tune-lm: the grid on dev; decode --params reproduces the winner's hypotheses exactly
    tuned = tmp_path / "tune"
    r = CliRunner().invoke(cli, ["tune-lm", str(exp), str(dev), str(tuned), "--lm", str(tmp_path / "lm" / "lm.arpa"),
                                 "--lm-weights", "0.2,1.5", "--word-bonuses", "0,3", "--beam-size", "4"])
    assert r.exit_code == 0, r.output
    grid = [l.split("\t") for l in (tuned / "grid.tsv").read_text().splitlines()[1:]]
    assert len(grid) == 4 and {g[0] for g in grid} == {"closed"}
    assert {g[3] for g in grid} == {"0"}  # att_rescore: none by default
    best = min(float(g[4]) for g in grid)
    assert f"%WER {best:.2f}" in r.output and f"dev_wer: {round(best, 2)}" in (tuned / "best.yaml").read_text()
    assert "oov_penalty: closed" in (tuned / "best.yaml").read_text()
    assert "att_rescore: 0.0" in (tuned / "best.yaml").read_text()
    r = CliRunner().invoke(cli, ["decode", str(exp), str(dev), str(tmp_path / "dec_tuned"), "--params",
                                 str(tuned / "best.yaml"), "--lm", str(tmp_path / "lm" / "lm.arpa")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "dec_tuned" / "text").read_text() == (tuned / "text").read_text()
    r = CliRunner().invoke(cli, ["decode", str(exp), str(dev), str(tmp_path / "y"), "--params",
                                 str(tuned / "best.yaml"), "--lm", str(tmp_path / "lm" / "lm.arpa"), "--lm-weight", "1"])
    assert r.exit_code == 1 and "do not also give them" in r.output
    (tmp_path / "bad.yaml").write_text("lm_weight: 0.5\nword_bonus: x\nbeam_size: 4\n")
    r = CliRunner().invoke(cli, ["decode", str(exp), str(dev), str(tmp_path / "y"), "--params",
                                 str(tmp_path / "bad.yaml"), "--lm", str(tmp_path / "lm" / "lm.arpa")])
    assert r.exit_code == 1 and "bad.yaml:2" in r.output and "Traceback" not in r.output
    (tmp_path / "bad.yaml").write_text("lm_weight: 0.5\nword_bonus: 1\nbeam_size: 4\noov_penalty: open\n")
    r = CliRunner().invoke(cli, ["decode", str(exp), str(dev), str(tmp_path / "y"), "--params",
                                 str(tmp_path / "bad.yaml"), "--lm", str(tmp_path / "lm" / "lm.arpa")])
    assert r.exit_code == 1 and "bad.yaml:4" in r.output and "Traceback" not in r.output
    # the open-vocabulary search joins the grid; closed comes first, and decode --params follows the winner
    lm_arpa = str(tmp_path / "lm" / "lm.arpa")
    open_dir = tmp_path / "tune_open"
    r = CliRunner().invoke(cli, ["tune-lm", str(exp), str(dev), str(open_dir), "--lm", lm_arpa, "--lm-weights",
                                 "0.5", "--word-bonuses", "0,2", "--oov-penalties", "-2,closed", "--beam-size", "4"])
    assert r.exit_code == 0, r.output
    grid = [l.split("\t") for l in (open_dir / "grid.tsv").read_text().splitlines()[1:]]
    assert [g[0] for g in grid] == ["closed", "closed", "-2", "-2"]
    r = CliRunner().invoke(cli, ["decode", str(exp), str(dev), str(tmp_path / "dec_open"), "--params",
                                 str(open_dir / "best.yaml"), "--lm", lm_arpa])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "dec_open" / "text").read_text() == (open_dir / "text").read_text()
    r = CliRunner().invoke(cli, ["decode", str(exp), str(dev), str(tmp_path / "dec_open2"), "--lm", lm_arpa,
                                 "--beam-size", "4", "--oov-penalty", "-2"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, ["tune-lm", str(exp), str(dev), str(open_dir), "--lm", lm_arpa,
                                 "--oov-penalties", "closed,closed"])
    assert r.exit_code == 1 and "--oov-penalties" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(cli, ["decode", str(exp), str(dev), str(tmp_path / "y"), "--lm", lm_arpa,
                                 "--oov-penalty", "-2", "--engine", "flashlight"])
    assert r.exit_code == 1 and "closed-vocabulary" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(cli, ["tune-lm", str(exp), str(dev), str(tuned), "--lm", str(tmp_path / "lm" / "lm.arpa"),
                                 "--lm-weights", "0.5,abc"])
    assert r.exit_code == 1 and "--lm-weights" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(cli, ["decode", str(exp), str(dev), str(tmp_path / "x"), "--method", "lexicon"])
    assert r.exit_code == 1 and "needs a vocabulary" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(cli, ["average", str(exp), "--last", "2", "--out", str(tmp_path / "avg.pt")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "avg.pt").is_file()

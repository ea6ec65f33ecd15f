"""Runs that are done, extended, restarted or averaged, and dev data that does not match the training
features: nothing is rewritten that need not be, and every refusal is one line with its fix."""

import hashlib
import logging
import os
import shutil
from pathlib import Path

import pytest
import torch
import yaml

from tests.helpers.featfix import make_feat_dir, make_task
from tests.helpers.cli_helpers import one_error, run

SMALL = ["model.num_layers=1", "model.hidden=16", "model.subsample=2", "train.max_frames=1500",
         "train.warmup_steps=2", "train.lr=0.005", "train.threads=1", "specaug.enabled=false"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_task(tmp_path_factory.mktemp("feats"), 24, 6)


def train(data, exp, *extra, dev=None, train_dir=None):
    """``asrtrain train`` on ``data``; ``dev=False`` leaves --dev-data out."""
    tr, dv, tok = data
    args = ["train", "--train-data", train_dir or tr, "--tokenizer", tok, "--exp-dir", exp]
    if dev is not False:
        args += ["--dev-data", dev or dv]
    for s in SMALL:
        args += ["--set", s]
    return run(*args, *extra)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tree(d: Path):
    return {p.relative_to(d): (p.stat().st_mtime_ns, sha(p)) for p in sorted(d.rglob("*")) if p.is_file()}


def model(path: Path):
    return torch.load(path, map_location="cpu", weights_only=True)


@pytest.fixture(scope="module")
def two_epochs(data, tmp_path_factory):
    """A finished 2-epoch run (anneal exp), copied by each test that changes it."""
    exp = tmp_path_factory.mktemp("runs") / "exp2"
    r = train(data, exp, "--set", "train.epochs=2", "--set", "train.average_last=2")
    assert r.exit_code == 0, r.output
    return exp


def copy(exp: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(exp, tmp_path / exp.name))


# -- #11: resuming a finished run, extending a run -------------------------------------------------------

def test_resume_of_a_finished_run_touches_nothing(data, two_epochs, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    exp = copy(two_epochs, tmp_path)
    before = tree(exp)
    r = train(data, exp, "--set", "train.epochs=2", "--set", "train.average_last=2", "--resume")
    assert r.exit_code == 0, r.output
    assert "already finished (all 2 epochs trained, final.pt written): nothing to do" in caplog.text
    assert r.stdout.strip() == str(exp / "final.pt")
    assert tree(exp) == before  # not final.pt, not config.yaml, not train.log


def test_extending_a_run_equals_training_that_long_from_the_start(data, two_epochs, tmp_path, caplog):
    """anneal exp does not depend on the epoch count: 2 epochs, then --resume to 3, is a 3-epoch run."""
    caplog.set_level(logging.INFO)
    exp = copy(two_epochs, tmp_path)
    old_final = sha(exp / "final.pt")
    r = train(data, exp, "--set", "train.epochs=3", "--set", "train.average_last=2", "--resume")
    assert r.exit_code == 0, r.output
    assert "the 2-epoch run's final.pt is replaced when the 3-epoch run ends" in caplog.text
    assert "extending the run from 2 to 3 epochs: the lr schedule (anneal exp) does not depend" in caplog.text
    assert sha(exp / "final.pt") != old_final
    assert yaml.safe_load((exp / "config.yaml").read_text())["train"]["epochs"] == 3
    straight = tmp_path / "straight"
    assert train(data, straight, "--set", "train.epochs=3", "--set", "train.average_last=2").exit_code == 0
    a, b = model(exp / "final.pt")["model"], model(straight / "final.pt")["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    # resumed again at 3: finished
    caplog.clear()
    r = train(data, exp, "--set", "train.epochs=3", "--set", "train.average_last=2", "--resume")
    assert r.exit_code == 0 and "already finished" in caplog.text


def test_extending_a_cosine_run_logs_the_rate_jump(data, tmp_path):
    exp = tmp_path / "cos"
    sets = ["--set", "train.anneal=cosine", "--set", "train.min_lr=0.0001"]
    assert train(data, exp, "--set", "train.epochs=2", *sets).exit_code == 0
    r = train(data, exp, "--set", "train.epochs=4", *sets, "--resume")
    assert r.exit_code == 0, r.output
    log = (exp / "train.log").read_text()
    assert "the cosine lr schedule is recomputed over" in log and "the lr goes from 0.0001 to" in log, log


def test_resume_cannot_shorten_a_run(data, two_epochs, tmp_path):
    exp = copy(two_epochs, tmp_path)
    before = tree(exp)
    err = one_error(train(data, exp, "--set", "train.epochs=1", "--set", "train.average_last=2", "--resume"))
    assert f"{exp}/config.yaml: --resume cannot shorten a run: train.epochs 2 -> 1" in err, err
    assert "(fix: resume with train.epochs=2 or more" in err
    assert tree(exp) == before


def test_a_private_run_cannot_be_extended(tmp_path):
    from asrtrain.config import Config, DPConfig, TrainConfig
    from asrtrain.errors import AsrError
    from asrtrain.train.job import check_extension

    cfg = Config(train=TrainConfig(epochs=4), dp=DPConfig(enabled=True, epsilon=8.0))
    with pytest.raises(AsrError, match=r"differentially private run cannot be extended .* over 2 epochs"):
        check_extension({"train": {"epochs": 2}}, cfg, tmp_path / "config.yaml")


def test_other_changes_are_still_refused_next_to_epochs(data, two_epochs, tmp_path):
    exp = copy(two_epochs, tmp_path)
    err = one_error(train(data, exp, "--set", "train.epochs=3", "--set", "train.average_last=2",
                          "--set", "train.lr=0.5", "--resume"))
    assert "--resume with a different config (train.lr)" in err, err


# -- #19: --restart starts the log over ------------------------------------------------------------------

def test_restart_removes_the_earlier_runs_outputs_and_names_what_is_left(data, two_epochs, tmp_path,
                                                                         caplog):
    exp = copy(two_epochs, tmp_path)
    (exp / "avg2.pt").write_bytes(b"x")
    r = train(data, exp, "--set", "train.epochs=1", "--restart")
    assert r.exit_code == 0, r.output
    assert "--restart: left in place, made with the earlier run's model: avg2.pt" in caplog.text
    log = (exp / "train.log").read_text()
    assert log.count("epoch 1:") == 1 and "epoch 2:" not in log, log
    assert sorted(p.name for p in (exp / "checkpoints").glob("epoch-*.pt")) == ["epoch-0001.rank0.pt"]
    assert (exp / "avg2.pt").read_bytes() == b"x"


# -- #4: --dev-data with other features ------------------------------------------------------------------

def test_dev_data_with_other_features_is_refused(data, tmp_path):
    dev40 = make_feat_dir(tmp_path / "dev40", 6, dim=20, seed=1)
    err = one_error(train(data, tmp_path / "exp", "--set", "train.epochs=1", dev=dev40))
    assert f"{dev40}/features.yaml: --dev-data features differ from --train-data's (num_mel_bins: 20 vs 13)" \
        in err, err
    assert f"(fix: recompute them with asrtrain features --conf {data[0]}/features.yaml)" in err
    assert not (tmp_path / "exp" / "checkpoints").exists()
    # any feature option counts, not only the dimension
    dev_dither = Path(shutil.copytree(data[1], tmp_path / "dev_dither"))
    conf = yaml.safe_load((dev_dither / "features.yaml").read_text())
    conf["dither"] = 1.0
    (dev_dither / "features.yaml").write_text(yaml.safe_dump(conf))
    err = one_error(train(data, tmp_path / "exp", "--set", "train.epochs=1", dev=dev_dither))
    assert "(dither: 1.0 vs 0.0)" in err, err


# -- #3: average leaves final.pt alone -------------------------------------------------------------------

def test_average_defaults_to_the_runs_average_last_and_a_new_file(two_epochs, tmp_path):
    exp = copy(two_epochs, tmp_path)
    final = sha(exp / "final.pt")
    r = run("average", exp)
    assert r.exit_code == 0, r.output
    assert r.stdout.strip() == str(exp / "avg2.pt")
    assert sha(exp / "final.pt") == final
    assert model(exp / "avg2.pt")["averaged"] == 2
    assert model(exp / "avg2.pt")["epochs"] == 2 == model(exp / "final.pt")["epochs"]  # pack's card reads them
    a, b = model(exp / "avg2.pt")["model"], model(exp / "final.pt")["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)  # the same average train made
    # run again: the file is there, and is not replaced without --force
    before = sha(exp / "avg2.pt")
    err = one_error(run("average", exp))
    assert f"{exp}/avg2.pt: exists already" in err and "(fix: add --force" in err, err
    err = one_error(run("average", exp, "--last", "1", "--out", exp / "final.pt"))
    assert "final.pt: exists already" in err
    assert sha(exp / "final.pt") == final
    r = run("average", exp, "--last", "1", "--out", exp / "avg2.pt", "--force")
    assert r.exit_code == 0, r.output
    assert sha(exp / "avg2.pt") != before and model(exp / "avg2.pt")["averaged"] == 1


def test_average_of_more_checkpoints_than_there_are(two_epochs, tmp_path, caplog):
    exp = copy(two_epochs, tmp_path)
    err = one_error(run("average", exp, "--last", "5"))
    assert "--last 5: only 2 epoch checkpoint(s)" in err and "(epoch-0001 .. epoch-0002)" in err, err
    assert "(fix: use --last 2 or less)" in err
    assert not (exp / "avg5.pt").exists() and not (exp / "avg2.pt").exists()
    # the run's own train.average_last above the count: as train does, average what there is, and say so
    conf = yaml.safe_load((exp / "config.yaml").read_text())
    conf["train"]["average_last"] = 5
    (exp / "config.yaml").write_text(yaml.safe_dump(conf))
    r = run("average", exp)
    assert r.exit_code == 0, r.output
    assert "train.average_last is 5 but only 2 epoch checkpoint(s) exist: averaging 2" in caplog.text
    assert r.stdout.strip() == str(exp / "avg2.pt")


def test_average_device_error_names_the_option(two_epochs):
    err = one_error(run("average", two_epochs, "--device", "gpu"))
    assert "--device = 'gpu' is not one of auto, cpu, cuda, cuda:N" in err and "train.device" not in err


def test_train_help_types_alignments_as_a_path():
    out = " ".join(run("train", "--help").output.split())
    assert "--alignments PATH" in out
    assert "--resume Continue from the exp dir's latest checkpoint (a finished" in out


def test_restart_after_a_run_that_left_only_a_log(tmp_path):
    """A first run that died before its first checkpoint left train.log: --restart starts that over too."""
    from asrtrain.train.job import remove_run_outputs

    exp = tmp_path / "exp"
    (exp / "tensorboard" / "rank0").mkdir(parents=True)
    (exp / "train.log").write_text("old run\n")
    (exp / "config.yaml").write_text("train: {}\n")
    remove_run_outputs(exp)
    assert sorted(p.name for p in exp.iterdir()) == ["config.yaml"]
    remove_run_outputs(tmp_path / "nothing-here")  # no earlier run: nothing to do


# -- config.yaml's tokenizer section is the tokenizer used; a resume must use the same file -------------

def test_config_yaml_records_the_tokenizer_used(data, two_epochs):
    from asrtrain.text.tokenizer import Tokenizer
    kept = yaml.safe_load((two_epochs / "config.yaml").read_text())["tokenizer"]
    size = Tokenizer(data[2]).vocab_size
    # the task's tokenizer is a word model; the config's default (unigram, 300) must not be what is kept
    assert kept == {"model_type": "word", "vocab_size": size, "character_coverage": 1.0}, kept
    assert yaml.safe_load((two_epochs / "config.yaml").read_text())["model"]["num_targets"] == size


def test_resume_with_another_tokenizer_is_refused(data, two_epochs, tmp_path):
    """Same size (so model.num_targets agrees), other pieces: only the file comparison can catch it."""
    from asrtrain.text.tokenizer import Tokenizer
    exp = copy(two_epochs, tmp_path)
    words = [f"w{chr(97 + i)}{chr(97 + j)}" for i in range(8) for j in range(8)]
    (tmp_path / "text").write_text("".join(f"u{k:03d} {' '.join(words[k:k + 6])}\n" for k in range(58)))
    size = Tokenizer(data[2]).vocab_size
    r = run("tokenizer", "train", "--text", tmp_path / "text", "--out", tmp_path / "tok2", "--model-type", "word",
            "--vocab-size", str(size))
    assert r.exit_code == 0, r.output
    other = tmp_path / "tok2" / "tokenizer.model"
    assert Tokenizer(other).vocab_size == size
    before = tree(exp)
    tr, dv, _ = data
    args = ["train", "--train-data", tr, "--dev-data", dv, "--tokenizer", other, "--exp-dir", exp, "--resume"]
    for s in SMALL + ["train.epochs=3", "train.average_last=2"]:
        args += ["--set", s]
    err = one_error(run(*args))
    assert "--resume with a different --tokenizer" in err and "(fix: resume with --tokenizer " in err, err
    assert tree(exp) == before


def test_resume_with_other_data_is_refused_before_data_json_is_rewritten(data, two_epochs, tmp_path):
    """A step checkpoint's (epoch, batch) position indexes the run's own batches: on other data the run
    would go on from a place that is not there, and data.json would name data it was not trained on."""
    exp = copy(two_epochs, tmp_path)
    tr, dv, _ = data
    other = make_feat_dir(tmp_path / "train30", 30, seed=2)
    before = tree(exp)
    err = one_error(train(data, exp, "--set", "train.epochs=3", "--set", "train.average_last=2", "--resume",
                          train_dir=other))
    assert f"{exp}/data.json: --resume with a different --train-data: {other.resolve()} (30 utterances, " in err, err
    assert f"the run started on {Path(tr).resolve()} (24 utterances, " in err, err
    assert f"(fix: resume with --train-data {Path(tr).resolve()}, or start over with --restart)" in err, err
    assert tree(exp) == before  # data.json, config.yaml, checkpoints: untouched
    # the dev dir too, and a dev dir added or dropped on resume
    err = one_error(train(data, exp, "--set", "train.epochs=3", "--set", "train.average_last=2", "--resume",
                          dev=other))
    assert f"--resume with a different --dev-data: {other.resolve()} (30 utterances" in err, err
    assert f"the run started on {Path(dv).resolve()} (6 utterances" in err, err
    err = one_error(train(data, exp, "--set", "train.epochs=3", "--set", "train.average_last=2", "--resume",
                          dev=False))
    assert f"--resume without --dev-data, but the run started with {Path(dv).resolve()}" in err, err
    assert tree(exp) == before


def test_resume_with_the_same_data_spelled_relative_goes_on(data, two_epochs, tmp_path, monkeypatch):
    exp = copy(two_epochs, tmp_path)
    tr, dv, _ = data
    recorded = (exp / "data.json").read_text()
    monkeypatch.chdir(Path(tr).parent)
    r = train(data, exp, "--set", "train.epochs=3", "--set", "train.average_last=2", "--resume",
              train_dir=Path(Path(tr).name), dev=Path(os.path.relpath(dv, Path(tr).parent)))
    assert r.exit_code == 0, r.output
    assert (exp / "data.json").read_text() == recorded  # the same resolved paths and counts
    assert "epoch 3:" in (exp / "train.log").read_text()


def test_a_data_dir_changed_in_place_is_refused_a_moved_one_taken_and_an_old_exp_dir_warned_of(tmp_path, caplog):
    from asrtrain.errors import AsrError
    from asrtrain.train.data_record import check_same_data, write_data_record

    train_dir = make_feat_dir(tmp_path / "train", 8)
    exp = tmp_path / "exp"
    exp.mkdir()
    check_same_data(exp, train_dir, None, 10.0)  # before data.json existed: cannot be checked, said so
    assert "has no data.json (the run predates it), so --train-data/--dev-data cannot be checked" in caplog.text
    write_data_record(exp, train_dir, None, 10.0)
    check_same_data(exp, train_dir, None, 10.0)
    # a copy elsewhere (another disk, another node) is the run's data: taken, with a warning
    elsewhere = Path(shutil.copytree(train_dir, tmp_path / "scratch" / "train"))
    check_same_data(exp, elsewhere, None, 10.0)
    assert f"--train-data {elsewhere} is taken for the run's {train_dir} (moved: the same name" in caplog.text
    renamed = Path(shutil.copytree(train_dir, tmp_path / "train_noisy"))  # same lengths, other data
    with pytest.raises(AsrError, match=r"--resume with a different --train-data: .*train_noisy \(8 utt"):
        check_same_data(exp, renamed, None, 10.0)
    lines = (train_dir / "feats.scp").read_text().splitlines()
    (train_dir / "feats.scp").write_text("\n".join(lines[:6]) + "\n")
    with pytest.raises(AsrError, match=r"--resume with --train-data changed since the run started: .* \(6 "
                                       r"utterances, .*; the run started on .* \(8 utterances.*fix: restore "):
        check_same_data(exp, train_dir, None, 10.0)
    with pytest.raises(AsrError, match=r"--resume with --dev-data .* \(6 utterances.*, but the run started "
                                       r"without one \(fix: resume without --dev-data"):
        write_data_record(exp, train_dir, None, 10.0)
        check_same_data(exp, train_dir, train_dir, 10.0)


def test_resume_of_a_run_whose_config_kept_the_default_tokenizer_section(data, two_epochs, tmp_path):
    """An older asrtrain wrote the config's tokenizer defaults into config.yaml: its runs still resume."""
    exp = copy(two_epochs, tmp_path)
    conf = yaml.safe_load((exp / "config.yaml").read_text())
    conf["tokenizer"] = {"model_type": "unigram", "vocab_size": 300, "character_coverage": 1.0}
    (exp / "config.yaml").write_text(yaml.safe_dump(conf))
    r = train(data, exp, "--set", "train.epochs=3", "--set", "train.average_last=2", "--resume")
    assert r.exit_code == 0, r.output
    assert yaml.safe_load((exp / "config.yaml").read_text())["tokenizer"]["model_type"] == "word"


def test_print_config_is_what_config_yaml_holds_and_writes_nothing(data, two_epochs, tmp_path):
    tr, dv, tok = data
    args = ["train", "--train-data", tr, "--dev-data", dv, "--tokenizer", tok, "--print-config"]
    for s in SMALL + ["train.epochs=2", "train.average_last=2"]:
        args += ["--set", s]
    before = {p for p in tmp_path.parent.rglob("*")}
    r = run(*args)
    assert r.exit_code == 0, r.output
    assert yaml.safe_load(r.stdout) == yaml.safe_load((two_epochs / "config.yaml").read_text())
    last = r.stdout.rstrip().splitlines()[-1]
    params = sum(v.numel() for v in model(two_epochs / "final.pt")["model"].values())
    assert last == f"# model: {params:,} parameters", last
    assert {p for p in tmp_path.parent.rglob("*")} == before


def test_exp_dir_is_required_without_print_config(data):
    tr, dv, tok = data
    r = run("train", "--train-data", tr, "--tokenizer", tok)
    assert r.exit_code == 2 and "Missing option '--exp-dir'" in r.output, r.output


def test_a_stray_file_named_like_an_epoch_checkpoint_is_left_out_with_a_warning(two_epochs, tmp_path, caplog):
    """A user's copy checkpoints/epoch-best.rank0.pt matched the glob but not epoch-NNNN: an IndexError
    traceback from average (and anything else listing the epoch checkpoints)."""
    exp = copy(two_epochs, tmp_path)
    shutil.copy(exp / "checkpoints" / "epoch-0002.rank0.pt", exp / "checkpoints" / "epoch-best.rank0.pt")
    r = run("average", exp, "--last", "2")
    assert r.exit_code == 0, r.output
    assert model(exp / "avg2.pt")["epochs"] == 2
    assert "not epoch-NNNN.rank0.pt are not used, e.g. epoch-best.rank0.pt" in caplog.text

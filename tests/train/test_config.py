import pytest
from click.testing import CliRunner

from asrtrain.cli import cli
from asrtrain.config import Config
from asrtrain.config.file import load_config
from asrtrain.config.yamlio import parse_override
from asrtrain.errors import AsrError


def test_defaults_and_overrides(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("train:\n  lr: 0.01\nmodel:\n  hidden: 64\n")
    cfg = load_config(p, ["train.epochs=3", "dist.delay_by_one=true"])
    assert cfg.train.lr == 0.01 and cfg.model.hidden == 64 and cfg.train.epochs == 3
    assert cfg.dist.delay_by_one is True and cfg.model.num_layers == Config().model.num_layers


def test_unknown_key_names_file_and_line(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("train:\n  lr: 0.01\n  lrr: 3\n")
    with pytest.raises(AsrError) as e:
        load_config(p)
    assert f"{p}:3" in str(e.value) and "train.lrr" in str(e.value)


def test_wrong_type_and_bad_choice(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("train:\n  epochs: many\n")
    with pytest.raises(AsrError, match=r"c.yaml:2: train.epochs must be int"):
        load_config(p)
    p.write_text("model:\n  loss: mse\n")
    with pytest.raises(AsrError, match=r"c.yaml:2: model.loss = 'mse'"):
        load_config(p)
    with pytest.raises(AsrError, match="unknown config key 'train.nope'"):
        load_config(None, ["train.nope=1"])
    with pytest.raises(AsrError, match="section.key=value"):
        parse_override("train.lr")


def test_extra_config_merges_on_top(tmp_path):
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text("dist:\n  strategy: ssgd\n  learners: 2\n")
    b.write_text("dist:\n  strategy: adpsgd\n")
    cfg = load_config(a, extra=[b])
    assert cfg.dist.strategy == "adpsgd" and cfg.dist.learners == 2


def test_bad_yaml_key_on_cli_is_one_line(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("train:\n  bogus: 1\n")
    r = CliRunner().invoke(cli, ["train", "--config", str(p), "--train-data", str(tmp_path),
                                 "--exp-dir", str(tmp_path / "exp")])
    assert r.exit_code == 1
    err = r.output.strip().splitlines()
    assert len(err) == 1 and "c.yaml:2" in err[0] and "Traceback" not in r.output


def test_string_override_is_not_read_as_a_yaml_number():
    assert load_config(None, ["dist.slowdown=1:4"]).dist.slowdown == "1:4"
    assert load_config(None, ["dist.slowdown='1:4'"]).dist.slowdown == "1:4"
    assert load_config(None, ["train.lr=2e-3"]).train.lr == 0.002


def test_a_learning_rate_below_its_floor_is_refused(tmp_path):
    """train.lr under train.min_lr warmed up to lr, then jumped above its own peak to min_lr."""
    with pytest.raises(AsrError, match=r"train.min_lr = 1e-05 is above train.lr = 0: after warm-up") as err:
        load_config(None, ["train.lr=0"])
    assert "train.min_lr <= train.lr" in str(err.value)
    assert load_config(None, ["train.lr=0", "train.min_lr=0"]).train.lr == 0
    with pytest.raises(AsrError, match=r"train.lr = inf must be a finite number >= 0"):
        load_config(None, ["train.lr=inf"])


def test_dist_period_takes_a_yaml_integer(tmp_path):
    """--period 4 on the command line, `period: 4` in YAML (it had to be quoted: "must be str, got 4")."""
    p = tmp_path / "p.yaml"
    p.write_text("dist:\n  strategy: periodic\n  period: 4\n")
    assert load_config(p).dist.period == "4"
    p.write_text("dist:\n  period: true\n")
    with pytest.raises(AsrError, match="dist.period must be str"):
        load_config(p)

"""``features --set`` takes the spelling ``train --set`` uses (``features.KEY=VALUE``) as well as bare keys,
and its hints name examples that are valid for it."""

import re

import yaml

from tests.helpers.cli_helpers import one_error, run
from tests.helpers.sphere_fixture import make_data_dir


def test_features_set_takes_the_section_prefix_and_bare_keys(tmp_path):
    data = make_data_dir(tmp_path, n_utts=2, speakers=1)
    r = run("features", data, tmp_path / "f", "--set", "features.num_mel_bins=23", "--set", "dither=0.0",
            "--set", "features.cmvn=none")
    assert r.exit_code == 0, r.output
    conf = yaml.safe_load((tmp_path / "f" / "features.yaml").read_text())
    assert conf["num_mel_bins"] == 23 and conf["cmvn"] == "none"
    assert (tmp_path / "f" / "feat_dim").read_text().strip() == "23"


def test_features_set_hints_fit_the_command(tmp_path):
    data = make_data_dir(tmp_path, n_utts=1, speakers=1)
    err = one_error(run("features", data, tmp_path / "f", "--set", "num_mel_bins"))
    assert "'num_mel_bins' is not of the form features.key=value" in err, err
    assert err.endswith("(fix: write e.g. --set features.sample_rate=16000)")
    err = one_error(run("features", data, tmp_path / "f", "--set", "train.lr=0.2"))
    assert "only the features keys can be set here" in err, err
    # the fix of a rate mismatch is itself a valid --set for features
    err = one_error(run("features", data, tmp_path / "f", "--set", "features.sample_rate=8000"))
    assert "(fix: set features.sample_rate=16000, or set features.resample=true)" in err, err
    assert run("features", data, tmp_path / "f", "--set", "features.sample_rate=16000").exit_code == 0


def test_type_errors_use_the_right_article(tmp_path):
    data = make_data_dir(tmp_path, n_utts=1, speakers=1)
    err = one_error(run("features", data, tmp_path / "f", "--set", "features.num_mel_bins=many"))
    assert "(fix: give num_mel_bins an int value)" in err, err
    err = one_error(run("features", data, tmp_path / "f", "--set", "dither=x"))
    assert "(fix: give dither a float value)" in err, err


def test_help_lists_every_option_with_its_default_and_where_kaldi_differs():
    from dataclasses import fields

    from click.testing import CliRunner

    from asrtrain.cli import cli
    from asrtrain.config import FeatureConfig

    out = CliRunner().invoke(cli, ["features", "--help"]).output
    listed = re.findall(r"^    (\w+)=", out, flags=re.M)
    assert listed == [f.name for f in fields(FeatureConfig)]
    assert "    num_mel_bins=80  (Kaldi: 23)" in out and "    dither=0.0  (Kaldi: 1.0;" in out
    assert "    frame_shift=10.0\n" in out  # Kaldi's default: no note

"""``train`` refuses settings it would ignore, and accepts those that agree with the data."""

from dataclasses import replace
from pathlib import Path

import pytest

from asrtrain.config import Config, FeatureConfig
from asrtrain.config.file import load_section
from asrtrain.config.check import check_train_settings
from asrtrain.errors import AsrError

SWBD = Path(__file__).parents[2] / "recipes" / "swbd" / "conf"


def test_agreeing_settings_pass_and_disagreeing_ones_name_the_key(tmp_path):
    cfg = replace(Config(), features=FeatureConfig(num_mel_bins=40, sample_rate=8000))
    check_train_settings(None, ["features.num_mel_bins=40", "features.sample_rate=8000", "train.lr=0.1",
                                "decode.beam_size=4"], [], cfg, tmp_path)
    with pytest.raises(AsrError, match=r"--set features.num_mel_bins=80 is ignored.*= 40"):
        check_train_settings(None, ["features.num_mel_bins=80"], [], cfg, tmp_path)  # 80 is the default
    conf = tmp_path / "c.yaml"
    conf.write_text("train:\n  lr: 0.1\nfeatures:\n  cmvn: speaker\n")
    with pytest.raises(AsrError) as err:
        check_train_settings(conf, [], [], cfg, tmp_path)
    assert f"{conf}:4: features.cmvn: speaker is ignored" in str(err.value)


@pytest.mark.parametrize("name", ["train_blstm2x128.yaml", "train_blstm4x320.yaml", "train_blstm6x512.yaml"])
def test_swbd_train_configs_agree_with_the_swbd_features(name, tmp_path):
    feats = load_section(FeatureConfig, SWBD / "fbank.yaml")
    check_train_settings(SWBD / name, [], [], replace(Config(), features=feats), tmp_path)

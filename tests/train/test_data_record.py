"""EXP/data.json: the training data's name, utterances and hours, as training records them."""

import pytest

from asrtrain.errors import AsrError
from asrtrain.train.data_record import describe_feature_dir, read_data_record, write_data_record


def test_a_feature_dir_is_described_from_its_tables_and_read_back(tmp_path):
    train = tmp_path / "train_sp"
    train.mkdir()
    (train / "feats.scp").write_text("a x.ark:1\nb x.ark:2\nc x.ark:3\n")
    (train / "utt2num_frames").write_text("a 100\nb 200\nc 60\n")
    dev = tmp_path / "dev"
    dev.mkdir()
    (dev / "feats.scp").write_text("d x.ark:4\n")  # no utt2num_frames: frames and hours unknown
    assert describe_feature_dir(train, 10.0) == {"name": "train_sp", "path": str(train.resolve()),
                                                "utterances": 3, "frames": 360, "hours": 0.001}
    (tmp_path / "exp").mkdir()
    write_data_record(tmp_path / "exp", train, dev, 10.0)
    record = read_data_record(tmp_path / "exp")
    assert record["train"]["frames"] == 360 and record["dev"] == {"name": "dev", "path": str(dev.resolve()),
                                                                 "utterances": 1, "frames": None, "hours": None}
    assert read_data_record(tmp_path) is None  # an exp dir from before data.json
    (tmp_path / "data.json").write_text("{not json")
    with pytest.raises(AsrError, match="not readable json"):
        read_data_record(tmp_path)

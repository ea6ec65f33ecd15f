"""An exp dir whose config.yaml was edited is refused by what loads its model (issue 57): every model file
training writes holds the model and features sections it was trained with (asrtrain/model/stamp.py), and
decode, transcribe, average and --resume compare them with config.yaml, naming the key. Model files
written before the entry existed are still loaded, checked by their shapes only."""

import pytest
import yaml

from tests.helpers.cli_helpers import one_error, run
from tests.helpers.corpus_world import UTTS, check_case, materialize

FIX = "fix: restore config.yaml, or pass --checkpoint of a model trained with it"


def edit(section: str, key: str, value, **more):
    """config.yaml with ``section.key`` (and ``more`` keys of the section) set, as a user would edit it."""
    def apply(path):
        cfg = yaml.safe_load(path.read_text())
        cfg[section].update({key: value, **more})
        return yaml.safe_dump(cfg, sort_keys=False)
    return apply


def without_stamp(path):
    """A model file as asrtrain wrote it before it saved its config (the entry removed, checksum
    rewritten)."""
    from asrtrain.model.files import load_checked, save_checked

    payload = load_checked(path)
    payload.pop("config")
    save_checked(payload, path)


def trained(world, section, key):
    return yaml.safe_load((world["exp"] / "config.yaml").read_text())[section][key]


EDITS = [("model", "subsample", 3), ("model", "stack", 4), ("model", "hidden", 16),
         ("model", "num_layers", 2), ("model", "proj", 4), ("model", "num_targets", 7), ("features", "num_mel_bins", 20),
         ("features", "cmvn", "none")]
D = "decode {exp} {feats} {tmp}/dec"


@pytest.mark.parametrize("section,key,value", EDITS, ids=[f"{s}.{k}" for s, k, _ in EDITS])
def test_decode_refuses_an_edited_config(world, tmp_path, section, key, value):
    files = {"exp/config.yaml": edit(section, key, value)}
    err = check_case(world, tmp_path, files, D,
                     ("{exp}/config.yaml:", f"{section}.{key} is {value!r} here but the model file final.pt "
                      f"was trained with {section}.{key} {trained(world, section, key)!r}", FIX))
    assert not (tmp_path / "dec").exists()
    if section == "model":  # the line of the key in config.yaml
        line = int(err.split("config.yaml:")[1].split(":")[0])
        text = (tmp_path / "exp" / "config.yaml").read_text().splitlines()[line - 1]
        assert text.strip().startswith(f"{key}:"), text


def test_decode_names_every_key_that_differs(world, tmp_path):
    """model.frontend conv needs model.stack 1: two keys differ, the first in config order is named."""
    check_case(world, tmp_path, {"exp/config.yaml": edit("model", "frontend", "conv", stack=1)}, D,
               ("model.stack is 1 here", "(and 1 more: model.frontend)", FIX))


def test_every_model_file_training_writes_holds_its_config(world, tmp_path):
    from asrtrain.model.files import load_with_payload

    want = yaml.safe_load((world["exp"] / "config.yaml").read_text())
    files = [world["exp"] / "final.pt", *sorted((world["exp"] / "checkpoints").glob("*.pt"))]
    r = run("average", world["exp"], "--last", "1", "--out", tmp_path / "avg.pt")
    assert r.exit_code == 0, r.output
    r = run("pack", world["exp"], tmp_path / "pack")
    assert r.exit_code == 0, r.output
    files += [tmp_path / "avg.pt", tmp_path / "pack" / "model.safetensors"]  # the pack's: in its metadata
    assert len(files) >= 4
    for f in files:
        stamp = load_with_payload(f)[1]["config"]
        assert stamp == {"model": want["model"], "features": want["features"]}, f


def test_transcribe_refuses_an_edited_config(world, tmp_path):
    dirs = materialize(world, tmp_path, {"exp/config.yaml": edit("model", "subsample", 3)}, "{exp} {data}")
    err = one_error(run("transcribe", dirs["exp"], dirs["audio"] / f"{UTTS[0]}.wav"))
    assert "config.yaml:" in err and "model.subsample is 3 here" in err and FIX in err, err


def test_average_refuses_an_edited_config(world, tmp_path):
    dirs = materialize(world, tmp_path, {"exp/config.yaml": edit("model", "subsample", 3)}, "{exp}")
    err = one_error(run("average", dirs["exp"], "--last", "1", "--out", tmp_path / "avg.pt"))
    assert "config.yaml:" in err and "model.subsample is 3 here" in err and "epoch-0001.rank0.pt" in err, err
    assert not (tmp_path / "avg.pt").exists()


def test_average_refuses_checkpoints_trained_under_different_configs(world, tmp_path):
    from asrtrain.model.files import load_checked, save_checked

    dirs = materialize(world, tmp_path, {}, "{exp}")
    ckpts = dirs["exp"] / "checkpoints"
    payload = load_checked(ckpts / "epoch-0001.rank0.pt")
    payload["config"]["model"]["subsample"] = 5
    save_checked(payload, ckpts / "epoch-0002.rank0.pt")
    err = one_error(run("average", dirs["exp"], "--last", "2", "--out", tmp_path / "avg.pt"))
    assert "epoch-0001.rank0.pt and epoch-0002.rank0.pt were trained under different configs" in err, err
    assert "model.subsample 2 in the first, 5 in the second" in err, err


def test_a_training_only_key_may_change(world, tmp_path):
    """dropout is not part of what the trained model computes: decoding under another value is fine."""
    dirs = materialize(world, tmp_path, {"exp/config.yaml": edit("model", "dropout", 0.5)}, "{exp}")
    r = run("decode", dirs["exp"], world["feats"], tmp_path / "dec")
    assert r.exit_code == 0, r.output


def test_a_model_file_without_its_config_still_decodes(world, tmp_path):
    dirs = materialize(world, tmp_path, {"exp/final.pt": without_stamp}, "{exp}")
    r = run("decode", dirs["exp"], world["feats"], tmp_path / "dec")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "dec" / "text").is_file()


def test_a_model_file_without_its_config_is_still_shape_checked(world, tmp_path):
    files = {"exp/final.pt": without_stamp, "exp/config.yaml": edit("model", "hidden", 16)}
    check_case(world, tmp_path, files, D,
               ("{exp}/final.pt: the model file does not fit the exp dir's config",))


def test_a_malformed_saved_config_is_refused(world, tmp_path):
    from asrtrain.model.files import load_checked, save_checked

    def damage(path):
        payload = load_checked(path)
        payload["config"] = "subsample: 2"
        save_checked(payload, path)

    check_case(world, tmp_path, {"exp/final.pt": damage}, D,
               "{exp}/final.pt: the model file's saved config ('config' entry) is not a mapping")


def test_resume_refuses_a_config_edited_to_match_the_new_options(world, tmp_path):
    """config.yaml edited to subsample 3 and the resume asking for 3: the options agree with the file, but
    the checkpoint was trained with 2, and the learner says so before a step."""
    dirs = materialize(world, tmp_path, {"exp/config.yaml": edit("model", "subsample", 3)}, "{exp} {feats}")
    err = one_error(run("train", "--train-data", dirs["feats"],
                        "--tokenizer", dirs["exp"] / "tokenizer.model", "--exp-dir", dirs["exp"], "--resume",
                        "--config", dirs["exp"] / "config.yaml", "--set", "train.epochs=2"))
    assert "config.yaml" in err and "model.subsample is 3 here" in err and "epoch-0001.rank0.pt" in err, err


def test_a_pack_with_an_edited_config_is_refused(world, tmp_path):
    r = run("pack", world["exp"], tmp_path / "pack")
    assert r.exit_code == 0, r.output
    cfg = tmp_path / "pack" / "config.yaml"
    cfg.write_text(cfg.read_text().replace("subsample: 2", "subsample: 3"))
    from asrtrain.decode.run import load_model
    from asrtrain.errors import AsrError
    with pytest.raises(AsrError, match="model.subsample is 3 here but the model file model.safetensors"):
        load_model(tmp_path / "pack")

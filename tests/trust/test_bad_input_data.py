"""Bad input to the config, data, features, lm, tokenizer, simulate and topology commands: one line
``asrtrain: error: ...`` naming the file (and line) and the fix, exit 1, no traceback; and no lost data
(a refused command leaves its input byte-for-byte as it was)."""

import logging
import shutil
from pathlib import Path

import pytest

from tests.helpers.cli_helpers import one_error, run
from tests.helpers.sphere_fixture import make_data_dir

NOWHERE = ["--train-data", "/nonexistent/feats", "--tokenizer", "/nonexistent/tokenizer.model"]


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """A tiny valid data dir (4 utterances, 2 speakers, audio) to copy."""
    return make_data_dir(tmp_path_factory.mktemp("clean"), n_utts=4, speakers=2)


@pytest.fixture
def data(clean, tmp_path):
    return Path(shutil.copytree(clean, tmp_path / "data"))


def snapshot(d: Path):
    return {p.relative_to(d): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


# -- c17, c28: train / model / decode settings are range-checked and named ------------------------------
@pytest.mark.parametrize("setting,fragment", [
    ("train.min_lr=-1", "train.min_lr = -1.0 must be >= 0"),
    ("train.anneal_factor=-1", "train.anneal_factor = -1.0 must be > 0 and <= 1"),
    ("train.anneal_factor=1e300", "train.anneal_factor = 1e+300 must be > 0 and <= 1"),
    ("train.max_utts=0", "train.max_utts = 0 must be >= 1"),
    ("train.threads=-1", "train.threads = -1 must be >= 0"),
    ("train.warmup_steps=-5", "train.warmup_steps = -5 must be >= 0"),
    ("train.grad_clip=-1", "train.grad_clip = -1.0 must be >= 0"),
    ("train.momentum=-1", "train.momentum = -1.0 must be >= 0 and < 1"),
    ("train.momentum=1", "train.momentum = 1.0 must be >= 0 and < 1"),
    ("train.lr=-1", "train.lr = -1.0 must be >= 0"),
    ("train.weight_decay=-1", "train.weight_decay = -1.0 must be >= 0"),
    ("train.log_every_steps=0", "train.log_every_steps = 0 must be >= 1"),
    ("model.dropout=1.5", "model.dropout = 1.5 must be >= 0 and < 1"),
    ("model.proj=-1", "model.proj = -1 must be >= 0"),
    ("decode.lm_weight=.inf", "decode.lm_weight = inf must be a finite number"),
    ("decode.word_bonus=-.inf", "decode.word_bonus = -inf must be a finite number"),
])
def test_train_setting_out_of_range(tmp_path, setting, fragment):
    err = one_error(run("train", *NOWHERE, "--exp-dir", tmp_path / "e", "--set", setting))
    assert fragment in err, err
    assert "fix:" in err
    assert not (tmp_path / "e").exists()


def test_train_setting_out_of_range_names_yaml_line(tmp_path):
    conf = tmp_path / "c.yaml"
    conf.write_text("train:\n  lr: 0.1\n  anneal_factor: 2\nmodel:\n  dropout: 0.1\n")
    err = one_error(run("train", "--config", conf, *NOWHERE, "--exp-dir", tmp_path / "e"))
    assert f"{conf}:3: train.anneal_factor = 2.0 must be > 0 and <= 1" in err, err


# -- c01: frame_shift under one sample; an absurd frame_length is named ----------------------------------
def test_features_frame_shift_below_one_sample(tmp_path):
    err = one_error(run("features", tmp_path / "data", tmp_path / "f", "--set", "frame_shift=0.05"))
    assert "features.frame_shift = 0.05 ms is shorter than one sample at 16000 Hz" in err, err


def test_features_huge_frame_length_blames_the_setting(data, tmp_path):
    err = one_error(run("features", data, tmp_path / "f", "--set", "frame_length=100000"))
    assert "shorter than one frame" in err and "features.frame_length = 100000 ms" in err, err
    assert "lower it" in err


# -- c03, c26: utt2dur and spk2gender values ------------------------------------------------------------
@pytest.mark.parametrize("value", ["abc", "-3", "nan", "0", "1.0 2.0"])
def test_validate_refuses_bad_utt2dur(data, value):
    utts = (data / "utt2spk").read_text().split("\n")
    (data / "utt2dur").write_text(f"{utts[0].split()[0]} 0.5\n{utts[1].split()[0]} {value}\n")
    err = one_error(run("data", "validate", data))
    assert f"{data / 'utt2dur'}:2: duration" in err and "not a positive number of seconds" in err, err


def test_perturb_speed_names_bad_utt2dur_line(data, tmp_path):
    first = (data / "utt2spk").read_text().split()[0]
    (data / "utt2dur").write_text(f"{first} abc\n")
    err = one_error(run("data", "perturb-speed", data, tmp_path / "sp"))
    assert f"{data / 'utt2dur'}:1: duration 'abc'" in err, err
    assert not (tmp_path / "sp").exists()


def test_validate_refuses_bad_spk2gender(data):
    speakers = sorted({line.split()[1] for line in (data / "utt2spk").read_text().splitlines()})
    (data / "spk2gender").write_text(f"{speakers[0]} m\n{speakers[1]} x\n")
    err = one_error(run("data", "validate", data))
    assert f"{data / 'spk2gender'}:2: gender 'x'" in err and "not m or f" in err, err


def test_validate_accepts_good_utt2dur_and_spk2gender(data):
    utts = [line.split()[0] for line in (data / "utt2spk").read_text().splitlines()]
    (data / "utt2dur").write_text("".join(f"{u} 0.6\n" for u in utts))
    (data / "spk2gender").write_text("spk0 f\nspk1 m\n")
    res = run("data", "validate", data)
    assert res.exit_code == 0, res.output


# -- c13, c22: subset in place or to nothing --------------------------------------------------------------
def test_subset_refuses_out_equal_to_data(data):
    before = snapshot(data)
    err = one_error(run("data", "subset", data, data / ".." / "data", "--first", "2"))
    assert "OUT_DIR must differ from DATA_DIR" in err, err
    assert snapshot(data) == before


@pytest.mark.parametrize("selector", ["first", "last", "utt-list", "spk-list"])
def test_subset_of_nothing_is_an_error(data, tmp_path, selector):
    value = "0"
    if selector in ("utt-list", "spk-list"):
        value = tmp_path / "list"
        value.write_text("" if selector == "utt-list" else "nosuchspeaker\n")
    err = one_error(run("data", "subset", data, tmp_path / "out", f"--{selector}", value))
    assert "selects none of the 4 utterances" in err, err
    assert not (tmp_path / "out").exists()


# -- c15, c22: fix keeps the first backup, and refuses to empty the dir -------------------------------
def test_fix_twice_keeps_the_original_backup(data):
    lines = (data / "utt2spk").read_text().splitlines(keepends=True)
    original = snapshot(data)
    (data / "utt2spk").write_text("".join(lines[:2]))  # drops two utterances
    damaged = snapshot(data)
    assert run("data", "fix", data).exit_code == 0
    (data / "utt2spk").write_text(lines[0])  # damaged again: the second fix has work to do
    res = run("data", "fix", data)
    assert res.exit_code == 0, res.output
    assert ".backup.1" in res.output
    backup = snapshot(data / ".backup")
    assert all(backup[name] == damaged[name] for name in backup), "the first backup was overwritten"
    assert backup[Path("text")] == original[Path("text")]
    assert (data / ".backup.1" / "text").read_text().count("\n") == 2


@pytest.mark.parametrize("name", ["text", "utt2spk", "wav.scp"])
def test_validate_refuses_crlf_and_fix_rewrites_it(data, name):
    """Our readers drop a CR before the newline, Kaldi's keep it in the last field: validate names the
    file and line; data fix rewrites the files with LF and keeps every utterance."""
    lines = (data / name).read_text().splitlines()
    (data / name).write_text("\n".join(lines[:2]) + "\n" + "\r\n".join(lines[2:]) + "\r\n")
    err = one_error(run("data", "validate", data))
    assert f"{name}:3: CRLF line ending" in err and "data fix" in err, err
    res = run("data", "fix", data)
    assert res.exit_code == 0, res.output
    assert b"\r" not in (data / name).read_bytes()
    assert run("data", "validate", data).exit_code == 0
    assert len((data / "utt2spk").read_text().splitlines()) == len(lines) if name == "utt2spk" else True


def test_validate_refuses_utt2spk_not_sorted_by_speaker(data):
    """validate_data_dir.sh's sort -k2 check: speakers A and B alternate over the sorted utterances."""
    utts = [line.split()[0] for line in (data / "utt2spk").read_text().splitlines()]
    spk = {u: "AB"[i % 2] for i, u in enumerate(utts)}
    (data / "utt2spk").write_text("".join(f"{u} {spk[u]}\n" for u in utts))
    (data / "spk2utt").write_text("".join(f"{s} {' '.join(u for u in utts if spk[u] == s)}\n" for s in "AB"))
    err = one_error(run("data", "validate", data, "--no-audio"))
    assert "utt2spk:3: utt2spk is not sorted by speaker as well" in err and "prefix" in err, err


def test_fix_that_drops_everything_leaves_dir_untouched(data):
    (data / "utt2spk").write_text("x spkx\n")
    before = snapshot(data)
    err = one_error(run("data", "fix", data))
    assert "fix would drop all" in err and "left as it was" in err, err
    assert snapshot(data) == before
    assert not (data / ".backup").exists()


# -- c24: sentence boundaries inside LM / tokenizer training text --------------------------------------
@pytest.mark.parametrize("command", [["lm", "train"], ["tokenizer", "train", "--model-type", "word"]])
def test_training_text_with_sentence_boundaries(tmp_path, command):
    text = tmp_path / "text"
    text.write_text("u1 a b\nu2 a </s> c\n")
    err = one_error(run(*command, "--text", text, "--out", tmp_path / "out"))
    assert f"{text}:2: " in err and "'</s>'" in err, err
    assert not (tmp_path / "out" / "lm.arpa").exists()


def test_lm_train_on_text_without_sentences_names_the_file(tmp_path):
    text = tmp_path / "text"
    text.write_text("\n\n")
    err = one_error(run("lm", "train", "--text", text, "--out", tmp_path / "out"))
    assert f"{text}: no sentences" in err, err
    err = one_error(run("lm", "train", "--text", text, "--out", tmp_path / "out", "--order", "0"))
    assert "--order must be 1 to 10, got 0" in err and str(text) not in err, err


def test_oov_penalty_grid_names_both_forms():
    from asrtrain.decode.tune import parse_oov_grid
    from asrtrain.errors import AsrError

    with pytest.raises(AsrError, match="'open' is neither 'closed' nor a number") as info:
        parse_oov_grid("open")
    assert "closed,-8,-5" in str(info.value)
    assert parse_oov_grid("closed,-8") == [None, -8.0]


# -- c25: unknown pieces, and a vocabulary smaller than asked -------------------------------------------
@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    root = tmp_path_factory.mktemp("tok")
    (root / "text").write_text("u1 one two three\nu2 two three four\nu3 one four\n")
    res = run("tokenizer", "train", "--text", root / "text", "--out", root, "--model-type", "word",
              "--vocab-size", "20")
    assert res.exit_code == 0, res.output
    return root / "tokenizer.model"


def test_tokenizer_decode_unknown_piece(tok, tmp_path):
    pieces = tmp_path / "pieces"
    pieces.write_text("u1 \u2581one\nu2 \u2581notapiece \u2581one\n")
    err = one_error(run("tokenizer", "decode", "--model", tok, pieces))
    assert f"{pieces}:2: piece '\u2581notapiece' is not in this tokenizer" in err, err


def test_tokenizer_decode_known_pieces(tok, tmp_path):
    pieces = tmp_path / "pieces"
    pieces.write_text("u1 \u2581one \u2581two\n")
    res = run("tokenizer", "decode", "--model", tok, pieces)
    assert res.exit_code == 0 and res.output.strip() == "u1 one two", res.output


def test_tokenizer_vocab_smaller_than_asked_warns(tmp_path, caplog):
    text = tmp_path / "text"
    text.write_text("u1 one two three\nu2 two three four\n")
    with caplog.at_level(logging.WARNING):
        res = run("tokenizer", "train", "--text", text, "--out", tmp_path / "t", "--vocab-size", "5000")
    assert res.exit_code == 0, res.output
    warned = caplog.text + res.stderr
    assert "asked for 5000 pieces" in warned and "got " in warned, warned


# -- c05, c06, c07, c10, c27: simulate and topology numbers ------------------------------------------------
@pytest.mark.parametrize("args,fragment", [
    (["--learners", "a"], "--learners: 'a' is not a learner count"),
    (["--learners", "0,2"], "--learners: '0' is not a learner count"),
    (["--learners", "1,-2"], "--learners: '-2'"),
    (["--learners", "100000"], "the simulation's time and memory grow"),
    (["--learners", "1,2", "--intra-gbps", "0", "--inter-gbit", "0"], "--intra-gbps 0.0 must be a positive"),
    (["--learners", "1,2", "--inter-gbit", "0"], "--inter-gbit 0.0 must be a positive"),
    (["--learners", "1,2", "--step-s", "nan"], "--step-s nan must be a positive finite number"),
    (["--learners", "1,2", "--epochs", "-3"], "--epochs -3 must be >= 1"),
    (["--learners", "1,2", "--spread", "-1"], "--spread -1.0 must be a non-negative"),
    (["--learners", "1,2", "--learners-per-node", "0"], "--learners-per-node 0 must be a positive"),
    (["--max-learners", "0"], "--max-learners 0 must be 1 .. "),
    (["--max-learners", "10000000"], "--max-learners 10000000 must be 1 .. "),
])
def test_simulate_bad_numbers(args, fragment):
    err = one_error(run("simulate", "--strategies", "ssgd", *args))
    assert fragment in err, err


def test_simulate_baseline_without_one_learner():
    args = ["simulate", "--strategies", "ssgd", "--step-s", "0.1", "--batches", "400"]
    with_one = run(*args, "--learners", "1,2")
    without = run(*args, "--learners", "2,4")
    assert with_one.exit_code == 0 and without.exit_code == 0, without.output
    def baseline(res):
        return [ln for ln in res.output.splitlines() if ln.startswith("# one learner")]
    assert baseline(with_one) and baseline(with_one) == baseline(without)


@pytest.mark.parametrize("args,fragment", [
    (["--learners", "100000", "--max", "4"], "--learners 100000 is above 256"),
    (["--learners", "4", "--max", "1000000"], "--max 1000000 is above 256"),
])
def test_topology_too_large(args, fragment):
    err = one_error(run("topology", *args))
    assert fragment in err and "O(N^4)" in err, err


def test_utt2num_frames_that_disagrees_with_the_ark_is_named(tmp_path):
    """Batching and the too-short check trust utt2num_frames; reading an utterance whose ark disagrees
    with it names the table instead of training on wrong lengths."""

    from tests.helpers.featfix import make_feat_dir
    from asrtrain.errors import AsrError
    from asrtrain.features.reader import FeatureReader

    feats = make_feat_dir(tmp_path / "f", 4)
    rows = (feats / "utt2num_frames").read_text().splitlines()
    utt, n = rows[1].split()
    rows[1] = f"{utt} {int(n) + 7}"
    (feats / "utt2num_frames").write_text("\n".join(rows) + "\n")
    reader = FeatureReader(feats)
    reader.load_raw(rows[0].split()[0])  # the others still read
    want = f"utt2num_frames says '{utt}' has {int(n) + 7} frames but its ark holds {n}"
    with pytest.raises(AsrError, match=want) as caught:
        reader.load_raw(utt)
    assert caught.value.render().startswith(f"{feats / 'utt2num_frames'}:2: ")


def test_unreadable_features_name_their_feats_scp_line(tmp_path):
    """A feats.scp entry pointing past the end of its ark (a cut copy) names the scp line to look at."""

    from tests.helpers.featfix import make_feat_dir
    from asrtrain.errors import AsrError
    from asrtrain.features.reader import FeatureReader

    feats = make_feat_dir(tmp_path / "f", 4)
    rows = (feats / "feats.scp").read_text().splitlines()
    utt, spec = rows[2].split()
    ark, offset = spec.rsplit(":", 1)
    rows[2] = f"{utt} {ark}:{int(offset) + 10 ** 9}"
    (feats / "feats.scp").write_text("\n".join(rows) + "\n")
    reader = FeatureReader(feats)
    reader.load_raw(rows[0].split()[0])
    with pytest.raises(AsrError, match=f"cannot read features of '{utt}'") as caught:
        reader.load_raw(utt)
    assert caught.value.render().startswith(f"{feats / 'feats.scp'}:3: ")


@pytest.mark.parametrize("n,want", [("3", "4"), ("0", "2")])
def test_topology_odd_learners_hint_fits_topology(n, want):
    """The hint used to say '--strategy ssgd', an option topology does not have."""
    err = one_error(run("topology", "--learners", n))
    assert f"--learners {n}: an ADPSGD ring needs an even number of learners" in err, err
    assert err.endswith(f"(fix: give an even --learners, e.g. --learners {want})") and "--strategy" not in err

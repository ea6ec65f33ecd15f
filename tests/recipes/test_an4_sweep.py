"""scripts/an4_sweep.py: the rule that picks a variant on dev, and the parsers it reads runs with. The
sweep itself runs for hours on a GPU machine; a broken parser or rule would only show there."""

import sys

import pytest

from tests.helpers.scripts import load_script

an4_sweep = load_script("an4_sweep")


def entry(mean, complete=True):
    return {"complete": complete, "wer_lm_dev": {"mean": mean}} if complete else {"complete": False}


def test_winner_is_lowest_mean_lm_dev_wer_among_complete_variants():
    res = {"base": entry(12.53), "d3": entry(12.2), "big": entry(11.0, complete=False)}
    assert an4_sweep.pick_winner(["base", "d3", "big"], res) == "d3"


def test_a_tie_keeps_the_variant_listed_first():
    res = {"base": entry(12.53), "d3": entry(12.53)}
    assert an4_sweep.pick_winner(["base", "d3"], res) == "base"
    assert an4_sweep.pick_winner(["d3", "base"], res) == "d3"


def test_a_bar_fixed_beforehand_replaces_the_recipe_to_beat():
    # the conv rule: choice 11's recorded 10.49 minus 0.17
    res = {"conv": entry(10.32), "wide": entry(10.2), "deep": entry(10.4),
           "big": entry(9.0, complete=False)}
    # at the bar is enough, and the first variant is a candidate like any other
    assert an4_sweep.pick_winner(["conv"], res, 10.32) == "conv"
    assert an4_sweep.pick_winner(["conv", "wide", "deep"], res, 10.32) == "wide"
    assert an4_sweep.pick_winner(["deep", "big"], res, 10.32) is None  # above the bar, or unfinished


def test_no_complete_variant_means_no_winner():
    assert an4_sweep.pick_winner(["a"], {"a": entry(0, complete=False)}) is None


def test_scores_reads_only_this_runs_wer_and_cer_lines(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("stage 6: score\n"
                   "%WER 16.4 | 100 591 | 84.6 12.7 2.7 1.0 16.4 54.0 | d3_s1_greedy_dev\n"
                   "%CER 8.5 | 100 1915 | 92.7 3.0 4.2 1.3 8.5 54.0 | d3_s1_greedy_dev\n"
                   "%WER 12.5 | 100 591 | 89.2 9.0 1.9 1.7 12.5 42.0 | d3_s1_lm_dev\n"
                   "%WER 99.0 | 100 591 | 1 1 1 1 99.0 99.0 | d3_s10_lm_dev\n")
    assert an4_sweep.scores(log, "d3_s1") == {"wer_greedy_dev": 16.4, "cer_greedy_dev": 8.5,
                                              "wer_lm_dev": 12.5}
    assert an4_sweep.scores(tmp_path / "missing.log", "d3_s1") == {}


def test_curve_reads_dev_loss_and_epoch_seconds(tmp_path):
    (tmp_path / "train.log").write_text(
        "06:25:58 [0] INFO asrtrain.train: epoch 1: train_loss 2.5 dev_loss 1.6483 lr 2.00e-03 (8 s)\n"
        "06:26:06 [0] INFO asrtrain.train: epoch 2: train_loss 1.0 dev_loss 0.8137 lr 1.98e-03 (9 s)\n")
    assert an4_sweep.curve(tmp_path) == {"dev_loss": [1.6483, 0.8137], "epoch_s": [8, 9]}


@pytest.mark.parametrize("bad", ["a b", "x/y", ""])
def test_a_variant_name_that_cannot_be_a_tag_is_refused(bad):
    with pytest.raises(SystemExit, match="variant name"):
        an4_sweep.parse_variant(f"{bad}:model.dropout=0.3")


def test_missing_data_dir_is_one_line_naming_the_file(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["an4_sweep.py", "--data", str(tmp_path / "nope"), "--work",
                                      str(tmp_path / "w"), "--out", str(tmp_path / "o"), "--variant", "base"])
    with pytest.raises(SystemExit, match=r"nope/train/wav.scp not found; give --data"):
        an4_sweep.main()
    assert not (tmp_path / "w").exists()


def test_pack_carries_the_same_samples_as_flac_and_the_sweep_finds_them(tmp_path, monkeypatch):
    import soundfile as sf

    an4_pack = load_script("an4_pack")
    from tests.helpers.an4_fixture import make_an4
    from asrtrain.corpora.an4 import prepare_an4
    from asrtrain.data.audio import load_audio

    data = tmp_path / "data"
    prepare_an4(make_an4(tmp_path / "an4"), data, dev_utts=2)
    monkeypatch.setattr(sys, "argv", ["an4_pack.py", str(data), str(tmp_path / "pack")])
    an4_pack.main()
    for part in ("train", "dev", "test"):
        src = dict(ln.split(" ", 1) for ln in (data / part / "wav.scp").read_text().splitlines())
        packed = (tmp_path / "pack/data" / part / "wav.scp").read_text().splitlines()
        got = dict(ln.split(" ", 1) for ln in packed)
        assert got.keys() == src.keys() and all(v == f"@FLAC@/{k}.flac" for k, v in got.items())
        assert (tmp_path / "pack/data" / part / "text").read_text() == (data / part / "text").read_text()
        for utt, path in src.items():
            flac, rate = sf.read(tmp_path / "pack/flac" / f"{utt}.flac", dtype="int16")
            sph, sph_rate = sf.read(path, dtype="int16")
            assert rate == sph_rate and (flac == sph).all()
    # an entry with @FLAC@ resolved as the sweep does it is audio the toolkit reads
    path = (tmp_path / "pack/data/dev/wav.scp").read_text().splitlines()[0].split(" ", 1)[1]
    samples, rate = load_audio(path.replace("@FLAC@", str((tmp_path / "pack/flac").resolve())))
    assert rate == 16000 and samples.numel() > 0


def test_pack_refuses_a_pipe_naming_the_line(tmp_path, monkeypatch):
    an4_pack = load_script("an4_pack")

    for part in ("train", "dev", "test"):
        (tmp_path / "data" / part).mkdir(parents=True)
        (tmp_path / "data" / part / "wav.scp").write_text("a-1 sph2pipe -f wav x.sph |\n")
    monkeypatch.setattr(sys, "argv", ["an4_pack.py", str(tmp_path / "data"), str(tmp_path / "out")])
    with pytest.raises(SystemExit) as exc:
        an4_pack.main()
    msg = str(exc.value)
    assert "\n" not in msg and "wav.scp:1:" in msg and "not an audio file" in msg

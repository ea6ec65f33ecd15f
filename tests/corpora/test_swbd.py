"""Switchboard (LDC97S62) preparation on a miniature LDC layout: ids, segments, channels, normalisation,
splits, errors and the CLI."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from click.testing import CliRunner

from asrtrain.cli import cli
from asrtrain.corpora.ldc import Utterance, remove_dup_utts
from asrtrain.corpora.swbd import build_acronym_map, map_word, prepare_swbd
from asrtrain.data.table import read_table
from asrtrain.errors import AsrError
from tests.helpers.swbd_fixture import SR, TONE_A, TONE_B, make_swbd

FILES = ("text", "segments", "utt2spk", "spk2utt", "wav.scp", "reco2file_and_channel")

EXPECTED_TEXT = {
    "sw02001-A_000098-000356": "hi um yeah yes i._b._m.'s -y ab-",
    "sw02001-A_000356-000520": "it'n yuppiedom them ammn-t- [vocalized-noise]",
    "sw02001-A_000520-000600": "uh-huh",
    "sw02001-A_000600-000700": "[noise] uh-huh [laughter]",
    "sw02001-A_000700-000800": "uh-huh",
    "sw02001-A_000900-001050": "i think i b. m. is a company",
    "sw02001-B_000050-000200": "uh-huh",
    "sw02001-B_000250-000400": "right ri-",
    "sw02001-B_000400-000600": "uh-huh",
    "sw02001-B_000600-000750": "ex so",
    "sw02001-B_000750-000900": "well okay",
    "sw02005-A_000020-000150": "uh-huh",
    "sw02005-A_000150-000400": "and so it goes",
    "sw02005-B_000010-000200": "yeah [laughter] right",
    "sw02005-B_000200-000350": "uh-huh",
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_swbd(tmp_path_factory.mktemp("swbd"))


@pytest.fixture(scope="module")
def prepared(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("data")
    prepare_swbd(corpus.swbd_dir, out, dev_utts=3)
    return out


def _lines(path: Path):
    return path.read_text().splitlines()


def check_consistent(d: Path) -> None:
    """Every file sorted by key (LC_ALL=C), the same utterances everywhere, recordings matching."""
    for name in FILES:
        keys = [ln.split()[0] for ln in _lines(d / name)]
        assert keys == sorted(keys) and len(set(keys)) == len(keys), name
    utts = list(read_table(d / "text"))
    assert list(read_table(d / "segments")) == utts == list(read_table(d / "utt2spk"))
    spk2utt = {s: v.split() for s, v in read_table(d / "spk2utt").items()}
    assert sorted(u for us in spk2utt.values() for u in us) == utts
    recos = sorted({v.split()[0] for v in read_table(d / "segments").values()})
    assert list(read_table(d / "wav.scp")) == recos == list(read_table(d / "reco2file_and_channel"))
    assert sorted(spk2utt) == recos  # speaker = conversation side


def test_text_ids_and_normalisation_match_kaldi(prepared):
    assert read_table(prepared / "train" / "text") == EXPECTED_TEXT


def test_segments_utt2spk_and_recordings(prepared, corpus):
    d = prepared / "train"
    segments = read_table(d / "segments")
    # times are the id's centiseconds, written as awk prints startf/100
    assert segments["sw02001-A_000098-000356"] == "sw02001-A 0.98 3.56"
    assert segments["sw02001-A_000520-000600"] == "sw02001-A 5.2 6"
    assert read_table(d / "utt2spk")["sw02005-B_000010-000200"] == "sw02005-B"
    assert read_table(d / "reco2file_and_channel") == {
        "sw02001-A": "sw02001 A", "sw02001-B": "sw02001 B",
        "sw02005-A": "sw02005 A", "sw02005-B": "sw02005 B"}
    wav = read_table(d / "wav.scp")
    assert wav["sw02001-A"] == wav["sw02001-B"] == str(corpus.sph["sw02001"].resolve())
    assert wav["sw02005-B"] == str(corpus.sph["sw02005"].resolve())
    # the conversation without audio (sw03001) is left out; so are [silence]-only and zero-length segments
    assert not any(k.startswith("sw03001") for k in read_table(d / "text"))
    for name in ("train", "train_dev", "train_nodev", "train_nodup"):
        check_consistent(prepared / name)


@pytest.mark.parametrize("name", ["sw02001", "sw02005"])  # PCM and µ-law
def test_channel_of_each_side(prepared, name):
    d = prepared / "train"
    wav, r2fc = read_table(d / "wav.scp"), read_table(d / "reco2file_and_channel")
    for side, tone in (("A", TONE_A), ("B", TONE_B)):
        reco = f"{name}-{side}"
        channel = "AB".index(r2fc[reco].split()[1])
        audio, sr = sf.read(wav[reco], dtype="float32")
        assert sr == SR and audio.shape[1] == 2
        x = audio[:SR, channel]
        peak = np.argmax(np.abs(np.fft.rfft(x))) * SR / len(x)
        assert abs(peak - tone) < 5, (reco, peak)


def test_dev_is_first_utterances_and_nodev_the_rest(prepared):
    train = list(read_table(prepared / "train" / "text"))
    assert list(read_table(prepared / "train_dev" / "text")) == train[:3]
    assert list(read_table(prepared / "train_nodev" / "text")) == train[3:]
    # no transcript reaches 300 copies: train_nodup is train_nodev
    assert read_table(prepared / "train_nodup" / "text") == read_table(prepared / "train_nodev" / "text")


def test_nodup_thins_frequent_transcripts_like_kaldi(corpus, tmp_path):
    prepare_swbd(corpus.swbd_dir, tmp_path, dev_utts=3, max_dup=2)
    nodev = read_table(tmp_path / "train_nodev" / "text")
    nodup = read_table(tmp_path / "train_nodup" / "text")
    uh = [u for u, t in nodev.items() if t == "uh-huh"]
    assert len(uh) == 5
    # Kaldi's generator k=(k+103349)%71147 gives 0.453 0.905 0.358 0.810 0.263; kept when < 2/5
    assert [u for u, t in nodup.items() if t == "uh-huh"] == [uh[2], uh[4]]
    assert {u: t for u, t in nodup.items() if t != "uh-huh"} == {u: t for u, t in nodev.items()
                                                                 if t != "uh-huh"}
    check_consistent(tmp_path / "train_nodup")


def test_remove_dup_utts_keeps_rare_transcripts():
    segs = [Utterance(f"u{i}", "r", "0", "1", "x") for i in range(3)] + [Utterance("v", "r", "0", "1", "y")]
    assert [s.utt for s in remove_dup_utts(segs, 4)] == ["u0", "u1", "u2", "v"]


def test_drop_noise_option(corpus, tmp_path):
    prepare_swbd(corpus.swbd_dir, tmp_path, dev_utts=0, keep_noise=False)
    text = read_table(tmp_path / "train" / "text")
    assert text["sw02001-A_000600-000700"] == "uh-huh"
    assert text["sw02005-B_000010-000200"] == "yeah right"
    assert not any("[" in t for t in text.values())


def test_without_acronym_mapping(corpus, tmp_path):
    prepare_swbd(corpus.swbd_dir, tmp_path, dev_utts=0, acronyms=False)
    text = read_table(tmp_path / "train" / "text")
    assert text["sw02001-A_000098-000356"] == "hi um yeah yes ibm's -y ab-"
    assert text["sw02001-A_000900-001050"] == "i think i b m is a company"


@pytest.mark.parametrize("word, mapped", [
    ("[laughter-story]", "story"), ("[LAUGHTER-yeah]-", "yeah-"), ("[it'n/isn't]", "it'n"),
    ("[lem[guini]-/linguini]", "lem-"), ("-[an]y", "-y"), ("[an]y", "-y"), ("ab[solute]-", "ab-"),
    ("ab[solute]", "ab-"), ("ex[specially]-/especially]", "ex"), ("{yuppiedom}", "yuppiedom"),
    ("ammu[n]it-", "ammn-t-"), ("them_1", "them"), ("them_1's", "them's"), ("[noise]", "[noise]"),
    ("uh-huh", "uh-huh"),
    # odd inputs, with what Kaldi's Perl makes of them
    ("-[40]1k", "-1k"), ("-[a]b[out]-", "-b-"), ("[laughter-ab[solute]-]", "ab-"),
    ("[laughter-{wow}]", "wow"),
    ("[b[ig]-/big]", "b-"), ("hhm[m]-hm", "hhm[m]-hm"), ("a[nd]-", "a-"), ("{a}[m]-", "{a}-"),
    ("[laughter-it's_1]", "it's"), ("ca[n]-[t]", "ca[n]--"),
])
def test_map_word_rules(word, mapped):
    assert map_word(word) == mapped


def test_acronym_map(corpus):
    acr = build_acronym_map(corpus.trans_dir / "sw-ms98-dict.text")
    assert acr["ibm"] == "i._b._m." and acr["ibm's"] == "i._b._m.'s" and acr["bbcs"] == "b._b._c.s"
    assert acr["b"] == "b." and "yes" not in acr and "a" not in acr and "uh-huh" not in acr


def test_misnamed_disc_dirs_list_what_is_expected(tmp_path):
    fx = make_swbd(tmp_path)
    for i in range(1, 5):
        (fx.swbd_dir / f"swb1_d{i}").rename(fx.swbd_dir / f"disc{i}")
    with pytest.raises(AsrError) as err:
        prepare_swbd(fx.swbd_dir, tmp_path / "out")
    msg = str(err.value)
    for i in range(1, 5):
        assert f"{fx.swbd_dir}/swb1_d{i}/data/swNNNNN.sph" in msg
    # the discs may also sit one or two levels down, e.g. in swb1_LDC97S62/
    wrapped = tmp_path / "wrapped"
    inner = wrapped / "swb1_LDC97S62" / "LDC97S62"
    inner.parent.mkdir(parents=True)
    fx.swbd_dir.rename(inner)
    (inner / "disc1").rename(inner / "swb1_d1")
    prepare_swbd(wrapped, tmp_path / "out", acronyms=False, dev_utts=0,
                 trans_dir=inner / "transcriptions" / "swb_ms98_transcriptions")
    wav = read_table(tmp_path / "out" / "train" / "wav.scp")
    assert wav["sw02001-A"].endswith("swb1_d1/data/sw02001.sph")
    with pytest.raises(AsrError, match="Switchboard directory not found"):
        prepare_swbd(tmp_path / "nowhere", tmp_path / "out")


def test_missing_transcripts_and_dictionary(tmp_path):
    fx = make_swbd(tmp_path)
    (fx.trans_dir / "sw-ms98-dict.text").unlink()
    with pytest.raises(AsrError, match="--no-acronyms"):
        prepare_swbd(fx.swbd_dir, tmp_path / "out")
    fx.trans_dir.rename(tmp_path / "elsewhere")
    with pytest.raises(AsrError) as err:
        prepare_swbd(fx.swbd_dir, tmp_path / "out")
    assert "transcriptions/swb_ms98_transcriptions/NN/NNNN/swNNNN[AB]-ms98-a-trans.text" in str(err.value)
    prepare_swbd(fx.swbd_dir, tmp_path / "out", trans_dir=tmp_path / "elsewhere", acronyms=False)
    assert (tmp_path / "out" / "train" / "text").is_file()


def _fake_sph2pipe(d: Path) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    prog = d / "sph2pipe"
    prog.write_text("#!/bin/sh\nexit 0\n")
    prog.chmod(prog.stat().st_mode | stat.S_IEXEC)
    return prog


def test_shorten_needs_sph2pipe(tmp_path, monkeypatch):
    fx = make_swbd(tmp_path, shorten=True)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(AsrError) as err:
        prepare_swbd(fx.swbd_dir, tmp_path / "out")
    msg = str(err.value)
    assert "sph2pipe" in msg and "shorten" in msg and "make sph2pipe" in msg and "sw02001.sph" in msg

    prog = _fake_sph2pipe(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    prepare_swbd(fx.swbd_dir, tmp_path / "out", dev_utts=0)
    wav = read_table(tmp_path / "out" / "train" / "wav.scp")
    path = fx.sph["sw02001"].resolve()
    assert wav["sw02001-A"] == f"{prog} -f wav -p -c 1 {path} |"
    assert wav["sw02001-B"] == f"{prog} -f wav -p -c 2 {path} |"
    assert wav["sw02005-A"] == str(fx.sph["sw02005"].resolve())  # µ-law is read directly


def test_marker_skips_finished_work_unless_options_change(corpus, tmp_path):
    prepare_swbd(corpus.swbd_dir, tmp_path, dev_utts=3)
    text = tmp_path / "train" / "text"
    text.write_text("edited\n")
    prepare_swbd(corpus.swbd_dir, tmp_path, dev_utts=3)
    assert text.read_text() == "edited\n"
    prepare_swbd(corpus.swbd_dir, tmp_path, dev_utts=2)
    assert read_table(text) == EXPECTED_TEXT
    assert len(read_table(tmp_path / "train_dev" / "text")) == 2


def test_cli(corpus, tmp_path):
    runner = CliRunner()
    res = runner.invoke(cli, ["prepare", "swbd", str(corpus.swbd_dir), str(tmp_path / "data"),
                              "--dev-utts", "3", "--drop-noise"])
    assert res.exit_code == 0, res.output
    assert read_table(tmp_path / "data" / "train" / "text")["sw02001-A_000600-000700"] == "uh-huh"
    res = runner.invoke(cli, ["prepare", "swbd", str(tmp_path / "nowhere"), str(tmp_path / "x")])
    assert res.exit_code == 1 and "asrtrain: error:" in res.output and "Traceback" not in res.output
    res = runner.invoke(cli, ["prepare", "swbd", "--help"])
    assert res.exit_code == 0 and "--max-dup" in res.output

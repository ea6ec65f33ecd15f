"""The embedded synthetic corpus: espeak binding, grammar, speakers, data dirs, determinism, CLI."""

from __future__ import annotations

import collections
import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from click.testing import CliRunner

from asrtrain.cli import cli
from asrtrain.corpora.synth import grammar, prepare, render
from asrtrain.corpora.synth.espeak import Espeak, check_voice, loader_paths
from asrtrain.corpora.synth.prepare import (ACCENTS, TEST_VARIANTS, TRAIN_VARIANTS, check_voices,
                                            plan_speakers, plan_utterance, prepare_synth)
from asrtrain.data.table import read_table, read_table_lines
from asrtrain.errors import AsrError

TINY = dict(hours=0.01, seed=3, dev_utts=4, test_utts=8)
FILES = ("wav.scp", "text", "utt2spk", "spk2utt", "utt2dur")


@pytest.fixture(scope="module")
def engine():
    return Espeak()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth") / "data"
    summary = prepare_synth(out, nj=1, **TINY)
    return out, summary


def _tree(root: Path) -> dict:
    """Relative path -> bytes of every file under root/wav, and the data dir files."""
    files = {str(p.relative_to(root)): p.read_bytes() for p in (root / "wav").rglob("*.wav")}
    for split in ("train", "dev", "test"):
        for name in FILES:
            files[f"{split}/{name}"] = (root / split / name).read_bytes().replace(
                str(root).encode(), b"ROOT")
    return files


# --- grammar ---------------------------------------------------------------------------------

def test_vocabulary_is_large_lowercase_and_free_of_homophones(engine):
    vocab = grammar.vocabulary()
    assert len(vocab) >= 300
    assert all(w.isascii() and w.isalpha() and w.islower() for w in vocab)
    engine.set_voice("en-us")
    sounds = collections.defaultdict(list)
    for w in vocab:  # stress marks do not separate words for an acoustic model
        sounds[engine.phonemes(w).replace("'", "").replace(",", "")].append(w)
    assert [ws for ws in sounds.values() if len(ws) > 1] == []


def test_sentences_stay_in_vocabulary_cover_it_and_repeat_from_a_seed():
    vocab = set(grammar.vocabulary())
    rng = np.random.default_rng(0)
    seen, lengths = set(), set()
    for _ in range(6000):
        words = grammar.sentence(rng)
        seen.update(words)
        lengths.add(len(words))
    assert seen <= vocab
    assert vocab - seen == set(), "every vocabulary word must be reachable"
    assert min(lengths) >= grammar.MIN_WORDS and max(lengths) <= grammar.MAX_WORDS
    a = [grammar.sentence(np.random.default_rng(7)) for _ in range(3)]
    assert a[0] == a[1] == a[2]
    assert grammar.spoken_form(["what", "is", "it"]) == "what is it?"


def test_a_demo_sized_train_plan_covers_the_vocabulary_without_test_sentences(tmp_path):
    # Test and dev sentences are excluded from train; templates with few distinct sentences would
    # lose words to that. 1800 utterances is about 1.5 hours.
    spk = plan_speakers(1)
    test = [plan_utterance(1, "test", i, spk["test"], set(), tmp_path) for i in range(400)]
    held_out = {u.text for u in test}
    train = [plan_utterance(1, "train", i, spk["train"], held_out, tmp_path) for i in range(1800)]
    counts = collections.Counter(w for u in train for w in u.text.split())
    assert {w for w in grammar.vocabulary() if counts[w] < 3} == set()
    assert not held_out & {u.text for u in train}


def test_spell_numbers():
    assert grammar.spell(0) == ["zero"]
    assert grammar.spell(42) == ["forty", "two"]
    assert grammar.spell(300) == ["three", "hundred"]
    assert grammar.spell(1917) == ["one", "thousand", "nine", "hundred", "seventeen"]
    with pytest.raises(ValueError):
        grammar.spell(10000)


# --- espeak and voices -------------------------------------------------------------------------

def test_espeak_speaks_deterministically_and_words_take_time(engine):
    short = engine.speak("turn on the lights.", "en-us+m3", rate=160, seed=5)
    again = engine.speak("turn on the lights.", "en-us+m3", rate=160, seed=5)
    longer = engine.speak("turn on the lights in the kitchen at half past seven.", "en-us+m3",
                          rate=160, seed=5)
    assert engine.sample_rate == 22050
    assert np.array_equal(short, again)
    assert short.dtype == np.int16 and np.abs(short).max() > 3000
    assert 0.6 < short.size / engine.sample_rate < 3.0
    assert longer.size > 2 * short.size
    slow = engine.speak("turn on the lights.", "en-us+m3", rate=130, seed=5)
    assert slow.size > short.size


def test_reloading_the_engine_does_not_leak_memory(engine):
    def rss_mb():
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6

    engine.speak("turn on the lights.", "en-us+m3", seed=1)
    before = rss_mb()
    for seed in range(40):  # without espeak_Terminate each reload leaks about 0.9 MB
        engine.speak("turn on the lights.", "en-us+m3", seed=seed)
    assert rss_mb() - before < 12


def test_every_listed_voice_exists_and_unknown_ones_fail(monkeypatch, tmp_path):
    check_voices()
    data = loader_paths()[1]
    with pytest.raises(AsrError, match="variant 'nosuchvoice'"):
        check_voice("en-us+nosuchvoice", data)
    with pytest.raises(AsrError, match="language voice 'xx-yy'"):
        check_voice("xx-yy+m3", data)
    monkeypatch.setattr(prepare, "TEST_VARIANTS", ("m6", "nosuchvoice"))
    with pytest.raises(AsrError, match="variant 'nosuchvoice'"):
        prepare_synth(tmp_path / "out", hours=0.001, dev_utts=1, test_utts=1)
    assert not (tmp_path / "out" / "wav").exists()


def test_audio_that_does_not_match_its_words_is_refused(tmp_path):
    spk = plan_speakers(1)["train"]
    u = plan_utterance(1, "train", 0, spk, set(), tmp_path)
    words = "one two three four five six seven eight nine ten eleven twelve"
    bad = dataclasses.replace(u, text=words, spoken="one.")  # far too short for twelve words
    renderer = render.Renderer()
    with pytest.raises(AsrError, match="implausible audio"):
        renderer(bad)
    assert renderer(u)[1] > 16000 and Path(u.wav).exists()


def test_test_voices_are_never_in_training_and_dev_pairs_are_held_out():
    assert not set(TEST_VARIANTS) & set(TRAIN_VARIANTS)
    spk = plan_speakers(1)
    pair = lambda s: s.voice  # noqa: E731 (accent+variant)
    train, dev, test = ({pair(s) for s in spk[k]} for k in ("train", "dev", "test"))
    assert {v.split("+")[1] for v in test} == set(TEST_VARIANTS)
    assert not {v.split("+")[1] for v in train} & set(TEST_VARIANTS)
    assert not dev & train and not test & (train | dev)
    assert len(train) + len(dev) == len(ACCENTS) * len(TRAIN_VARIANTS)
    ids = [s.spk for k in spk for s in spk[k]]
    assert len(set(ids)) == len(ids)
    assert not any(a != b and b.startswith(a) for a in ids for b in ids)  # Kaldi sort safety


# --- the corpus ------------------------------------------------------------------------------

def test_data_dirs_are_valid_kaldi_and_audio_is_speech(corpus):
    out, summary = corpus
    vocab = set((out / "words.txt").read_text().split())
    assert vocab == set(grammar.vocabulary())
    texts = {}
    for split in ("train", "dev", "test"):
        d = out / split
        tables = {}
        for name in FILES:
            rows = read_table_lines(d / name)
            keys = [k for _, k, _ in rows]
            assert keys == sorted(keys) and len(set(keys)) == len(keys), f"{split}/{name}"
            tables[name] = {k: v for _, k, v in rows}
        utts = set(tables["text"])
        assert utts == set(tables["wav.scp"]) == set(tables["utt2spk"]) == set(tables["utt2dur"])
        assert len(utts) == summary["splits"][split]["utterances"]
        for spk, line in tables["spk2utt"].items():
            assert all(tables["utt2spk"][u] == spk for u in line.split())
        assert sum(len(v.split()) for v in tables["spk2utt"].values()) == len(utts)
        for utt, spk in tables["utt2spk"].items():
            assert utt.startswith(spk + "-")
            words = tables["text"][utt].split()
            assert grammar.MIN_WORDS <= len(words) <= grammar.MAX_WORDS and set(words) <= vocab
        texts[split] = set(tables["text"].values())
        for utt, path in tables["wav.scp"].items():
            assert os.path.isabs(path)
            info = sf.info(path)
            assert (info.samplerate, info.channels, info.subtype) == (16000, 1, "PCM_16")
            x, _ = sf.read(path, dtype="int16")
            assert abs(x.size / 16000 - float(tables["utt2dur"][utt])) < 1e-3
            assert 0.25 * len(tables["text"][utt].split()) < x.size / 16000 < 12
            # loud speech over a quieter noise floor: the loudest 100 ms well above the quietest
            frames = x[: x.size // 1600 * 1600].astype(np.float64).reshape(-1, 1600)
            energy = np.sort((frames ** 2).mean(axis=1))
            assert energy[-1] > 20 * energy[0] and np.sqrt(energy[-1]) > 200
    assert not texts["train"] & (texts["dev"] | texts["test"])
    assert summary["splits"]["train"]["hours"] >= TINY["hours"]


def test_speakers_file_puts_test_variants_only_in_test(corpus):
    out, _ = corpus
    by_split = collections.defaultdict(set)
    for line in (out / "speakers.txt").read_text().splitlines():
        spk, split, voice = line.split()[:3]
        by_split[split].add(voice.split("+")[1])
    assert by_split["test"] <= set(TEST_VARIANTS)
    assert not by_split["test"] & (by_split["train"] | by_split["dev"])


def test_same_seed_gives_identical_bytes_whatever_nj(corpus, tmp_path):
    out, _ = corpus
    other = tmp_path / "again"
    prepare_synth(other, nj=2, **TINY)
    assert _tree(other) == _tree(out)
    changed = tmp_path / "seed4"
    prepare_synth(changed, nj=1, **dict(TINY, seed=4))
    assert (changed / "train" / "text").read_text() != (out / "train" / "text").read_text()


def test_hours_scales_train_and_leaves_dev_test_alone(corpus, tmp_path):
    out, small = corpus
    bigger = prepare_synth(tmp_path / "big", nj=1, **dict(TINY, hours=0.02))
    h1, h2 = small["splits"]["train"]["hours"], bigger["splits"]["train"]["hours"]
    assert h2 >= 0.02 and 1.6 < h2 / h1 < 2.4
    assert bigger["splits"]["train"]["utterances"] > small["splits"]["train"]["utterances"]
    for split in ("dev", "test"):
        assert (tmp_path / "big" / split / "text").read_bytes() == (out / split / "text").read_bytes()
    # the smaller corpus is a prefix of the bigger one
    small_train = read_table(out / "train" / "text")
    big_train = read_table(tmp_path / "big" / "train" / "text")
    assert all(big_train[u] == t for u, t in small_train.items())


def test_rerun_is_a_no_op_and_new_parameters_regenerate(corpus, tmp_path):
    out = tmp_path / "data"
    first = prepare_synth(out, nj=1, **dict(TINY, hours=0.004))
    stamps = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    assert prepare_synth(out, nj=1, **dict(TINY, hours=0.004)) == first
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()} == stamps
    marker = json.loads((out / ".done").read_text())
    assert marker["params"]["hours"] == 0.004 and marker["summary"] == first
    prepare_synth(out, nj=1, **dict(TINY, hours=0.004, test_utts=3))
    assert len(list((out / "wav" / "test").rglob("*.wav"))) == 3  # no stale files left


def test_an_interrupted_run_is_redone_from_scratch(tmp_path):
    out = tmp_path / "data"
    (out / "wav" / "train" / "stale").mkdir(parents=True)
    (out / "wav" / "train" / "stale" / "old.wav").write_bytes(b"partial")
    (out / ".inprogress").write_text("{}")
    summary = prepare_synth(out, nj=1, hours=0.002, dev_utts=1, test_utts=1)
    assert not (out / "wav" / "train" / "stale").exists() and not (out / ".inprogress").exists()
    assert summary["splits"]["test"]["utterances"] == 1


def test_refuses_a_directory_it_did_not_write(tmp_path):
    (tmp_path / "train").mkdir()
    with pytest.raises(AsrError, match="not written by asrtrain prepare synth"):
        prepare_synth(tmp_path, hours=0.001, dev_utts=1, test_utts=1)
    with pytest.raises(AsrError, match="--hours must be positive"):
        prepare_synth(tmp_path / "x", hours=0)


def test_cli_prepare_synth(tmp_path):
    runner = CliRunner()
    out = tmp_path / "data"
    res = runner.invoke(cli, ["prepare", "synth", str(out), "--hours", "0.003", "--seed", "2",
                              "--dev-utts", "2", "--test-utts", "2", "--nj", "1"])
    assert res.exit_code == 0, res.output
    assert "test: 2 utterances" in res.output and "x real time" in res.output
    assert (out / "train" / "wav.scp").exists() and (out / ".done").exists()
    res = runner.invoke(cli, ["prepare", "synth", str(tmp_path / "bad"), "--hours", "-1"])
    assert res.exit_code == 1 and "asrtrain: error: --hours must be positive" in res.output
    assert "Traceback" not in res.output
    res = runner.invoke(cli, ["prepare", "synth", "--help"])
    assert res.exit_code == 0 and "--test-utts" in res.output

"""recipes/template/run.sh: a user's own corpus in Kaldi data dirs, run through the recipe unedited."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from tests.helpers.an4_fixture import make_an4

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "recipes" / "template" / "run.sh"
TINY = ["--vocab-size", "20", "--set", "train.epochs=1", "--set", "model.num_layers=1", "--set", "model.hidden=16",
        "--set", "train.warmup_steps=1", "--set", "train.average_last=1", "--set", "model.att_weight=0",
        "--lm-weights", "0.5", "--word-bonuses", "0,2"]

pytestmark = pytest.mark.slow  # the recipe's bash script in subprocesses


def run(*args, cwd=None):
    env = dict(os.environ, ASRTRAIN=f"{sys.executable} -m asrtrain", OMP_NUM_THREADS="1")
    return subprocess.run(["bash", str(RUN), *map(str, args)], env=env, capture_output=True, text=True,
                          timeout=600, cwd=cwd)


def user_corpus(tmp_path: Path) -> Path:
    """Kaldi data dirs somewhere of the user's choosing (here: AN4's miniature, prepared)."""
    an4 = make_an4(tmp_path / "an4")
    corpus = tmp_path / "corpus"
    r = subprocess.run([sys.executable, "-m", "asrtrain", "prepare", "an4", str(an4), str(corpus), "--dev-utts", "2"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return corpus


def test_a_corpus_in_data_dirs_runs_to_scores_and_a_packed_model(tmp_path):
    corpus = user_corpus(tmp_path)
    lm_text = tmp_path / "lm.txt"
    lm_text.write_text("x1 GO ENTER FIVE\nx2 ZEBRA NO\n")  # a word the transcripts never have
    work = tmp_path / "work"
    r = run("--train", corpus / "train", "--dev", corpus / "dev", "--test", corpus / "test", "--work", work,
            "--lm-text", lm_text, "--factors", "1.0", *TINY)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith(("%WER", "%CER"))]
    names = [ln.rsplit("| ", 1)[1] for ln in lines if ln.startswith("%WER")]
    assert names == ["blstm_greedy_dev", "blstm_greedy_test", "blstm_lm_dev", "blstm_lm_test"], r.stdout
    assert "16000 Hz: fbank_16k.yaml" in r.stdout  # chosen by the training audio's rate
    assert "num_mel_bins: 80" in (work / "dump" / "dev" / "features.yaml").read_text()
    # --factors 1.0: no perturbed copy, the training features are the given dir's
    assert (work / "dump" / "train" / "feats.scp").is_file() and not (work / "data").exists()
    assert "ZEBRA" in (work / "exp" / "lm" / "words.txt").read_text()  # the LM counted --lm-text
    pack = work / "exp" / "blstm" / "pack"
    assert (pack / "MANIFEST.sha256").is_file() and "%WER" in (pack / "MODEL.md").read_text()
    assert r.stdout.rstrip().splitlines()[-1].startswith(f"packed model: {pack}")
    # the same command again does nothing twice (markers), and still ends at the pack
    again = run("--train", corpus / "train", "--dev", corpus / "dev", "--test", corpus / "test", "--work", work,
                "--lm-text", lm_text, "--factors", "1.0", "--stage", "4", *TINY)
    assert again.returncode == 0 and "(done: " in again.stdout and "training" not in again.stderr, again.stderr[-2000:]


def test_narrow_band_audio_gets_the_8k_features(tmp_path):
    data = tmp_path / "tel"
    data.mkdir()
    rng = np.random.default_rng(0)
    ids = [f"spk{s}-utt{i}" for s in (1, 2) for i in (1, 2)]
    for u in ids:
        sf.write(tmp_path / f"{u}.wav", (0.1 * rng.standard_normal(8000)).astype(np.float32), 8000)
    (data / "wav.scp").write_text("".join(f"{u} {tmp_path / u}.wav\n" for u in ids))
    (data / "text").write_text("".join(f"{u} HELLO\n" for u in ids))
    (data / "utt2spk").write_text("".join(f"{u} {u.split('-')[0]}\n" for u in ids))
    (data / "spk2utt").write_text("".join(f"spk{s} spk{s}-utt1 spk{s}-utt2\n" for s in (1, 2)))
    r = run("--train", data, "--dev", data, "--work", tmp_path / "w", "--factors", "1.0", "--stop-stage", "2")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "8000 Hz: fbank_8k.yaml" in r.stdout
    conf = (tmp_path / "w" / "dump" / "train" / "features.yaml").read_text()
    assert "sample_rate: 8000" in conf and "num_mel_bins: 40" in conf


def test_a_broken_dir_stops_before_any_work_with_one_line(tmp_path):
    corpus = user_corpus(tmp_path)
    utt2spk = corpus / "dev" / "utt2spk"
    utt2spk.write_text("".join(reversed(utt2spk.read_text().splitlines(keepends=True))))  # not sorted
    r = run("--train", corpus / "train", "--dev", corpus / "dev", "--work", tmp_path / "w")
    assert r.returncode == 1
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("asrtrain: error:")]
    assert len(errors) == 1 and "utt2spk" in errors[0] and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "w" / "dump").exists()


def test_an_utterance_shorter_than_one_frame_stops_stage_0_with_a_fix_that_works(tmp_path):
    data = tmp_path / "own"
    data.mkdir()
    rng = np.random.default_rng(0)
    ids = [f"spk{s}-utt{i}" for s in (1, 2) for i in (1, 2)]
    for u in ids:  # spk1-utt1 is 20 ms, under one 25 ms frame
        n = 320 if u == "spk1-utt1" else 16000
        sf.write(tmp_path / f"{u}.wav", (0.1 * rng.standard_normal(n)).astype(np.float32), 16000)
    (data / "wav.scp").write_text("".join(f"{u} {tmp_path / u}.wav\n" for u in ids))
    (data / "text").write_text("".join(f"{u} HELLO\n" for u in ids))
    (data / "utt2spk").write_text("".join(f"{u} {u.split('-')[0]}\n" for u in ids))
    (data / "spk2utt").write_text("".join(f"spk{s} spk{s}-utt1 spk{s}-utt2\n" for s in (1, 2)))
    args = ("--train", data, "--dev", data, "--work", tmp_path / "w", "--factors", "1.0", "--stop-stage", "2")
    r = run(*args)
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("asrtrain: error:")]
    assert r.returncode == 1 and len(errors) == 1, r.stderr[-3000:]
    assert f"{data}/wav.scp:1: utterance 'spk1-utt1' is 320 samples" in errors[0]
    assert "(fix: asrtrain data fix DIR drops it)" in errors[0] and not (tmp_path / "w" / "dump").exists()
    fixed = subprocess.run([sys.executable, "-m", "asrtrain", "data", "fix", str(data)], capture_output=True,
                           text=True)
    assert fixed.returncode == 0 and "4 utterances in, 3 out" in fixed.stdout, fixed.stderr
    r = run(*args)
    assert r.returncode == 0, r.stderr[-3000:]


def test_missing_dirs_are_named():
    r = run("--train", "/nonexistent")
    assert r.returncode == 1 and "give --dev DIR" in r.stderr
    r = run("--train", "a", "--dev", "b", "--decode-sets", "dev test")
    assert r.returncode == 1 and "no --test DIR" in r.stderr

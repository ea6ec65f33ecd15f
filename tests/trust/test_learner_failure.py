"""A failure in one learner of a spawned job reaches the terminal as one ``asrtrain: error:`` line, from
the parent, naming the cause (issue 57): the failing learner posts its error as the verdict in the
parent's store instead of printing it, the other learners read it and stop, and the parent prints it."""

import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from asrtrain.distributed.runtime.launch import LOCAL_HOST, _report, local_store
from asrtrain.distributed.runtime.peerwatch import get_verdict


def test_a_learner_posts_its_error_once_and_the_first_wins(capfd):
    import datetime

    store = local_store(datetime.timedelta(seconds=10))
    _report(1, "feats.scp:6: features of 'u' hold NaN or Inf", (LOCAL_HOST, store.port))
    _report(0, "learner rank 1: feats.scp:6: ...", (LOCAL_HOST, store.port), consequence=True)
    assert get_verdict(store) == "learner rank 1: feats.scp:6: features of 'u' hold NaN or Inf"
    assert "asrtrain: error:" not in capfd.readouterr().err  # the parent prints it, not the learners


def test_without_a_parent_store_the_learner_says_it_itself(capfd):
    _report(3, "boom (fix: x)", None)
    assert capfd.readouterr().err == "asrtrain: error: learner rank 3: boom (fix: x)\n"


def nan_in_utterance(feat_dir: Path, index: int) -> str:
    """Put a NaN into the first value of the ``index``-th utterance's matrix (a Kaldi binary float matrix:
    the data start 15 bytes after its offset); returns the utterance id."""
    utt, spec = (feat_dir / "feats.scp").read_text().splitlines()[index].split()
    ark, offset = spec.rsplit(":", 1)
    with open(ark, "r+b") as fh:
        fh.seek(int(offset) + 15)
        fh.write(struct.pack("<f", float("nan")))
    return utt


@pytest.mark.slow  # two spawned gloo learners
def test_one_learner_failing_gives_one_line_from_the_parent(world, tmp_path):
    feats = tmp_path / "feats"
    shutil.copytree(world["feats"], feats)
    scp = feats / "feats.scp"
    scp.write_text(scp.read_text().replace(str(world["feats"]), str(feats)))
    utt = nan_in_utterance(feats, 5)
    args = ["train", "--train-data", feats, "--tokenizer", world["tok"] / "tokenizer.model", "--exp-dir",
            tmp_path / "exp", "--strategy", "ssgd", "--learners", "2", "--set", "model.num_layers=1",
            "--set", "model.hidden=8", "--set", "model.subsample=2", "--set", "train.max_frames=1500",
            "--set", "train.warmup_steps=2", "--set", "train.epochs=1", "--set", "dist.timeout_s=60"]
    try:
        r = subprocess.run([sys.executable, "-m", "asrtrain", *map(str, args)], capture_output=True,
                           text=True, timeout=240, stdin=subprocess.DEVNULL, env={**os.environ, "OMP_NUM_THREADS": "1"})
    except subprocess.TimeoutExpired:
        pytest.fail("the job did not end within 240 s of one learner's failure")
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("asrtrain: error:")]
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert len(errors) == 1, r.stderr[-3000:]
    assert f"feats.scp:6: features of '{utt}' hold NaN or Inf" in errors[0], errors
    assert errors[0].startswith("asrtrain: error: learner rank "), errors
    assert "the other learners stopped" in errors[0], errors
    assert not (tmp_path / "exp" / "final.pt").exists()

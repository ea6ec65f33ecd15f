"""Ctrl-C: one line naming the interruption and the fix, no traceback, and the last checkpoint kept
whole for --resume. The job runs as a real process in its own session; SIGINT goes to the whole process
group, as a terminal's Ctrl-C does (spawned learners get it too)."""

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.helpers.featfix import make_task

pytestmark = pytest.mark.slow  # training subprocesses interrupted with signals

SETTINGS = ["model.num_layers=1", "model.hidden=24", "model.subsample=2", "train.max_frames=1500",
            "train.warmup_steps=4", "train.epochs=1000", "train.checkpoint_every_steps=2"]


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return make_task(tmp_path_factory.mktemp("feats"), 48, 12)


@pytest.mark.parametrize("learners", [1, 2])
def test_ctrl_c_gives_one_line_and_keeps_the_checkpoint(task, tmp_path, learners):
    from asrtrain.train import checkpoint as ckpt

    tr, dev, tok = task
    exp = tmp_path / "exp"
    cmd = [sys.executable, "-m", "asrtrain", "train", "--train-data", str(tr), "--dev-data", str(dev),
           "--tokenizer", str(tok), "--exp-dir", str(exp), "--learners", str(learners),
           "--strategy", "single" if learners == 1 else "ssgd"]
    for s in SETTINGS:
        cmd += ["--set", s]
    # A job started in the background (`cmd &`, nohup, CI) inherits SIGINT ignored, and Python keeps it
    # ignored: restore the default a terminal's job has, or the SIGINT below would change nothing.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 600  # generous: a loaded 2-core machine; 10-30 s when idle
        while not (exp / "checkpoints" / "latest").exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no checkpoint within 600 s"
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 1, err
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and errors[0].startswith("asrtrain: error: interrupted"), errors
    assert "--resume" in errors[0]
    tag = ckpt.latest_tag(exp)
    for rank in range(learners):  # every learner's file of the tag `latest` names, whole (sha256)
        assert ckpt.load(exp, tag, rank)["step"] > 0


@pytest.mark.parametrize("learners,strategy", [(1, "single"), (2, "adpsgd")])
def test_stdout_holds_only_the_model_path(task, tmp_path, learners, strategy):
    """`model=$(asrtrain train ...)` reads one line: gloo's "[Gloo] Rank 0 is connected to ..." (printed
    on stdout by native code whenever a group is made, in every learner) goes to stderr. Under -q the
    console (every learner's, spawned ones included) shows no INFO lines, while train.log keeps them."""
    tr, dev, tok = task
    exp = tmp_path / "exp"
    cmd = [sys.executable, "-m", "asrtrain", "-q", "train", "--train-data", str(tr), "--dev-data", str(dev),
           "--tokenizer", str(tok), "--exp-dir", str(exp), "--learners", str(learners), "--strategy", strategy]
    for s in SETTINGS[:-2] + ["train.epochs=1"]:
        cmd += ["--set", s]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr
    assert res.stdout == f"{exp / 'final.pt'}\n", res.stdout
    assert " INFO " not in res.stderr, res.stderr
    if learners == 1:  # strategy single makes no process group: no gloo chatter on the terminal
        assert "[Gloo]" not in res.stderr, res.stderr
    logged = (exp / "train.log").read_text()
    assert "[0] INFO asrtrain.train: epoch 1: train_loss" in logged, logged
    if learners == 2:
        assert "[1] INFO asrtrain.features.dataset:" in logged, logged


# A Ctrl-C while the console script is still importing click and the command's modules: a finder that
# delivers SIGINT to the process in the middle of importing `asrtrain.cli` stands in for a terminal's
# Ctrl-C at that moment (deterministic, no timing).
_DURING_IMPORT = """
import os, signal, sys
import importlib.abc


class Interrupting(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == {name!r}:
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(10**7):  # the handler runs between bytecodes of this loop
                pass
        return None


sys.meta_path.insert(0, Interrupting())
sys.argv = ["asrtrain", "--help"]
from asrtrain.__main__ import run
run()
print("ran to the end")
"""


@pytest.mark.parametrize("module", ["asrtrain.cli", "click", "asrtrain.errors"])
def test_ctrl_c_during_the_first_imports_gives_the_one_line(tmp_path, module):
    code = _DURING_IMPORT.format(name=module)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and "ran to the end" not in r.stdout, r.stderr
    assert r.stderr.splitlines() == [r.stderr.splitlines()[-1]]
    assert r.stderr.startswith("asrtrain: error: interrupted (SIGINT / Ctrl-C)") and "--resume" in r.stderr


# A library that turns the KeyboardInterrupt raised inside it into an error of its own (matplotlib's C++
# converters raise "ValueError: Invalid affine transformation matrix" over it: seen once in 1,000 interrupts
# of a training, while it drew curves.png). The command's library function stands in for it here.
_TRANSLATED = """
import os, signal, sys
import asrtrain.distributed.topology as topo


def report(*args):
    try:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(10**7):  # the handler runs between bytecodes of this loop
            pass
    except KeyboardInterrupt:
        raise {error}("Invalid affine transformation matrix") from None
    return "ran to the end"


topo.report = report
sys.argv = ["asrtrain", "topology", "--learners", "4"]
from asrtrain.__main__ import run
run()
"""


@pytest.mark.parametrize("error", ["ValueError", "OSError", "RuntimeError"])
def test_an_error_a_library_makes_of_the_interrupt_is_the_interrupt(error):
    code = _TRANSLATED.format(error=error)
    if error == "OSError":  # one that names a file: the one-line OSError path
        code = code.replace('("Invalid affine transformation matrix")', '(13, "Permission denied", "/x")')
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and "ran to the end" not in r.stdout, r.stderr
    assert r.stderr.splitlines() == [r.stderr.splitlines()[-1]]
    assert r.stderr.startswith("asrtrain: error: interrupted (SIGINT / Ctrl-C)"), r.stderr


def test_ctrl_c_while_the_entry_point_loads_its_handler_is_held_for_it():
    """SIGINT is blocked while asrtrain.__main__ loads the handler's module, then delivered to it: a Ctrl-C
    at that moment (here: sent while `asrtrain.interrupts` is being found) gives the one line, not Python's
    KeyboardInterrupt traceback from the import line."""
    code = _DURING_IMPORT.format(name="asrtrain.interrupts")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert r.returncode == 1 and "Traceback" not in r.stderr, (r.returncode, r.stderr)
    assert r.stderr.startswith("asrtrain: error: interrupted (SIGINT / Ctrl-C)"), r.stderr

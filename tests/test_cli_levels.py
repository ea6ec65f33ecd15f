"""-q keeps the log to warnings and errors, the default shows progress (INFO), -v adds debug lines."""

import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # asrtrain subprocesses


def _lm_train(tmp_path, *flags):
    (tmp_path / "text").write_text("u1 a b c\nu2 b c d\n")
    cmd = [sys.executable, "-m", "asrtrain", *flags, "lm", "train", "--text", str(tmp_path / "text"),
           "--out", str(tmp_path / "lm")]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def test_quiet_default_and_verbose_log_levels(tmp_path):
    default, quiet, verbose = (_lm_train(tmp_path, *f) for f in ((), ("-q",), ("-v",)))
    for res in (default, quiet, verbose):
        assert res.returncode == 0 and res.stdout.strip().endswith("lm.arpa"), res.stderr
    assert " INFO asrtrain.lm.ngram: n-gram LM: 2 sentences" in default.stderr
    assert " INFO " not in quiet.stderr and quiet.stderr.strip() == ""
    assert " INFO asrtrain.lm.ngram" in verbose.stderr and " DEBUG " not in default.stderr
    both = _lm_train(tmp_path, "-v", "-q")
    assert both.returncode == 2 and "contradict" in both.stderr

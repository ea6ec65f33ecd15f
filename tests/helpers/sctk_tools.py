"""Helpers for the scoring tests: locate real sclite (Debian sctk) and run it."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

SCTK_DIRS = ("/usr/lib/sctk/bin",)  # Debian puts the tools here, behind the /usr/bin/sctk wrapper


def sctk_bin_dir():
    """Directory holding sclite and csrfilt.sh (with rfilter1), or None if sctk is not installed."""
    found = shutil.which("sclite")
    if found and shutil.which("csrfilt.sh"):
        return str(Path(found).parent)
    for d in SCTK_DIRS:
        if all(os.access(os.path.join(d, t), os.X_OK) for t in ("sclite", "csrfilt.sh", "rfilter1")):
            return d
    return None


@pytest.fixture(scope="session")
def sctk():
    d = sctk_bin_dir()
    if d is None:
        pytest.skip("real sclite is not installed (Debian package sctk: apt-get install -y sctk)")
    return d


def run_sctk(bindir, args, stdin=None):
    env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""))
    res = subprocess.run(args, input=stdin, capture_output=True, text=True, env=env, check=False)
    assert res.returncode == 0, f"{args[0]} failed: {res.stderr[-2000:]}"
    return res.stdout


def sclite_alignments(bindir, args):
    """Run ``sclite ... -o pralign stdout``; return [(id, C, S, D, I)] from its ``id:``/``Scores:`` lines."""
    out = run_sctk(bindir, [os.path.join(bindir, "sclite")] + list(args) + ["-o", "pralign", "stdout", "-f", "0"])
    rows, uid = [], None
    for line in out.splitlines():
        m = re.match(r"^id: \((.*)\)\s*$", line)
        if m:
            uid = m.group(1)
            continue
        m = re.match(r"^Scores: \(#C #S #D #I\) (\d+) (\d+) (\d+) (\d+)", line)
        if m:
            rows.append((uid,) + tuple(int(g) for g in m.groups()))
    assert rows, f"no alignments parsed from sclite output:\n{out[:2000]}"
    return rows


def sclite_pra(bindir, args):
    """Run ``sclite ... -o pralign stdout``; {id: (REF words, HYP words, attribute lines)} as printed."""
    out = run_sctk(bindir, [os.path.join(bindir, "sclite")] + list(args) +
                   ["-o", "pralign", "stdout", "-f", "0"])
    blocks, uid = {}, None
    for line in out.splitlines():
        m = re.match(r"^id: \((.*)\)\s*$", line)
        if m:
            uid = m.group(1)
            blocks[uid] = [None, None, []]
        elif uid is not None and line.startswith("REF:"):
            blocks[uid][0] = line[4:].split()
        elif uid is not None and line.startswith("HYP:"):
            blocks[uid][1] = line[4:].split()
        elif uid is not None and line.startswith("Attributes:"):
            blocks[uid][2].append(line.strip())
    assert blocks, f"no alignments parsed from sclite output:\n{out[:2000]}"
    return {u: tuple(b) for u, b in blocks.items()}

"""Limits checked where values enter, before anything is allocated or started.

An absurd size (``--set model.hidden=100000``, ``--beam-size 1000000``, ``--threads 100000``) used to reach
an allocation or a search before any check, and ended as a traceback, a ``MemoryError`` or a machine taken
for minutes. Each bound here is far above any sensible value and far below what exhausts a machine; the
error names the option and the fix. A file that is not a regular file (``/dev/zero``, a FIFO) named in a
table is refused by :func:`check_regular_file` before it is opened.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import Optional, Union

from asrtrain.errors import AsrError

log = logging.getLogger(__name__)

MAX_HIDDEN = 8192  # model.hidden, model.proj, model.att_dim: cells per direction
MAX_LAYERS = 64  # model.num_layers
MAX_STACK = 64  # model.stack, model.subsample
MAX_CONV_CHANNELS = 1024
MAX_VOCAB = 200_000  # tokenizer.vocab_size, model.num_targets
MAX_PARAMS = 500_000_000  # the model's estimated parameter count (2 GB of fp32 weights)
MAX_BEAM = 4096  # decode.beam_size, --beam-size
MAX_BATCH_FRAMES = 10_000_000  # train.max_frames, decode.batch_frames
MAX_BATCH_UTTS = 1_000_000  # train.max_utts
MAX_THREADS = 1024  # an error above this, or above THREADS_FACTOR x the usable cores
THREADS_FACTOR = 4
MAX_LINE_BYTES = 16 << 20  # one line of a table or a scored transcript
MAX_ALIGN_CELLS = 10_000_000  # ref words x hyp words of one scored utterance (the edit-distance table)


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, which cgroups and taskset narrow)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def check_threads(threads: int, option: str) -> int:
    """Refuse a negative thread count or one far above the usable cores (more than ``THREADS_FACTOR``
    times them, or more than ``MAX_THREADS``); warn above the cores. Returns ``threads``."""
    cores = usable_cores()
    if threads < 0:
        raise AsrError(f"{option} must be >= 0, got {threads}", fix="give 1 or more, or 0 for every core")
    if threads > MAX_THREADS or threads > THREADS_FACTOR * cores:
        raise AsrError(f"{option} {threads} is far more than the {cores} core(s) this process may use: the "
                       "threads would only contend for them", fix=f"give at most {cores} (0 means every core)")
    if threads > cores:
        log.warning("%s %d is more than the %d core(s) this process may use: threads contend for them",
                    option, threads, cores)
    return threads


def check_regular_file(path: Union[str, os.PathLike], what: str, table: Optional[Union[str, os.PathLike]] = None,
                       line: Optional[int] = None) -> None:
    """Refuse ``path`` when it exists and is not a regular file or a directory (a device such as /dev/zero,
    a FIFO, a socket): reading one never ends or never starts. A missing file is left to the caller's
    own error. ``table``/``line`` name the scp line that gave the path, when there is one."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return  # a directory: the caller's open fails at once with EISDIR, which names it
    kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(mode)
            else "a character device" if stat.S_ISCHR(mode) else "a block device" if stat.S_ISBLK(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
    where = f"{what} {path} is {kind}, not a regular file"
    fix = "name a regular file (for a stream, write it to a file first, or use a 'command |' entry)"
    if table is not None:
        raise AsrError(where, table, line, fix=fix)
    raise AsrError(where, path, fix=fix)


def check_line_length(text: str, path, line: int) -> None:
    """Refuse one line longer than ``MAX_LINE_BYTES`` characters (a file without newlines, a binary)."""
    if len(text) > MAX_LINE_BYTES:
        raise AsrError(f"a line {len(text):,} long, more than the {MAX_LINE_BYTES:,} a table or "
                       "transcript line may hold", path, line,
                       fix="split the file into one record per line (is it a binary or a file without newlines?)")


def estimated_params(input_dim: int, num_targets: int, stack: int, num_layers: int, hidden: int, proj: int,
                     att_dim: int) -> int:
    """An upper estimate of a BLSTM's parameter count from its config (before building it)."""
    feat = max(input_dim, 80) * stack
    out = proj if proj > 0 else hidden
    per_dir_first = 4 * hidden * (feat + out + 2) + (hidden * proj if proj else 0)
    per_dir = 4 * hidden * (2 * out + out + 2) + (hidden * proj if proj else 0)
    vocab = max(num_targets, 1)
    return 2 * per_dir_first + 2 * per_dir * max(0, num_layers - 1) + 2 * out * vocab + \
        4 * att_dim * (att_dim + 2 * out + vocab) * (1 if att_dim else 0)


def read_bounded(path: Path, limit: int, what: str) -> bytes:
    """The bytes of a regular file no larger than ``limit``; refuse special files and larger files."""
    check_regular_file(path, what)
    size = os.stat(path).st_size
    if size > limit:
        raise AsrError(f"{what} is {size:,} bytes, more than the {limit:,} accepted", path,
                       fix="check that this is the right file")
    return Path(path).read_bytes()


def check_alignable(n_ref: int, n_hyp: int, what: str, path=None, line: Optional[int] = None,
                    unit: str = "words") -> None:
    """Refuse aligning ``n_ref`` against ``n_hyp`` units when the edit-distance table would exceed
    ``MAX_ALIGN_CELLS`` cells (two 10 MB one-line files would need terabytes)."""
    if n_ref * max(1, n_hyp) > MAX_ALIGN_CELLS:
        raise AsrError(f"{what}: {n_ref:,} reference {unit} against {n_hyp:,} hypothesis {unit} would need an "
                       f"alignment table of {n_ref * max(1, n_hyp):,} cells, more than the "
                       f"{MAX_ALIGN_CELLS:,} accepted", path, line,
                       fix="score utterance-sized segments (one utterance a line, each with its id)")

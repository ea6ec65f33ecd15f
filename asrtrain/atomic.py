"""Atomic writes: write a temp file (or a whole temp directory) beside the target, then rename over it.

A full disk (``ENOSPC``) while writing is reported as one line, ``no space left writing FILE``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator, IO, Union

from asrtrain.errors import AsrError

PathLike = Union[str, os.PathLike]


def _process_umask() -> int:
    """The umask, read without changing it: ``os.umask(0)`` and back would, for that instant, give files
    created by other threads (the checkpoint writer, TensorBoard's) mode 0666."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return _UMASK_AT_IMPORT


_UMASK_AT_IMPORT = os.umask(0o022)
os.umask(_UMASK_AT_IMPORT)


def check_out_is_not_input(data_dir: PathLike, out_dir: PathLike, why: str = "") -> None:
    """Refuse an OUT_DIR that is DATA_DIR (compared as resolved paths): writing it would replace the input.
    ``why`` says what would be lost, e.g. "its text would replace the reference transcripts"."""
    if Path(out_dir).resolve() == Path(data_dir).resolve():
        raise AsrError("OUT_DIR must differ from DATA_DIR" + (f" ({why})" if why else ""), out_dir,
                       fix="give a new output directory")


def no_space(path: PathLike) -> AsrError:
    """The one-line error for a full disk while writing ``path``."""
    return AsrError("no space left writing this file", path,
                    fix="free disk space (df -h shows which file system is full) and run again")


@contextlib.contextmanager
def reporting_no_space(path: PathLike) -> Iterator[None]:
    """Turn ``OSError`` ENOSPC (and EDQUOT) raised inside the block into :func:`no_space` for ``path``."""
    try:
        yield
    except OSError as err:
        if err.errno in (errno.ENOSPC, errno.EDQUOT):
            raise no_space(path) from None
        raise


@contextlib.contextmanager
def atomic_open(path: Path, mode: str = "w", encoding: str = "utf-8") -> Iterator[IO]:
    """Open a temp file beside ``path``; on success it replaces ``path`` atomically."""
    path = Path(path)
    if path.is_dir():  # named here: os.replace would name the temp file
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    with reporting_no_space(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=str(path.parent))
    os.chmod(tmp, 0o666 & ~_process_umask())  # mkstemp makes 0600; results are ordinary files
    try:
        with reporting_no_space(path):
            kwargs = {} if "b" in mode else {"encoding": encoding}
            with os.fdopen(fd, mode, **kwargs) as fh:
                yield fh
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    with atomic_open(path, "w") as fh:
        fh.write(text)


def atomic_copy(src: PathLike, dst: PathLike) -> None:
    """Copy ``src`` to ``dst`` atomically: a reader of ``dst`` sees the old file or the whole new one."""
    try:
        fin = open(src, "rb")
    except OSError as err:
        raise AsrError(f"cannot read: {err.strerror}", src, fix="check the path") from None
    with fin, atomic_open(Path(dst), "wb") as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)


# ---------------------------------------------------------------------------------------------------------
# Whole directories: build ``.NAME.new`` beside NAME, then swap it in

def staging_dir(out: PathLike) -> Path:
    """A fresh, empty ``.NAME.new`` beside ``out`` to build the new output in (a leftover is removed)."""
    out = Path(out)
    new = out.parent / f".{out.name}.new"
    recover_dir(out)
    with reporting_no_space(new):
        new.mkdir(parents=True)
    return new


def recover_dir(out: PathLike) -> None:
    """Undo what a killed :func:`swap_dir` or build left: restore ``.NAME.old`` if NAME is missing,
    and remove a stale ``.NAME.new``."""
    out = Path(out)
    old, new = out.parent / f".{out.name}.old", out.parent / f".{out.name}.new"
    if old.is_dir():
        if out.exists():
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(old, out)
    if new.exists():
        shutil.rmtree(new, ignore_errors=True)


def swap_dir(new: PathLike, out: PathLike) -> None:
    """Replace directory ``out`` by ``new`` (two renames; :func:`recover_dir` mends a kill between them)."""
    new, out = Path(new), Path(out)
    old = out.parent / f".{out.name}.old"
    if out.exists():
        if old.exists():
            shutil.rmtree(old)
        os.replace(out, old)
    os.replace(new, out)
    shutil.rmtree(old, ignore_errors=True)

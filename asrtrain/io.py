"""Atomic writes: write a temp file in the same directory, fsync, then rename over the target."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Iterator, IO


@contextlib.contextmanager
def atomic_open(path: Path, mode: str = "w", encoding: str = "utf-8") -> Iterator[IO]:
    """Open a temp file beside ``path``; on success it replaces ``path`` atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=str(path.parent))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; results are ordinary files
    try:
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


def atomic_torch_save(obj, path: Path) -> None:
    import torch
    with atomic_open(path, "wb") as fh:
        torch.save(obj, fh)

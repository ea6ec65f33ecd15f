"""One error type for bad input: a one-line message naming the file, the line and the fix.

Library code raises :class:`AsrError`; the CLI prints ``asrtrain: error: <message>`` and exits 1,
never a traceback.
"""

from __future__ import annotations

from typing import Optional, Union
import os


class AsrError(Exception):
    """Bad input or an impossible request, reported as one line.

    Args:
        message: what is wrong.
        path: the file at fault, if any.
        line: 1-based line number in ``path``, if any.
        fix: what the user should do about it.
    """

    def __init__(self, message: str, path: Optional[Union[str, os.PathLike]] = None,
                 line: Optional[int] = None, fix: Optional[str] = None):
        self.message = message
        self.path = None if path is None else str(path)
        self.line = line
        self.fix = fix
        super().__init__(self.render())

    def render(self) -> str:
        where = ""
        if self.path is not None:
            where = self.path if self.line is None else f"{self.path}:{self.line}"
            where += ": "
        text = f"{where}{self.message}"
        if self.fix:
            text += f" (fix: {self.fix})"
        return " ".join(text.split("\n"))

"""What transcription returns: a file's :class:`Result` and its timed :class:`Word` s."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Tuple


@dataclass
class Word:
    word: str
    start: float  # seconds from the start of the file
    end: float


@dataclass
class Result:
    """One file's transcript: ``text``, timed ``words``, the ``file`` and its ``segments`` (s, s)."""
    text: str
    words: List[Word] = field(default_factory=list)
    file: Optional[str] = None
    segments: List[Tuple[float, float]] = field(default_factory=list)

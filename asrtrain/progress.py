"""Progress of a long stage: a tqdm bar on a terminal, otherwise a log line now and then (batch jobs'
logs stay short). One class for every stage that counts items (feature extraction, synthesis)."""

from __future__ import annotations

import logging
import sys
import time


class Progress:
    """``update(n)`` as items finish; ``close()`` at the end.

    Off a terminal a line ``DESC: DONE/TOTAL UNIT (P%)`` is logged each time another ``every_frac`` of
    the total is done or ``every_s`` seconds have passed since the last line, whichever comes first.
    ``total`` may be an estimate (the percentage is capped at 100).
    """

    def __init__(self, total: int, desc: str, log: logging.Logger, unit: str = "utt",
                 every_frac: float = 0.1, every_s: float = 30.0):
        self.total, self.done, self.desc, self.unit, self.log = max(1, total), 0, desc, unit, log
        self.every_frac, self.every_s = every_frac, every_s
        self.next_frac, self.last = every_frac, time.monotonic()
        self.bar = None
        if sys.stderr.isatty():
            from tqdm import tqdm
            self.bar = tqdm(total=total, desc=desc, unit=unit, dynamic_ncols=True)

    def update(self, n: int) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
            return
        frac = self.done / self.total
        if frac >= self.next_frac or time.monotonic() - self.last > self.every_s:
            self.last = time.monotonic()
            while self.next_frac <= frac:
                self.next_frac += self.every_frac
            self.log.info("%s: %d/%d %s (%d%%)", self.desc, self.done, self.total, self.unit,
                          min(100, round(100 * frac)))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def console_log(level: int, fmt: str, datefmt: str = "%H:%M:%S") -> None:
    """Log to stderr from ``level`` up (``-q``: WARNING, default INFO, ``-v``: DEBUG), as
    ``logging.basicConfig`` would (and, like it, nothing when the root logger has handlers already: under
    pytest, or a second call), but with the level on the console handler too. A learner's ``train.log``
    handler wants INFO lines whatever the console shows and lowers the root logger to INFO; the console
    handler's own level keeps those lines off a ``-q`` console."""
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(fmt, datefmt))
    handler.setLevel(level)
    root.addHandler(handler)
    root.setLevel(level)

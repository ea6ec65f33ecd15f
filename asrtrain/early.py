"""Ctrl-C before :func:`asrtrain.cli.main` has taken over: the one line and the end of the process.

Installed by :mod:`asrtrain.__main__` as its first act and replaced by ``cli.main``. A module of its own so
that both see the same function whether the entry was the console script or ``python -m asrtrain`` (which
runs ``__main__.py`` as ``__main__``, not as ``asrtrain.__main__``).
"""

import os
import sys

LINE = ("asrtrain: error: interrupted (SIGINT / Ctrl-C) (fix: run it again; asrtrain train continues from "
        "the last checkpoint with --resume)\n")


def on_sigint(signum, frame) -> None:
    """Nothing has been written yet: say so and end, instead of raising a KeyboardInterrupt inside the
    imports, where Python can swallow it (importlib's module-lock callback) or print a traceback."""
    try:
        sys.stderr.write(LINE)
        sys.stderr.flush()
    finally:
        os._exit(1)

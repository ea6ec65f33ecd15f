"""Ctrl-C: the handlers and what they remember.

:func:`on_sigint_early` is installed by :mod:`asrtrain.__main__` as its first act, until
:func:`asrtrain.cli.main` takes over with :func:`on_sigint`. A module of its own, importing only ``os`` and
``sys``, so that it is cheap to import before anything else, and so that both see the same functions whether
the entry was the console script or ``python -m asrtrain`` (which runs ``__main__.py`` as ``__main__``).
"""

import os
import sys

LINE = ("asrtrain: error: interrupted (SIGINT / Ctrl-C) (fix: run it again; asrtrain train continues from "
        "the last checkpoint with --resume)\n")
_received = False


def received() -> bool:
    """Whether a Ctrl-C reached this process's handler: an error that surfaces after it is its consequence
    (a library can turn the KeyboardInterrupt raised inside it into an error of its own: matplotlib's C++
    converters raise ``ValueError: Invalid affine transformation matrix`` over it), so it is reported as the
    interrupt."""
    return _received


def on_sigint_early(signum, frame) -> None:
    """Before the command's modules are loaded nothing has been written: say so and end, instead of raising a
    KeyboardInterrupt inside the imports, where Python can swallow it (importlib's module-lock callback) or
    print a traceback."""
    try:
        sys.stderr.write(LINE)
        sys.stderr.flush()
    finally:
        os._exit(1)


def on_sigint(signum, frame) -> None:
    """Python's KeyboardInterrupt, remembered (:func:`received`), except inside the import machinery: raised
    in importlib's module-lock callback it is swallowed ("Exception ignored in ... _get_module_lock") and can
    leave the import lock held, so the run goes on and later hangs (CPython 3.11). There the signal is sent
    again a moment later, once the import is done."""
    global _received
    f = frame
    while f is not None:
        if f.f_code.co_filename.startswith("<frozen importlib"):
            import signal
            import threading

            threading.Timer(0.02, os.kill, (os.getpid(), signal.SIGINT)).start()
            return
        f = f.f_back
    _received = True
    raise KeyboardInterrupt

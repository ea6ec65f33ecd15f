"""``asrtrain`` (the console script) and ``python -m asrtrain``.

Ctrl-C is ours from the first lines here: until :func:`asrtrain.cli.main` takes over, a SIGINT prints the
one line and ends the process (:func:`asrtrain.interrupts.on_sigint_early`). Only the interpreter's own start-up, before this
module runs, is left to Python's default.
"""

import _signal  # built in, loaded at start-up: `signal` would first import enum (2 ms without our handler)

from asrtrain import interrupts


def run() -> None:
    """The console entry point: guard the imports, then hand over to :func:`asrtrain.cli.main`."""
    if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:  # SIG_IGN (a background job) stays
        _signal.signal(_signal.SIGINT, interrupts.on_sigint_early)
    from asrtrain.cli import main

    main()


if __name__ == "__main__":
    run()

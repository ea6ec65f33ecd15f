"""``asrtrain`` (the console script) and ``python -m asrtrain``: the entry point, not a module to import.

Ctrl-C is ours from the first line here. SIGINT is blocked (held, not lost) while the handler's module is
loaded; then :func:`asrtrain.interrupts.on_sigint_early` is installed and the signal unblocked, so a Ctrl-C
that came in between is delivered to it at once: one line, and the process ends (nothing has been written).
:func:`asrtrain.cli.main` takes over before the command runs. Only the interpreter's own start-up and its
search for the package, before this module runs, are left to Python's default.
"""

import _signal  # built in, loaded at start-up: `signal` would first import enum (2 ms without a handler)

_signal.pthread_sigmask(_signal.SIG_BLOCK, {_signal.SIGINT})
try:
    from asrtrain import interrupts

    if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:  # SIG_IGN (a background job) stays
        _signal.signal(_signal.SIGINT, interrupts.on_sigint_early)
finally:
    _signal.pthread_sigmask(_signal.SIG_UNBLOCK, {_signal.SIGINT})


def run() -> None:
    """The console entry point: hand over to :func:`asrtrain.cli.main` once its modules are loaded."""
    from asrtrain.cli import main

    main()


if __name__ == "__main__":
    run()

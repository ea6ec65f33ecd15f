"""The ``asrtrain`` command: a click group whose subcommands load lazily.

Each subcommand lives in :mod:`asrtrain.commands.<name>` and only parses options before calling one
library function. Loading lazily keeps ``asrtrain --help`` instant (torch is never imported for it).
"""

from __future__ import annotations

import importlib
import logging
import os
import signal
import sys
from pathlib import Path

import click

from asrtrain import interrupts
from asrtrain.errors import AsrError

# name -> (module, attribute, one-line help shown by `asrtrain --help` without importing the module)
SUBCOMMANDS = {
    "prepare": ("asrtrain.commands.prepare", "prepare", "Prepare a corpus into Kaldi data dirs (synth, an4, swbd, eval2000, fisher)."),
    "data": ("asrtrain.commands.data", "data", "Validate, fix, subset, split or speed-perturb a Kaldi data dir."),
    "features": ("asrtrain.commands.features", "features", "Compute Kaldi-compatible fbank features and CMVN stats."),
    "tokenizer": ("asrtrain.commands.tokenizer", "tokenizer", "Train or apply a sentencepiece tokenizer."),
    "lm": ("asrtrain.commands.lm", "lm", "Train a word n-gram LM (ARPA) for lexicon decoding."),
    "train": ("asrtrain.commands.train", "train", "Train a BLSTM acoustic model (single, ssgd, adpsgd, h-adpsgd, periodic; --dp; CPU or GPU)."),
    "decode": ("asrtrain.commands.decode", "decode", "Decode a data dir with a trained model (greedy, beam, or lexicon + word LM)."),
    "pack": ("asrtrain.commands.pack", "pack", "Pack an exp dir's model into a self-contained dir (weights, tokenizer, CMVN, LM, card)."),
    "export": ("asrtrain.commands.export", "export", "Export a model as ONNX or TorchScript for deployment (checked against torch)."),
    "transcribe": ("asrtrain.commands.transcribe", "transcribe", "Transcribe raw audio files with a trained model (text, json or ctm)."),
    "tune-lm": ("asrtrain.commands.tune", "tune_lm", "Choose the LM weight and word bonus of lexicon decoding on a dev set."),
    "forward": ("asrtrain.commands.forward", "forward", "Write log-likelihoods as a Kaldi ark for hybrid decoding."),
    "score": ("asrtrain.commands.score", "score", "Score hypotheses: Kaldi text, or Hub5 stm/ctm with a GLM."),
    "topology": ("asrtrain.commands.topology", "topology", "Print the spectral gap of an ADPSGD mixing schedule."),
    "average": ("asrtrain.commands.average", "average", "Average the last K checkpoints of an exp dir."),
    "simulate": ("asrtrain.commands.simulate", "simulate", "Predict epoch time and speed-up of the strategies on 1..1024 learners."),
}


class LazyGroup(click.Group):
    """A click group that imports a subcommand's module only when it is run."""

    def list_commands(self, ctx):
        return sorted(SUBCOMMANDS)

    def get_command(self, ctx, name):
        if name not in SUBCOMMANDS:
            return None
        module, attr, _ = SUBCOMMANDS[name]
        return getattr(importlib.import_module(module), attr)

    def format_commands(self, ctx, formatter):
        rows = [(name, SUBCOMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def make_context(self, *args, **kwargs):
        try:
            return super().make_context(*args, **kwargs)
        except KeyboardInterrupt:  # click would print "Aborted!"
            interrupted()

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:  # in start-up, or a command that has no line of its own for it
            interrupted()
        except Exception as err:
            if isinstance(err, AsrError) and err.message.startswith("interrupted"):
                leave(f"asrtrain: error: {err.render()}", 1)
            if interrupts.received():  # the error came of the Ctrl-C (see asrtrain.interrupts.received)
                interrupted()
            # an AsrError, or an OSError naming a file or a full disk wherever it happens: one line
            one_line = err.render() if isinstance(err, AsrError) else (
                os_error_line(err) if isinstance(err, OSError) else None)
            if one_line is None:
                raise
            click.echo(f"asrtrain: error: {one_line}", err=True)
            ctx.exit(1)


def os_error_line(err: OSError):
    """One line for an OSError naming a file, or for a full disk (ENOSPC/EDQUOT); None for other ones."""
    import errno

    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        what = f"writing {err.filename}" if err.filename else "writing output"
        return AsrError(f"no space left on device {what}",
                        fix="free disk space (df -h shows which file system is full) and run again").render()
    if err.filename is None or not err.strerror:
        return None
    path = Path(err.filename)
    if err.errno == errno.EEXIST and path.exists() and not path.is_dir():  # mkdir over a file
        message, fix = "exists and is not a directory", "give a directory path, or move the file away"
    elif err.errno == errno.ENOTDIR:  # something under a file: name the file
        blocking = next((q for q in reversed(path.parents) if q.exists() and not q.is_dir()), None)
        if blocking is not None:
            return AsrError("is a file where a directory was expected", blocking,
                            fix="give an output path under a directory, or move the file away").render()
        message, fix = "a component of this path is a file, not a directory", "give a path under a directory"
    elif err.errno == errno.EISDIR:
        message, fix = "is a directory where a file was expected", "give the path of a file"
    elif err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        message, fix = err.strerror, "check the permissions of the path and its directory (ls -ld)"
    else:
        message, fix = err.strerror, "check the path and its permissions"
    return AsrError(message, err.filename, fix=fix).render()


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", is_flag=True, help="Debug log output (by default: progress and results).")
@click.option("-q", "--quiet", is_flag=True, help="Warnings and errors only.")
@click.version_option(package_name="asrtrain")
def cli(verbose: bool, quiet: bool) -> None:
    """asrtrain: Kaldi-style recipes, BLSTM acoustic models, distributed SGD, Hub5 scoring.

    -v / -q go before the subcommand: asrtrain -q decode ..."""
    if verbose and quiet:
        raise click.UsageError("-v and -q contradict each other; give one")
    level = logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO
    from asrtrain.progress import console_log
    console_log(level, "%(asctime)s %(levelname)s %(name)s: %(message)s")


def interrupted() -> None:
    """Ctrl-C anywhere outside a command's own handling: the one line, exit status 1."""
    leave(interrupts.LINE.rstrip("\n"), 1)


def leave(line: str, code: int) -> None:
    """Print ``line`` on stderr and end the process now, ignoring any further Ctrl-C. After an interrupt
    the interpreter's own shutdown is skipped: threads a library left behind (gloo's, TensorBoard's, a
    data loader's) may still run native code, and module teardown under them can crash the process after
    the line. Files are already closed or atomically replaced: nothing is lost."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(code)


def main() -> None:
    """The console entry point. Ctrl-C at any moment ends with one line and exit status 1: at start-up
    and in a command (:func:`interrupted`); once the command has returned (its result printed) a late
    Ctrl-C is ignored and the exit status is the command's."""
    if signal.getsignal(signal.SIGINT) in (signal.default_int_handler, interrupts.on_sigint_early):
        signal.signal(signal.SIGINT, interrupts.on_sigint)  # SIG_IGN (a background job) stays
    try:
        cli(prog_name="asrtrain")
    except KeyboardInterrupt:
        interrupted()
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


if __name__ == "__main__":
    main()

"""``asrtrain prepare <corpus>``: corpus directory in, Kaldi data dirs out (one module per corpus)."""

from __future__ import annotations

import importlib

import click

CORPORA = {
    "an4": ("asrtrain.commands.prepare_an4", "an4", "CMU AN4 (an4_sphere): real read speech, train/dev/test."),
    "synth": ("asrtrain.commands.prepare_synth", "synth", "Synthesise the embedded espeak-ng corpus."),
    "swbd": ("asrtrain.commands.prepare_swbd", "swbd", "Switchboard-1 Release 2 (LDC97S62) training data."),
    "eval2000": ("asrtrain.commands.prepare_swbd", "eval2000", "Hub5-2000 (LDC2002S09 + LDC2002T43) test data."),
    "fisher": ("asrtrain.commands.prepare_swbd", "fisher", "Fisher English (LDC2004/2005 S13 + T19) training data."),
}


class _LazyCorpora(click.Group):
    def list_commands(self, ctx):
        return sorted(CORPORA)

    def get_command(self, ctx, name):
        if name not in CORPORA:
            return None
        module, attr, _ = CORPORA[name]
        return getattr(importlib.import_module(module), attr)

    def format_commands(self, ctx, formatter):
        with formatter.section("Corpora"):
            formatter.write_dl([(n, CORPORA[n][2]) for n in self.list_commands(ctx)])


@click.group(cls=_LazyCorpora)
def prepare() -> None:
    """Prepare a corpus into Kaldi data dirs (idempotent: a .done marker skips finished work)."""

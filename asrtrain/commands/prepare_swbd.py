"""``asrtrain prepare swbd`` and ``asrtrain prepare eval2000``: thin click wrappers over the library."""

from __future__ import annotations

import click


@click.command("swbd")
@click.argument("swbd_dir", type=click.Path(file_okay=False))
@click.argument("out_dir", type=click.Path(file_okay=False))
@click.option("--trans-dir", type=click.Path(file_okay=False), default=None,
              help="The swb_ms98_transcriptions directory (default: looked for inside SWBD_DIR, "
                   "SWBD_DIR/transcriptions, or beside SWBD_DIR).")
@click.option("--sph2pipe", default=None,
              help="sph2pipe program for shorten-compressed audio (default: sph2pipe on PATH).")
@click.option("--dev-utts", type=int, default=4000, show_default=True,
              help="The first N utterances (sorted ids) form train_dev, as in Kaldi's run.sh.")
@click.option("--max-dup", type=int, default=300, show_default=True,
              help="train_nodup keeps about N copies of a transcript seen N or more times "
                   "(Kaldi's remove_dup_utts.sh).")
@click.option("--keep-noise/--drop-noise", default=True, show_default=True,
              help="Keep [noise], [laughter], [vocalized-noise] as words (Kaldi), or delete them.")
@click.option("--acronyms/--no-acronyms", default=True, show_default=True,
              help="Map acronyms to Fisher's convention (ibm -> i._b._m.) as Kaldi's s5c does; "
                   "needs sw-ms98-dict.text.")
@click.option("--force", is_flag=True, help="Redo the work even if it is marked done with the same options.")
def swbd(swbd_dir, out_dir, trans_dir, sph2pipe, dev_utts, max_dup, keep_noise, acronyms, force):
    """Switchboard-1 Release 2 (LDC97S62) -> OUT_DIR/{train,train_dev,train_nodev,train_nodup}."""
    from asrtrain.corpora.swbd import prepare_swbd
    dirs = prepare_swbd(swbd_dir, out_dir, trans_dir=trans_dir, sph2pipe=sph2pipe, dev_utts=dev_utts,
                        max_dup=max_dup, keep_noise=keep_noise, acronyms=acronyms, force=force)
    click.echo(" ".join(str(d) for d in dirs.values()))


@click.command("eval2000")
@click.argument("audio_dir", type=click.Path(file_okay=False))
@click.argument("text_dir", type=click.Path(file_okay=False))
@click.argument("out_dir", type=click.Path(file_okay=False))
@click.option("--sph2pipe", default=None,
              help="sph2pipe program for shorten-compressed audio (default: sph2pipe on PATH).")
@click.option("--force", is_flag=True, help="Redo the work even if it is marked done with the same inputs.")
def eval2000(audio_dir, text_dir, out_dir, sph2pipe, force):
    """Hub5-2000: AUDIO_DIR = LDC2002S09 hub5e_00, TEXT_DIR = LDC2002T43 -> data dir OUT_DIR (+ stm, glm)."""
    from asrtrain.corpora.eval2000 import prepare_eval2000
    click.echo(str(prepare_eval2000(audio_dir, text_dir, out_dir, sph2pipe=sph2pipe, force=force)))


@click.command("fisher")
@click.argument("fisher_dirs", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.argument("out_dir", type=click.Path(file_okay=False))
@click.option("--sph2pipe", default=None,
              help="sph2pipe program for shorten-compressed audio (default: sph2pipe on PATH).")
@click.option("--keep-noise/--drop-noise", default=True, show_default=True,
              help="Keep [noise] and [laughter] as words (Kaldi), or delete them.")
@click.option("--combine-with", type=click.Path(file_okay=False), default=None,
              help="A data dir (e.g. data/train_nodup) to combine with Fisher into --combined-dir.")
@click.option("--combined-dir", type=click.Path(file_okay=False), default=None,
              help="Where the union with --combine-with goes (e.g. data/train_nodup_fisher).")
def fisher(fisher_dirs, out_dir, sph2pipe, keep_noise, combine_with, combined_dir):
    """Fisher English: FISHER_DIRS = LDC2004S13 LDC2005S13 LDC2004T19 LDC2005T19 -> data dir OUT_DIR."""
    from asrtrain.corpora.fisher import prepare_fisher
    click.echo(str(prepare_fisher(list(fisher_dirs), out_dir, sph2pipe=sph2pipe, keep_noise=keep_noise,
                                  combine_with=combine_with, combined_dir=combined_dir)))

"""``asrtrain data validate|info|fix|subset|split``: Kaldi's validate/fix/subset/split data-dir tools."""

from __future__ import annotations

from pathlib import Path

import click


@click.group()
def data() -> None:
    """Validate, fix, subset, split or speed-perturb a Kaldi data dir (files sorted with LC_ALL=C)."""


@data.command(short_help="Check a data dir (validate_data_dir.sh).")
@click.argument("data_dir", type=click.Path(path_type=Path))
@click.option("--no-audio", is_flag=True, help="Skip checking that audio files exist and segments fit them.")
@click.option("--no-text", is_flag=True,
              help="Accept a dir without a text file (a dir with no transcripts), as validate_data_dir.sh "
                   "--no-text; a text file that is there is still checked.")
def validate(data_dir: Path, no_audio: bool, no_text: bool) -> None:
    """Check DATA_DIR as validate_data_dir.sh does; exit 1 with the first problem (others are logged)."""
    from asrtrain.data.validate import validate as run
    d = run(data_dir, audio=not no_audio, text=not no_text)
    click.echo(f"{data_dir}: OK ({len(d.utt2spk)} utterances, {len(d.spk2utt)} speakers, "
               f"{len(d.wav_scp)} recordings)")


@data.command(short_help="Counts, sample rate and hours of a data dir.")
@click.argument("data_dir", type=click.Path(path_type=Path))
@click.option("--key", type=click.Choice(["utterances", "speakers", "recordings", "sample_rate", "hours"]),
              help="Print only this value (for scripts, e.g. rate=$(asrtrain data info DIR --key sample_rate)).")
def info(data_dir: Path, key) -> None:
    """Print what DATA_DIR holds: utterances, speakers, recordings, the audio's sample rate (read from its
    first recordings; mixed rates are an error) and hours (segments, else audio headers; pipes are run).
    DATA_DIR is validated first (tables only)."""
    from asrtrain.data.info import describe
    from asrtrain.data.validate import validate as check
    facts = describe(data_dir, with_hours=key in (None, "hours"), data=check(data_dir, audio=False))
    if key is not None:
        click.echo(facts[key])
        return
    for k, v in facts.items():
        click.echo(f"{k}: {'unknown' if v is None else v}")


@data.command(short_help="Repair a data dir in place (fix_data_dir.sh).")
@click.argument("data_dir", type=click.Path(path_type=Path))
@click.option("--no-audio", is_flag=True, help="Do not drop recordings whose audio file is missing.")
def fix(data_dir: Path, no_audio: bool) -> None:
    """Repair DATA_DIR in place as fix_data_dir.sh does.

    The replaced files are kept in DATA_DIR/.backup; a later fix never overwrites it (unlike
    fix_data_dir.sh) but keeps its own in DATA_DIR/.backup.1, .backup.2, ... A dir that needs no fix is
    left untouched (no backup). A fix that would drop every utterance is an error and leaves DATA_DIR as
    it was.
    """
    from asrtrain.data.validate import fix as run
    report = run(data_dir, audio=not no_audio)
    if report.report_path is None:
        click.echo(f"{data_dir}: nothing to fix ({report.utts_in} utterances); no file changed, no backup")
        return
    click.echo(f"{data_dir}: {report.utts_in} utterances in, {report.utts_out} out; "
               f"report in {report.report_path}; replaced files kept in {report.backup_path}")


@data.command(short_help="Write a subset (subset_data_dir.sh).")
@click.argument("data_dir", type=click.Path(path_type=Path))
@click.argument("out_dir", type=click.Path(path_type=Path))
@click.option("--utt-list", type=click.Path(path_type=Path), help="Keep the utterances listed in this file.")
@click.option("--spk-list", type=click.Path(path_type=Path),
              help="Keep all utterances of the listed speakers.")
@click.option("--first", type=int, help="Keep the first N utterances (sorted order); N above the dir's count "
              "is an error, as in subset_data_dir.sh.")
@click.option("--last", type=int, help="Keep the last N utterances (sorted order); N at most the count.")
def subset(data_dir: Path, out_dir: Path, utt_list, spk_list, first, last) -> None:
    """Write a subset of DATA_DIR to OUT_DIR (subset_data_dir.sh); give exactly one selector. OUT_DIR must
    differ from DATA_DIR, and a selection of no utterances is an error."""
    from asrtrain.data.subsets import subset as run
    d = run(data_dir, out_dir, utt_list=utt_list, first=first, last=last, spk_list=spk_list)
    click.echo(f"{out_dir}: {len(d.utt2spk)} utterances")


@data.command(short_help="Split by speaker (split_data.sh).")
@click.argument("data_dir", type=click.Path(path_type=Path))
@click.argument("num_splits", type=int)
def split(data_dir: Path, num_splits: int) -> None:
    """Split DATA_DIR by speaker into DATA_DIR/splitN/1..N (split_data.sh)."""
    from asrtrain.data.subsets import split as run
    outs = run(data_dir, num_splits)
    click.echo(f"{data_dir}: split into {len(outs)} parts under {outs[0].parent}")


@data.command("perturb-speed", short_help="Speed-perturbed copies (perturb_data_dir_speed.sh, 3-way).")
@click.argument("data_dir", type=click.Path(path_type=Path))
@click.argument("out_dir", type=click.Path(path_type=Path))
@click.option("--factors", default="0.9,1.0,1.1", show_default=True,
              help="Comma-separated speed factors; each but 1.0 gives a copy with ids prefixed sp<factor>-.")
@click.option("--always-include-prefix", is_flag=True, help="Prefix factor 1.0's ids too (sp1.0-).")
@click.option("--sox", is_flag=True,
              help="Write Kaldi's wav.scp pipes (... sox -t wav - -t wav - speed F |; needs sox) instead of "
                   "reco2speed, which only asrtrain's reader applies.")
def perturb_speed(data_dir: Path, out_dir: Path, factors: str, always_include_prefix: bool, sox: bool) -> None:
    """Write speed-perturbed copies of DATA_DIR (pitch and tempo change together, as sox speed) to OUT_DIR."""
    from asrtrain.data.perturb import perturb_speed as run
    d = run(data_dir, out_dir, factors, always_prefix=always_include_prefix, sox=sox)
    click.echo(f"{out_dir}: {len(d.utt2spk)} utterances, {len(d.spk2utt)} speakers")

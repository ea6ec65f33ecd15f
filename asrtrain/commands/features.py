"""``asrtrain features DATA_DIR OUT_DIR``: Kaldi fbank features, ark/scp, CMVN stats."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Tuple

import click


# Where a default differs from Kaldi's compute-fbank-feats (or the key is not one of its options).
KALDI_DIFFERS = {
    "kind": "asrtrain computes fbank only",
    "sample_rate": "Kaldi's --sample-frequency",
    "num_mel_bins": "Kaldi: 23",
    "dither": "Kaldi: 1.0; ours is seeded by the utterance id; recipes/an4 sets 1.0",
    "cmvn": "Kaldi: apply-cmvn, a separate step; global | speaker | none",
    "cmvn_norm_vars": "Kaldi: apply-cmvn --norm-vars, default false",
    "resample": "Kaldi: --allow-downsample / --allow-upsample, both false",
}


def _options_epilog() -> str:
    """The feature options with their defaults, for --help (click keeps a \\b paragraph's lines)."""
    from dataclasses import fields

    from asrtrain.config import FeatureConfig

    lines = ["\b", "Feature options (--set KEY=VALUE or --conf) and their defaults. The names are",
             "Kaldi's compute-fbank-feats options (- as _), and so are the defaults unless a note says:"]
    defaults = FeatureConfig()
    for f in fields(defaults):
        value = getattr(defaults, f.name)
        value = str(value).lower() if isinstance(value, bool) else value
        note = KALDI_DIFFERS.get(f.name)
        lines.append(f"  {f.name}={value}" + (f"  ({note})" if note else ""))
    return "\n".join(lines)


@click.command(epilog=_options_epilog())
@click.argument("data_dir", type=click.Path(path_type=Path))
@click.argument("out_dir", type=click.Path(path_type=Path))
@click.option("--nj", type=int, default=1, show_default=True,
              help="Parallel jobs (processes, one thread each).")
@click.option("--conf", "--config", "conf", type=click.Path(path_type=Path), default=None,
              help="YAML file of feature options (FeatureConfig keys, Kaldi names, e.g. num_mel_bins: 80).")
@click.option("--set", "overrides", multiple=True, metavar="[features.]KEY=VALUE",
              help="Override one feature option, e.g. --set features.sample_rate=8000 (as train --set "
                   "spells it) or --set sample_rate=8000 (repeatable).")
@click.option("--skip-bad", is_flag=True,
              help="Drop bad utterances and list them in OUT_DIR/bad_utts.txt instead of stopping.")
def features(data_dir: Path, out_dir: Path, nj: int, conf: Optional[Path], overrides: Tuple[str, ...],
             skip_bad: bool) -> None:
    """Compute fbank features of DATA_DIR into OUT_DIR (a complete data dir with feats.scp and CMVN)."""
    from asrtrain.config import FeatureConfig
    from asrtrain.config.file import load_section
    from asrtrain.errors import AsrError
    from asrtrain.features.archive import compute_features
    if nj < 1:
        raise AsrError(f"--nj must be >= 1, got {nj}")
    cfg = load_section(FeatureConfig, conf, overrides, section="features")
    s = compute_features(data_dir, out_dir, cfg, nj=nj, skip_bad=skip_bad)
    state = ("already complete" if s.skipped
             else f"{s.audio_seconds:.1f} s of audio, {s.x_realtime:.0f}x real time")
    click.echo(f"{out_dir}: {s.utts_in} utterances in, {s.utts_out} out, {len(s.bad)} bad; {state}")

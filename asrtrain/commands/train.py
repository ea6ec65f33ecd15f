"""``asrtrain train``: parse options, resolve the job, run the learners."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Tuple

import click


@click.command()
@click.option("--config", type=click.Path(path_type=Path), help="YAML config (sections features, tokenizer, "
              "model, specaug, train, dist, dp, decode). Every key has a default.")
@click.option("--strategy-config", "extra", multiple=True, type=click.Path(path_type=Path),
              help="More YAML merged on top of --config (e.g. conf/strategy/adpsgd.yaml).")
@click.option("--set", "overrides", multiple=True, metavar="SECTION.KEY=VALUE",
              help="Override one config value, e.g. --set train.lr=0.002 (repeatable).")
@click.option("--train-data", required=True, type=click.Path(path_type=Path), help="Feature dir to train on.")
@click.option("--dev-data", type=click.Path(path_type=Path), help="Feature dir for the validation loss "
              "(computed with the same feature options as --train-data).")
@click.option("--tokenizer", type=click.Path(path_type=Path), help="tokenizer.model (CTC training).")
@click.option("--alignments", type=click.Path(), help="Kaldi ali-to-pdf .ark or .scp of frame labels (CE "
              "training, --loss ce; an ark: or scp: prefix is accepted).")
@click.option("--loss", type=click.Choice(["ctc", "ce"]), help="Shorthand for --set model.loss=...")
@click.option("--exp-dir", type=click.Path(path_type=Path), help="Where the run is written.  [required]")
@click.option("--strategy", type=click.Choice(["single", "ssgd", "adpsgd", "h-adpsgd", "periodic"]),
              help="Distributed strategy (dist.strategy).")
@click.option("--learners", type=int, help="Number of learners (dist.learners); spawned locally unless "
              "running under torchrun.")
@click.option("--learners-per-node", type=int, help="H-ADPSGD super-learner size (dist.learners_per_node).")
@click.option("--averaging", type=click.Choice(["fixed", "random"]), help="ADPSGD partner schedule.")
@click.option("--delay-by-one/--no-delay-by-one", default=None, help="Overlap averaging with a whole step.")
@click.option("--period", help="periodic: average every N local steps, or 'adaptive' (dist.period).")
@click.option("--dp/--no-dp", default=None, help="Differentially private training: per-example clipping and "
              "Gaussian noise (dp.enabled; set dp.epsilon or dp.noise_multiplier).")
@click.option("--device", help="auto (cuda:LOCAL_RANK when CUDA is available, else cpu) | cpu | cuda | cuda:N "
              "(train.device; cuda:N puts every local learner on GPU N).")
@click.option("--precision", type=click.Choice(["fp32", "bf16", "fp16"]),
              help="train.precision: autocast bf16 or fp16 (with a gradient scaler); losses stay fp32.")
@click.option("--resume", is_flag=True, help="Continue from the exp dir's latest checkpoint (a finished run: "
              "nothing to do; with a larger --set train.epochs=N: train on to N epochs).")
@click.option("--restart", is_flag=True, help="Delete the exp dir's earlier run (checkpoints, final.pt, "
              "train.log, tensorboard/, curves.png) and start over.")
@click.option("--print-config", is_flag=True,
              help="Print the resolved config (what EXP_DIR/config.yaml would hold: every default, the "
                   "data's dims, the tokenizer's settings) and the model's size, then exit without training "
                   "or writing anything; --exp-dir is not needed.")
@click.option("--stop-after-steps", type=int, default=0, hidden=True,
              help="Testing: stop abruptly after this many steps, as if killed.")
def train(config: Optional[Path], extra: Tuple[Path, ...], overrides: Tuple[str, ...], train_data: Path,
          dev_data: Optional[Path], tokenizer: Optional[Path], alignments: Optional[str], loss: Optional[str],
          exp_dir: Path, strategy: Optional[str], learners: Optional[int], learners_per_node: Optional[int],
          averaging: Optional[str], delay_by_one: Optional[bool], period: Optional[str], dp: Optional[bool],
          device: Optional[str], precision: Optional[str], resume: bool, restart: bool, print_config: bool,
          stop_after_steps: int) -> None:
    """Train a BLSTM acoustic model into EXP_DIR (config.yaml, checkpoints/, final.pt, curves.png)."""
    from asrtrain.train.job import prepare_job, train as run_train

    flags = {"dist.strategy": strategy, "dist.learners": learners, "dist.learners_per_node": learners_per_node,
             "dist.averaging": averaging, "dist.delay_by_one": delay_by_one, "model.loss": loss,
             "dist.period": period, "dp.enabled": dp, "train.device": device, "train.precision": precision}
    sets = list(overrides) + [f"{k}={str(v).lower() if isinstance(v, bool) else v}"
                              for k, v in flags.items() if v is not None]
    if print_config:
        text = resolved_config_text(config, extra, sets, train_data, dev_data, tokenizer, alignments)
        click.echo(text, nl=False)
        return
    if exp_dir is None:
        raise click.UsageError("Missing option '--exp-dir' (where the run is written; only --print-config "
                               "goes without it).")
    job = prepare_job(config, extra, sets, train_data, dev_data, exp_dir, tokenizer, alignments, resume,
                      stop_after_steps, restart=restart)
    path = run_train(job)
    if path is not None:
        click.echo(str(path))


def resolved_config_text(config, extra, sets, train_data, dev_data, tokenizer, alignments) -> str:
    """``--print-config``: the YAML ``config.yaml`` would hold, then the model's parameter count (a
    comment)."""
    import yaml

    from asrtrain.config.file import to_dict
    from asrtrain.model.blstm import build_model
    from asrtrain.train.job import job_config

    cfg, _ = job_config(config, extra, sets, train_data, dev_data, tokenizer, alignments)
    params = sum(p.numel() for p in build_model(cfg.model).parameters())
    return yaml.safe_dump(to_dict(cfg), sort_keys=False) + f"# model: {params:,} parameters\n"

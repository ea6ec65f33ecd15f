"""Set up a training job in the parent process: resolve the config, make the exp dir describe itself,
then run the learners (in-process for one, spawned or joined under torchrun for several)."""

from __future__ import annotations

import logging
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Iterable, Optional, Tuple

import numpy as np

from asrtrain.config import Config
from asrtrain.configfile import load_config, save_config, to_dict
from asrtrain.yamlio import read_yaml_mapping
from asrtrain.configcheck import check_train_settings
from asrtrain.distributed.launch import in_launched_group, launched_learners, writes_job_files
from asrtrain.errors import AsrError
from asrtrain.io import atomic_copy
from asrtrain.train.loop import TrainJob

log = logging.getLogger("asrtrain.train")


def resolve_config(cfg: Config, train_dir: Path, tokenizer: Optional[Path], alignments: Optional[str]
                   ) -> Tuple[Config, Optional[np.ndarray]]:
    """Fill what the data decides: the feature dim and the number of output targets. Returns the config
    and, for CE training, the class priors of the alignments (None for CTC)."""
    from asrtrain.features.reader import FeatureReader

    reader = FeatureReader(train_dir)
    dim = reader.dim
    priors = None
    if cfg.model.loss == "ctc":
        if tokenizer is None:
            raise AsrError("CTC training needs --tokenizer", fix="train one with asrtrain tokenizer train")
        from asrtrain.text.tokenizer import Tokenizer
        targets = Tokenizer(tokenizer).vocab_size
    else:
        if alignments is None:
            raise AsrError("--loss ce (model.loss=ce) needs --alignments (Kaldi ali-to-pdf output)")
        from asrtrain.model.priors import priors_from
        from asrtrain.train.hybrid import read_alignments, targets_in
        ali = read_alignments(alignments)  # once: the target count and the priors both come from it
        targets = targets_in(ali)
        priors = priors_from(ali, targets)
    if cfg.model.input_dim and cfg.model.input_dim != dim:
        raise AsrError(f"model.input_dim={cfg.model.input_dim} but {train_dir} has {dim}-dim features",
                       fix="drop model.input_dim from the config (it is derived)")
    # The features are what the train dir was computed with: record them, so decoding can check its input.
    return replace(cfg, features=reader.config, model=replace(cfg.model, input_dim=dim, num_targets=targets)), priors


# Keys that may change between a run and its resumption: where and how fast it computes, not what.
RESUMABLE_CHANGES = {"train.device", "train.threads", "dist.timeout_s", "dist.hang_timeout_s", "dist.backend",
                     "train.log_every_steps"}


def config_diff(old: dict, new: dict) -> list:
    """Dotted keys whose values differ; a key missing from ``old`` (an older asrtrain) counts as its
    default."""
    defaults = to_dict(Config())
    return [f"{s}.{k}" for s in new for k in new[s]
            if f"{s}.{k}" not in RESUMABLE_CHANGES
            and (old.get(s) or {}).get(k, defaults.get(s, {}).get(k)) != new[s][k]]


def prepare_job(config: Optional[Path], extra_configs: Iterable[Path], overrides: Iterable[str], train_dir: Path,
                dev_dir: Optional[Path], exp_dir: Path, tokenizer: Optional[Path], alignments: Optional[str],
                resume: bool, stop_after_steps: int = 0, restart: bool = False) -> TrainJob:
    """Resolve the config and write ``config.yaml`` and ``tokenizer.model`` into the exp dir.

    On ``--resume`` the stored config must equal the resolved one (training under a changed config is
    not a resume; the device, threads and timeouts may change); the error says which keys differ.
    ``restart`` deletes an earlier run's checkpoints and final model and starts over.
    """
    exp_dir = Path(exp_dir)
    if resume and restart:
        raise AsrError("--resume and --restart contradict each other", fix="give one of them")
    cfg, priors = resolve_config(load_config(config, overrides, extra=extra_configs), Path(train_dir),
                                 tokenizer, alignments)
    check_train_settings(config, overrides, extra_configs, cfg, Path(train_dir))
    # Under torchrun/srun the job has WORLD_SIZE learners whatever dist.learners said: config.yaml records
    # the layout that ran, and the layout checks (odd rings, uneven groups) run before any learner starts.
    cfg = replace(cfg, dist=replace(cfg.dist, learners=launched_learners(cfg.dist.learners)))
    writer = writes_job_files()
    stored = exp_dir / "config.yaml"
    ckpts = exp_dir / "checkpoints"
    if restart and ckpts.is_dir() and writer:
        # Several nodes on one shared file system may remove the same files at once: what another
        # removed first is gone already, which is what was asked.
        shutil.rmtree(ckpts, onerror=_ignore_missing)
        for name in ("final.pt", "final.pt.sha256"):
            (exp_dir / name).unlink(missing_ok=True)
        log.info("--restart: removed the earlier run's checkpoints in %s", exp_dir)
    if resume and stored.is_file():
        old = read_yaml_mapping(stored)
        if (old.get("dist") or {}).get("learners") == 1 and cfg.dist.learners > 1 and in_launched_group():
            old["dist"]["learners"] = cfg.dist.learners  # written under torchrun before it recorded WORLD_SIZE
        diff = config_diff(old, to_dict(cfg))
        if diff:
            raise AsrError(f"--resume with a different config ({', '.join(diff)})", stored,
                           fix="resume with the original options or use a new --exp-dir")
    elif not resume and not restart and ckpts.is_dir() and any(ckpts.glob("*.pt")):
        raise AsrError("exp dir already holds a training run", exp_dir,
                       fix="add --resume to continue it, --restart to start over, or choose a new --exp-dir")
    exp_dir.mkdir(parents=True, exist_ok=True)
    if writer:
        save_config(cfg, stored)
        if tokenizer is not None and Path(tokenizer).resolve() != (exp_dir / "tokenizer.model").resolve():
            atomic_copy(tokenizer, exp_dir / "tokenizer.model")
        if priors is not None:  # CE training
            from asrtrain.model.priors import save_priors
            save_priors(priors, exp_dir / "priors.txt")
    return TrainJob(cfg=cfg, train_dir=Path(train_dir), dev_dir=Path(dev_dir) if dev_dir else None, exp_dir=exp_dir,
                    tokenizer=exp_dir / "tokenizer.model" if tokenizer else None, alignments=alignments,
                    resume=resume, stop_after_steps=stop_after_steps)


def _ignore_missing(func, path, exc_info) -> None:
    """rmtree's onerror: a file another process removed first is fine; anything else is raised."""
    if not isinstance(exc_info[1], FileNotFoundError):
        raise exc_info[1]


def add_file_log(exp_dir: Path, rank: int) -> logging.Handler:
    """Append this learner's log lines to ``<exp>/train.log`` (one line per write, rank-tagged)."""
    handler = logging.FileHandler(Path(exp_dir) / "train.log")
    handler.setFormatter(logging.Formatter(f"%(asctime)s [{rank}] %(levelname)s %(name)s: %(message)s",
                                           "%Y-%m-%d %H:%M:%S"))
    root = logging.getLogger()
    root.addHandler(handler)
    if root.level > logging.INFO or root.level == logging.NOTSET:
        root.setLevel(logging.INFO)
    return handler


def learner_main(rank: int, world_size: int, job: TrainJob) -> None:
    """Entry point of one learner (in-process, spawned, or under torchrun)."""
    from asrtrain.distributed.factory import describe_layout, make_strategy
    from asrtrain.train.loop import run

    handler = add_file_log(job.exp_dir, rank)
    if rank == 0:
        log.info("layout: %s", describe_layout(job.cfg.dist, world_size))
    # On resume every learner loads its own weights (ADPSGD learners differ); fresh runs start from
    # rank 0's weights everywhere.
    strategy = make_strategy(job.cfg.dist, rank, world_size, seed=job.cfg.train.seed,
                             sync_initial_weights=not job.resume, dp=job.cfg.dp)
    try:
        run(rank, world_size, job, strategy)
    finally:  # in-process runs (tests, benchmarks) must not keep writing into this run's log
        logging.getLogger().removeHandler(handler)
        handler.close()


def train(job: TrainJob) -> Optional[Path]:
    """Run the job: one learner here, or N learners through :mod:`asrtrain.distributed.launch`
    (spawned locally, or joined under torchrun/srun). Returns ``final.pt`` once written."""
    from asrtrain.distributed.factory import check_dist_config
    from asrtrain.distributed.launch import in_launched_group, is_job_leader, run_learners
    from asrtrain.train.loop import threads_for

    d = job.cfg.dist
    check_dist_config(d, d.learners)  # under torchrun d.learners is WORLD_SIZE (prepare_job)
    if is_job_leader():
        log.info("training %s: strategy %s, %d learner(s)%s, %s", job.exp_dir, d.strategy, d.learners,
                 " under torchrun/srun" if in_launched_group() else "", "resume" if job.resume else "fresh")
    run_learners(learner_main, job, d.learners, backend=d.backend, timeout_s=d.timeout_s,
                 threads=threads_for(job.cfg, d.learners), device=job.cfg.train.device,
                 hang_after=d.hang_timeout_s)
    final = job.exp_dir / "final.pt"
    return final if final.is_file() and not job.stop_after_steps and is_job_leader() else None

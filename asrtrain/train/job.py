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
from asrtrain.config.file import load_config, save_config, to_dict
from asrtrain.config.yamlio import read_yaml_mapping
from asrtrain.config.check import check_train_settings
from asrtrain.distributed.runtime.launch import in_launched_group, launched_learners, writes_job_files
from asrtrain.errors import AsrError
from asrtrain.atomic import atomic_copy
from asrtrain.train import checkpoint as ckpt
from asrtrain.train.state import TrainJob

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
        tok = Tokenizer(tokenizer)
        targets = tok.vocab_size
        cfg = replace(cfg, tokenizer=tok.settings())  # config.yaml records the tokenizer used
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
# (train.epochs may grow too: :func:`check_extension`.)
RESUMABLE_CHANGES = {"train.device", "train.threads", "dist.timeout_s", "dist.hang_timeout_s", "dist.backend",
                     "train.log_every_steps"}
#: What a training run writes into its exp dir, besides the job files (config.yaml, tokenizer.model,
#: priors.txt, rewritten by every run): ``--restart`` removes them all.
RUN_OUTPUTS = ("checkpoints", "final.pt", "final.pt.sha256", "train.log", "tensorboard", "curves.png")
JOB_FILES = ("config.yaml", "tokenizer.model", "priors.txt", "data.json", "cmvn_global.ark")  # the job writes or copies them


def check_dev_features(cfg: Config, train_dir: Path, dev_dir: Path) -> None:
    """Refuse a ``--dev-data`` computed with other feature options than ``--train-data`` (``cfg.features``,
    resolved from it): the model would read it without complaint (a CPU LSTM does not check its input
    size) and log a meaningless dev loss. The same check as ``decode`` makes of its data."""
    from asrtrain.config.file import feature_differences
    from asrtrain.features.reader import FeatureReader

    diff = feature_differences(FeatureReader(dev_dir).config, cfg.features)
    if diff:
        raise AsrError(f"--dev-data features differ from --train-data's ({', '.join(diff)})",
                       Path(dev_dir) / "features.yaml",
                       fix=f"recompute them with asrtrain features --conf {Path(train_dir)}/features.yaml")


def check_extension(old: dict, cfg: Config, stored: Path) -> int:
    """``--resume`` with ``train.epochs`` other than the run's: the run's epoch count when the new one is
    larger (the run is extended, as ESPnet's larger ``max_epoch``); shortening it, or extending a
    differentially private run (its noise was set for the privacy budget over the old epochs), is
    refused. The learning-rate schedule: ``exp`` and ``none`` do not depend on the epoch count, so the
    run goes on as an M-epoch run would; ``cosine`` is recomputed over the new total (the loop logs the
    jump of the rate at the resumed step, :func:`asrtrain.train.lr.schedule_change`)."""
    from asrtrain.config import TrainConfig

    was = (old.get("train") or {}).get("epochs", TrainConfig().epochs)
    now = cfg.train.epochs
    if now < was:
        raise AsrError(f"--resume cannot shorten a run: train.epochs {was} -> {now}", stored,
                       fix=f"resume with train.epochs={was} or more; to use the epochs done now, average "
                           "them with asrtrain average EXP_DIR --last K")
    if cfg.dp.enabled:
        raise AsrError(f"--resume with train.epochs {was} -> {now}: a differentially private run cannot be "
                       f"extended (its noise was set for the privacy budget over {was} epochs)", stored,
                       fix=f"train a new run with train.epochs={now} in a new --exp-dir")
    if cfg.train.anneal != "cosine":  # cosine: the loop warns, with the rate before and after
        log.info("extending the run from %d to %d epochs: the lr schedule (anneal %s) does not depend on the "
                 "epoch count, so it goes on as a %d-epoch run would", was, now, cfg.train.anneal, now)
    if (stored.parent / "final.pt").is_file():
        log.warning("%s: the %d-epoch run's final.pt is replaced when the %d-epoch run ends",
                    stored.parent, was, now)
    return was


def run_finished(exp_dir: Path, epochs: int) -> bool:
    """True when the run trained all ``epochs`` and wrote ``final.pt``: ``--resume`` has nothing to do."""
    tag = ckpt.latest_tag(exp_dir)
    return tag == f"epoch-{epochs:04d}" and (Path(exp_dir) / "final.pt").is_file()


def config_diff(old: dict, new: dict) -> list:
    """Dotted keys whose values differ; a key missing from ``old`` (an older asrtrain) counts as its
    default. The ``tokenizer`` section is left out: the tokenizer is compared by its file
    (:func:`check_same_tokenizer`), and an older asrtrain recorded the config's defaults there."""
    defaults = to_dict(Config())
    return [f"{s}.{k}" for s in new for k in new[s]
            if f"{s}.{k}" not in RESUMABLE_CHANGES and s != "tokenizer"
            and (old.get(s) or {}).get(k, defaults.get(s, {}).get(k)) != new[s][k]]


def check_same_tokenizer(tokenizer: Optional[Path], exp_dir: Path) -> None:
    """On ``--resume``: the ``--tokenizer`` given must be the one the run trained with (its copy in the
    exp dir), byte for byte; a different one would map the same ids to other pieces."""
    kept = Path(exp_dir) / "tokenizer.model"
    if tokenizer is None or not kept.is_file() or Path(tokenizer).resolve() == kept.resolve():
        return
    if Path(tokenizer).read_bytes() != kept.read_bytes():
        raise AsrError(f"--resume with a different --tokenizer ({tokenizer}) than the run trained with", kept,
                       fix=f"resume with --tokenizer {kept}, or train with the new one in a new --exp-dir")


def job_config(config: Optional[Path], extra_configs: Iterable[Path], overrides: Iterable[str], train_dir: Path,
               dev_dir: Optional[Path], tokenizer: Optional[Path], alignments: Optional[str]
               ) -> Tuple[Config, Optional[np.ndarray]]:
    """The config a run trains under (what its ``config.yaml`` holds), checked, and the CE priors; writes
    nothing (``train --print-config`` prints it)."""
    cfg, priors = resolve_config(load_config(config, overrides, extra=extra_configs), Path(train_dir),
                                 tokenizer, alignments)
    check_train_settings(config, overrides, extra_configs, cfg, Path(train_dir))
    if dev_dir is not None:
        check_dev_features(cfg, Path(train_dir), Path(dev_dir))
    # Under torchrun/srun the job has WORLD_SIZE learners whatever dist.learners said: config.yaml records
    # the layout that ran, and the layout checks (odd rings, uneven groups) run before any learner starts.
    cfg = replace(cfg, dist=replace(cfg.dist, learners=launched_learners(cfg.dist.learners)))
    return cfg, priors


def prepare_job(config: Optional[Path], extra_configs: Iterable[Path], overrides: Iterable[str], train_dir: Path,
                dev_dir: Optional[Path], exp_dir: Path, tokenizer: Optional[Path], alignments: Optional[str],
                resume: bool, stop_after_steps: int = 0, restart: bool = False) -> TrainJob:
    """Resolve the config and write ``config.yaml``, ``tokenizer.model`` and ``data.json`` (the training
    data's name, utterances and hours: :mod:`asrtrain.train.data_record`) into the exp dir.

    On ``--resume`` the stored config must equal the resolved one (training under a changed config is
    not a resume; the device, threads and timeouts may change, and ``train.epochs`` may grow:
    :func:`check_extension`); the error says which keys differ. The tokenizer and the data dirs must be
    the run's too (:func:`check_same_tokenizer`, :func:`asrtrain.train.data_record.check_same_data`),
    checked before anything in the exp dir is rewritten. Resuming a finished run writes nothing
    (:func:`train` says so). ``restart`` deletes an earlier run's outputs (:data:`RUN_OUTPUTS`) and
    starts over.
    """
    exp_dir = Path(exp_dir)
    if resume and restart:
        raise AsrError("--resume and --restart contradict each other", fix="give one of them")
    cfg, priors = job_config(config, extra_configs, overrides, train_dir, dev_dir, tokenizer, alignments)
    writer = writes_job_files()
    stored = exp_dir / "config.yaml"
    ckpts = exp_dir / "checkpoints"
    if restart and writer:
        remove_run_outputs(exp_dir)
    extended_from, finished = 0, False
    if resume and stored.is_file():
        old = read_yaml_mapping(stored)
        if (old.get("dist") or {}).get("learners") == 1 and cfg.dist.learners > 1 and in_launched_group():
            old["dist"]["learners"] = cfg.dist.learners  # written under torchrun before it recorded WORLD_SIZE
        diff = config_diff(old, to_dict(cfg))
        if "train.epochs" in diff:
            diff.remove("train.epochs")
            if not diff:
                extended_from = check_extension(old, cfg, stored)
        if diff:
            raise AsrError(f"--resume with a different config ({', '.join(diff)})", stored,
                           fix="resume with the original options or use a new --exp-dir")
        check_same_tokenizer(tokenizer, exp_dir)
        from asrtrain.train.data_record import check_same_data
        check_same_data(exp_dir, Path(train_dir), Path(dev_dir) if dev_dir else None, cfg.features.frame_shift)
        finished = run_finished(exp_dir, cfg.train.epochs)
    elif resume and ckpts.is_dir() and any(ckpts.glob("*.pt")):
        # Without the run's config.yaml no setting of this resume (a new train.lr, another model) can be
        # checked against the run's: continuing would train the checkpoint under settings nobody chose.
        raise AsrError("--resume: the run's config.yaml is missing, so this run's settings cannot be checked "
                       "against the ones the checkpoints were trained with", stored,
                       fix="restore config.yaml into the exp dir, or start over with --restart")
    elif not resume and not restart and ckpts.is_dir() and any(ckpts.glob("*.pt")):
        raise AsrError("exp dir already holds a training run", exp_dir,
                       fix="add --resume to continue it, --restart to start over, or choose a new --exp-dir")
    exp_dir.mkdir(parents=True, exist_ok=True)
    if writer and not finished:  # a finished run's --resume has nothing to train: every file is left as it is
        save_config(cfg, stored)
        from asrtrain.train.data_record import write_data_record
        write_data_record(exp_dir, Path(train_dir), Path(dev_dir) if dev_dir else None, cfg.features.frame_shift)
        if tokenizer is not None and Path(tokenizer).resolve() != (exp_dir / "tokenizer.model").resolve():
            atomic_copy(tokenizer, exp_dir / "tokenizer.model")
        stats = Path(train_dir) / "cmvn_global.ark"
        if cfg.features.cmvn == "global" and stats.is_file():  # transcribe applies the training set's stats
            atomic_copy(stats, exp_dir / "cmvn_global.ark")
        if priors is not None:  # CE training
            from asrtrain.model.priors import save_priors
            save_priors(priors, exp_dir / "priors.txt")
    return TrainJob(cfg=cfg, train_dir=Path(train_dir), dev_dir=Path(dev_dir) if dev_dir else None, exp_dir=exp_dir,
                    tokenizer=exp_dir / "tokenizer.model" if tokenizer else None, alignments=alignments,
                    resume=resume, stop_after_steps=stop_after_steps, extended_from=extended_from)


def remove_run_outputs(exp_dir: Path) -> None:
    """``--restart``: remove what the earlier run wrote (:data:`RUN_OUTPUTS`: its checkpoints, final model,
    log, TensorBoard runs and curves), so that nothing of it is mistaken for the new run's; what else is
    in the exp dir (decode dirs, averaged models) is left, with a warning that it came from that run."""
    found = [name for name in RUN_OUTPUTS if (exp_dir / name).exists()]
    if not found:
        return  # no earlier run
    for name in found:
        p = exp_dir / name
        if p.is_dir():
            # Several nodes on one shared file system may remove the same files at once: what another
            # removed first is gone already, which is what was asked.
            shutil.rmtree(p, onerror=_ignore_missing)
        else:
            p.unlink(missing_ok=True)
    log.info("--restart: removed the earlier run's %s in %s", ", ".join(found), exp_dir)
    left = sorted(p.name for p in exp_dir.iterdir() if p.name not in RUN_OUTPUTS + JOB_FILES)
    if left:
        log.warning("--restart: left in place, made with the earlier run's model: %s", ", ".join(left))


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
    try:
        if rank == 0:
            log.info("layout: %s", describe_layout(job.cfg.dist, world_size))
        # On resume every learner loads its own weights (ADPSGD learners differ); fresh runs start from
        # rank 0's weights everywhere.
        strategy = make_strategy(job.cfg.dist, rank, world_size, seed=job.cfg.train.seed,
                                 sync_initial_weights=not job.resume, dp=job.cfg.dp)
        run(rank, world_size, job, strategy)
    finally:  # in-process runs (tests, benchmarks) must not keep writing into this run's log
        logging.getLogger().removeHandler(handler)
        handler.close()


def train(job: TrainJob) -> Optional[Path]:
    """Run the job: one learner here, or N learners through :mod:`asrtrain.distributed.runtime.launch`
    (spawned locally, or joined under torchrun/srun). Returns ``final.pt`` once written."""
    from asrtrain.distributed.factory import check_dist_config
    from asrtrain.distributed.runtime.launch import in_launched_group, is_job_leader, run_learners
    from asrtrain.train.loop import threads_for

    final = job.exp_dir / "final.pt"
    if job.resume and run_finished(job.exp_dir, job.cfg.train.epochs):
        if is_job_leader():
            log.warning("%s: already finished (all %d epochs trained, final.pt written): nothing to do; to "
                        "train longer, resume with a larger --set train.epochs=N", job.exp_dir,
                        job.cfg.train.epochs)
        return final if is_job_leader() else None
    d = job.cfg.dist
    check_dist_config(d, d.learners)  # under torchrun d.learners is WORLD_SIZE (prepare_job)
    if is_job_leader():
        log.info("training %s: strategy %s, %d learner(s)%s, %s", job.exp_dir, d.strategy, d.learners,
                 " under torchrun/srun" if in_launched_group() else "", "resume" if job.resume else "fresh")
    run_learners(learner_main, job, d.learners, backend=d.backend, timeout_s=d.timeout_s,
                 threads=threads_for(job.cfg, d.learners), device=job.cfg.train.device,
                 hang_after=d.hang_timeout_s, process_group=d.strategy != "single")
    return final if final.is_file() and not job.stop_after_steps and is_job_leader() else None

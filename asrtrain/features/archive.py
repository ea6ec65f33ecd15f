"""``asrtrain features``: a data dir in, a data dir with Kaldi ark/scp fbank features and CMVN stats out.

Output (``OUT_DIR``), all readable by Kaldi itself:
- ``arks/feats.<j>.ark``: one ark per job;
- ``feats.scp`` (sorted; absolute ark paths, as Kaldi's make_fbank.sh writes), ``utt2num_frames``,
  ``feat_dim``;
- ``cmvn_global.ark`` (cmvn: global; a bare [2, D+1] float64 matrix) or ``cmvn.ark``/``cmvn.scp`` keyed by
  speaker (cmvn: speaker); nothing for cmvn: none;
- ``text``, ``utt2spk``, ``spk2utt``, ``wav.scp``, ``segments``, ``reco2file_and_channel`` (for the kept
  utterances), so OUT_DIR is a complete data dir;
- ``features.yaml`` (the resolved FeatureConfig), ``bad_utts.txt`` (with --skip-bad) and ``.done``.

The output is replaced as a whole: everything is built in ``.OUT_DIR.new`` beside it, then swapped in
(:func:`asrtrain.atomic.swap_dir`), so a failed or killed rerun leaves the previous output as it was. When a
run fails because every utterance is bad, the reasons go to ``OUT_DIR.bad_utts.txt`` beside it.

Bad utterances (named, dropped with ``--skip-bad``, else the first one is the error): audio that cannot be
read, segments outside the recording, NaN or Inf audio samples, non-finite features, audio shorter than
one frame, and a sample rate other than ``sample_rate`` unless ``resample: true``.

Jobs run in ``nj`` worker processes (:mod:`asrtrain.features.jobs`); each job takes a contiguous slice of
the sorted utterances and also returns per-speaker CMVN stats, so no second pass over the features is needed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Tuple, Union

import numpy as np
import yaml

from asrtrain.config import FeatureConfig
from asrtrain.config.file import to_dict
from asrtrain.data import datadir as dd
from asrtrain.data.validate import find_problems
from asrtrain.data.table import read_table
from asrtrain.data.audio import Where
from asrtrain.errors import AsrError
from asrtrain.progress import Progress
from asrtrain.features import cmvn
from asrtrain.features.jobs import Job, Utt, run_jobs
from asrtrain.atomic import (atomic_write_text, check_out_is_not_input, recover_dir, reporting_no_space,
                         staging_dir, swap_dir)

log = logging.getLogger(__name__)
PathLike = Union[str, Path]
INPUT_FILES = ("wav.scp", "segments", "utt2spk", "text", "reco2file_and_channel", "reco2speed")


@dataclass
class FeatureSummary:
    utts_in: int
    utts_out: int
    bad: List[Tuple[str, str]] = field(default_factory=list)  # (utt, reason)
    frames: int = 0
    dim: int = 0
    audio_seconds: float = 0.0
    wall_seconds: float = 0.0
    skipped: bool = False  # True if a matching .done marker made this a no-op

    @property
    def x_realtime(self) -> float:
        return self.audio_seconds / self.wall_seconds if self.wall_seconds > 0 else 0.0


# ---------------------------------------------------------------------------------------------------------
# The stage

def _fingerprint(data_dir: Path, conf: FeatureConfig, skip_bad: bool) -> str:
    h = hashlib.sha256()
    h.update(str(data_dir.resolve()).encode())
    for name in INPUT_FILES:
        if (data_dir / name).exists():
            h.update(name.encode() + (data_dir / name).read_bytes())
    h.update(json.dumps({"conf": to_dict(conf), "skip_bad": skip_bad}, sort_keys=True).encode())
    h.update(_audio_stamp(data_dir / "wav.scp").encode())
    return h.hexdigest()


def _audio_stamp(wav_scp: Path) -> str:
    """Size and mtime of every plain audio file wav.scp names (one stat each), so audio replaced in place
    is recomputed; pipes are stamped by their command only."""
    parts = []
    try:
        lines = wav_scp.read_bytes().decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    for line in lines:
        fields = line.split(maxsplit=1)
        if len(fields) == 2 and not fields[1].rstrip().endswith("|"):
            try:
                st = os.stat(fields[1].strip())
                parts.append(f"{st.st_size}:{st.st_mtime_ns}")
            except OSError:
                parts.append("-")
    return ",".join(parts)


def _select(data_dir: Path, skip_bad: bool) -> Tuple[dd.DataDir, Dict[str, str]]:
    """Validate the input; returns the data dir and (with skip_bad) the utterances it already rules out."""
    problems = find_problems(data_dir, audio=False)
    bad: Dict[str, str] = {}
    for p in problems:
        if not p.utts or not skip_bad:
            raise p.error()
        for utt in p.utts:
            bad.setdefault(utt, str(p))
    data = dd.read_datadir(data_dir)
    if not data.wav_scp:
        raise AsrError("no wav.scp: nothing to compute features from", data_dir / "wav.scp",
                       fix="give the data dir made by asrtrain prepare (with wav.scp)")
    return data, bad


def _jobs(data: dd.DataDir, utts: List[str], work: Path, out: Path, nj: int, conf: FeatureConfig,
          skip_bad: bool) -> List[Job]:
    from asrtrain.data.perturb import speed_of
    items = []
    for utt in utts:
        rec, start, end = data.recording(utt)
        wav_path, wav_line = data.where("wav.scp", rec)
        seg = Where(*data.where("segments", utt)) if start is not None else None
        items.append(Utt(utt, data.utt2spk[utt], rec, data.wav_scp[rec], start, end, data.channel(rec),
                          Where(wav_path, wav_line), seg, speed_of(data, rec)))
    nj = max(1, min(nj, len(items)))
    bounds = [round(len(items) * j / nj) for j in range(nj + 1)]
    (work / "arks").mkdir()
    return [Job(j, items[bounds[j]:bounds[j + 1]], to_dict(conf), str(work / "arks" / f"feats.{j + 1}.ark"),
                 str(out.resolve() / "arks" / f"feats.{j + 1}.ark"), skip_bad) for j in range(nj)]


#: What a features dir holds (plus utt2*/spk2*/reco2* tables and split dirs); anything else in an
#: existing OUT_DIR means it is not ours to replace.
OUR_FILES = {"arks", "feats.scp", "utt2num_frames", "feat_dim", "cmvn_global.ark", "cmvn.ark", "cmvn.scp",
             "text", "utt2spk", "spk2utt", "wav.scp", "segments", "reco2file_and_channel", "features.yaml",
             "bad_utts.txt", ".done", ".backup", "fix_report.txt"}


def _check_replaceable(out: Path) -> None:
    """Refuse to replace an existing OUT_DIR holding files a features run never writes."""
    if not out.exists():
        return
    if not out.is_dir():
        raise AsrError("OUT_DIR exists and is not a directory", out, fix="give a new output directory")
    for entry in sorted(out.iterdir()):
        name = entry.name
        if name in OUR_FILES or name.startswith(("utt2", "spk2", "reco2", "split", ".backup.")) \
                or name.endswith(".done"):
            continue  # (*.done: a recipe's stage marker, e.g. recipes/synth's .stage.done)
        raise AsrError(f"OUT_DIR holds '{name}', which asrtrain features does not write; the output dir is "
                       f"replaced as a whole", out, fix="give a new output directory, or remove it first")


def compute_features(data_dir: PathLike, out_dir: PathLike, conf: FeatureConfig, nj: int = 1,
                     skip_bad: bool = False) -> FeatureSummary:
    """Compute fbank features and CMVN stats of ``data_dir`` into ``out_dir`` (see module doc).

    Idempotent: a ``.done`` marker matching the config and inputs makes this a no-op. Without
    ``skip_bad`` the first bad utterance raises AsrError; with it, bad utterances are dropped and listed
    in ``out_dir/bad_utts.txt``. Utterance counts in and out are logged. The output dir is built beside
    ``out_dir`` and swapped in only when complete: on any failure ``out_dir`` is left as it was.
    """
    data_dir, out = Path(data_dir), Path(out_dir)
    conf.validate()
    if not data_dir.is_dir():
        raise AsrError("data dir not found", data_dir, fix="check the path")
    check_out_is_not_input(data_dir, out)
    out = out.resolve()  # a symlinked OUT_DIR: replace what it points to, and name that in feats.scp
    recover_dir(out)
    stamp = _fingerprint(data_dir, conf, skip_bad)
    marker = out / ".done"
    if marker.exists():
        try:
            info = json.loads(marker.read_text())
        except ValueError:
            info = {}
        if info.get("fingerprint") == stamp:
            log.info("features: %s is complete for this config and input (.done); skipping", out)
            return FeatureSummary(**info["summary"], skipped=True)
        log.info("features: %s was made from another config or input; recomputing", out)
    _check_replaceable(out)
    t0 = time.monotonic()
    data, bad = _select(data_dir, skip_bad)
    utts = [u for u in data.utts if u not in bad]
    n_in = len(set(data.utt2spk) | set(bad))
    work = staging_dir(out)
    try:
        jobs = _jobs(data, utts, work, out, nj, conf, skip_bad)
        log.info("features %s -> %s: %d utterances in %d job(s)", data_dir, out, len(utts), len(jobs))
        progress = Progress(len(utts), "fbank", log, every_frac=1.0)
        try:
            results = run_jobs(jobs, progress) if utts else []
        finally:
            progress.close()
        summary = _finish(data, work, out, conf, jobs, results, bad, n_in, skip_bad, stamp, t0)
        with reporting_no_space(out):
            swap_dir(work, out)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    log.info("features %s: %d utterances in, %d out, %d bad%s; %d frames of dim %d; %.1f s of audio at "
             "%.0fx real time", out, n_in, summary.utts_out, len(summary.bad),
             f" (listed in {out / 'bad_utts.txt'})" if summary.bad else "", summary.frames, summary.dim,
             summary.audio_seconds, summary.x_realtime)
    return summary


def _finish(data: dd.DataDir, work: Path, out: Path, conf: FeatureConfig, jobs: List[Job],
            results: List[Dict], bad: Dict[str, str], n_in: int, skip_bad: bool, stamp: str,
            t0: float) -> FeatureSummary:
    """Write the tables, CMVN stats, config and ``.done`` of the new output into ``work``."""
    from asrtrain.features.fbank import feature_dim
    feats_scp, num_frames, stats = {}, {}, {}
    seconds = 0.0
    for job, res in zip(jobs, results):
        for utt, offset, frames in res["entries"]:
            feats_scp[utt], num_frames[utt] = f"{job.final_ark}:{offset}", frames
        for utt, why in res["bad"]:
            bad[utt] = why
        for spk, st in res["stats"].items():
            stats[spk] = st if spk not in stats else stats[spk] + st
        seconds += res["seconds"]
    report = "".join(f"{u} {bad[u]}\n" for u in sorted(bad))
    if not feats_scp:
        if bad:  # OUT_DIR stays as it was; the reasons go beside it
            aside = out.parent / f"{out.name}.bad_utts.txt"
            atomic_write_text(aside, report)
            raise AsrError(f"no utterances left out of {n_in}: all {len(bad)} are bad", data.path,
                           fix=f"see the reasons in {aside}")
        raise AsrError(f"no utterances left out of {n_in}", data.path, fix="the data dir is empty")
    kept = data.subset(feats_scp)
    kept.feats_scp, kept.utt2num_frames = feats_scp, num_frames
    kept.cmvn_scp = None
    dim = feature_dim(conf)
    if conf.cmvn == "global":
        cmvn.write_global(work / "cmvn_global.ark", np.sum(list(stats.values()), axis=0))
    elif conf.cmvn == "speaker":
        cmvn.write_speaker(work, stats, scp_dir=out.resolve())
        kept.cmvn_scp = read_table(work / "cmvn.scp")
    dd.write_datadir(kept, work)
    atomic_write_text(work / "feat_dim", f"{dim}\n")
    atomic_write_text(work / "features.yaml", yaml.safe_dump(to_dict(conf), sort_keys=False))
    if skip_bad:
        atomic_write_text(work / "bad_utts.txt", report)
    summary = FeatureSummary(n_in, len(feats_scp), sorted(bad.items()), sum(num_frames.values()), dim,
                             seconds, time.monotonic() - t0)
    info = {"fingerprint": stamp, "summary": {k: v for k, v in dataclasses.asdict(summary).items()
                                              if k != "skipped"}}
    atomic_write_text(work / ".done", json.dumps(info) + "\n")
    return summary

"""``asrtrain features``: a data dir in, a data dir with Kaldi ark/scp fbank features and CMVN stats out.

Output (``OUT_DIR``), all readable by Kaldi itself:
- ``arks/feats.<j>.ark``: one ark per job, written under a temp name and renamed when complete;
- ``feats.scp`` (sorted; absolute ark paths, as Kaldi's make_fbank.sh writes), ``utt2num_frames``,
  ``feat_dim``;
- ``cmvn_global.ark`` (cmvn: global; a bare [2, D+1] float64 matrix) or ``cmvn.ark``/``cmvn.scp`` keyed by
  speaker (cmvn: speaker); nothing for cmvn: none;
- ``text``, ``utt2spk``, ``spk2utt``, ``wav.scp``, ``segments``, ``reco2file_and_channel`` (for the kept
  utterances), so OUT_DIR is a complete data dir;
- ``features.yaml`` (the resolved FeatureConfig), ``bad_utts.txt`` (with --skip-bad) and ``.done``.

Jobs run in ``nj`` worker processes (forked, as DataLoader workers are) with one torch thread each;
each job takes a contiguous slice of the sorted utterances (so segments of one recording share one
read) and also returns per-speaker CMVN stats, so no second pass over the features is needed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import queue as queue_mod
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple, Union

import numpy as np
import yaml

from asrtrain.config import FeatureConfig, section_from_dict, to_dict
from asrtrain.data import datadir as dd
from asrtrain.data.validate import find_problems
from asrtrain.data.table import read_table
from asrtrain.data.audio import Where, read_recording, resample_to, segment_bounds, speed_perturb
from asrtrain.errors import AsrError
from asrtrain.features import cmvn
from asrtrain.features.fbank import fbank
from asrtrain.io import atomic_write_text

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


@dataclass
class _Utt:
    utt: str
    spk: str
    rec: str
    spec: str
    start: Optional[float]
    end: Optional[float]
    channel: Optional[str]
    wav_where: Where
    seg_where: Optional[Where]
    speed: float = 1.0  # reco2speed: speed perturbation applied to the whole recording (asrtrain.data.perturb)


@dataclass
class _Job:
    index: int
    utts: List[_Utt]
    conf: Dict
    tmp_ark: str
    final_ark: str
    skip_bad: bool


# ---------------------------------------------------------------------------------------------------------
# One job: audio -> fbank -> ark, plus per-speaker stats

def _read(u: _Utt):
    """A whole recording, speed-perturbed when reco2speed says so (segments are in perturbed time)."""
    wave, rate = read_recording(u.spec, u.channel, where=u.wav_where)
    return (speed_perturb(wave, rate, u.speed) if u.speed != 1.0 else wave), rate


def _run_job(job: _Job, report: Callable[[int], None]) -> Dict:
    """Compute one job's features into ``job.tmp_ark``; returns entries, bad utts, stats and seconds."""
    from kaldiio.matio import write_array
    conf = section_from_dict(FeatureConfig, job.conf)
    entries: List[Tuple[str, int, int]] = []  # (utt, byte offset, frames)
    bad: List[Tuple[str, str]] = []
    stats: Dict[str, np.ndarray] = {}
    seconds, done = 0.0, 0
    cache: Tuple[Optional[str], object] = (None, None)  # (rec, (wave, rate) or AsrError)
    with open(job.tmp_ark, "wb") as fh:
        for u in job.utts:
            try:
                if u.start is None:
                    wave, rate = _read(u)
                else:
                    if cache[0] != u.rec:  # read a long recording once for all its segments
                        try:
                            cache = (u.rec, _read(u))
                        except AsrError as err:
                            cache = (u.rec, err)
                    if isinstance(cache[1], AsrError):
                        raise cache[1]
                    whole, rate = cache[1]
                    lo, hi = segment_bounds(len(whole), rate, u.start, u.end, u.seg_where)
                    wave = whole[lo:hi]
                wave = resample_to(wave, rate, conf.sample_rate, conf.resample, u.wav_where)
                feats = fbank(wave, conf.sample_rate, conf, seed=u.utt)
                if feats.shape[0] == 0:
                    where = u.seg_where or u.wav_where
                    raise where.error(f"utterance '{u.utt}' is shorter than one frame "
                                      f"({len(wave)} samples)", fix="drop it (asrtrain features --skip-bad)")
            except AsrError as err:
                if not job.skip_bad:
                    raise
                bad.append((u.utt, err.render()))
            else:
                fh.write(f"{u.utt} ".encode("utf-8"))
                entries.append((u.utt, fh.tell(), feats.shape[0]))
                write_array(fh, feats)
                stats[u.spk] = cmvn.accumulate(feats, stats.get(u.spk))
                seconds += len(wave) / conf.sample_rate
            done += 1
            if done % 20 == 0:
                report(20)
        fh.flush()
        os.fsync(fh.fileno())
    report(done % 20)
    return {"entries": entries, "bad": bad, "stats": stats, "seconds": seconds}


def _worker(job: _Job, q) -> None:
    """Process entry point: one torch thread; every outcome goes back through the queue."""
    import torch
    torch.set_num_threads(1)
    try:
        result = _run_job(job, lambda n: q.put(("progress", job.index, n)))
        q.put(("done", job.index, result))
    except AsrError as err:
        q.put(("error", job.index, (err.message, err.path, err.line, err.fix)))
    except BaseException:
        q.put(("crash", job.index, traceback.format_exc()))


class _Progress:
    """tqdm on a terminal; otherwise a log line at most every 30 s."""

    def __init__(self, total: int, desc: str):
        self.total, self.done, self.desc = total, 0, desc
        self.last = time.monotonic()
        self.bar = None
        if sys.stderr.isatty():
            from tqdm import tqdm
            self.bar = tqdm(total=total, desc=desc, unit="utt")

    def update(self, n: int) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
        elif time.monotonic() - self.last > 30:
            self.last = time.monotonic()
            log.info("%s: %d/%d utterances", self.desc, self.done, self.total)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _run_jobs(jobs: List[_Job], progress: _Progress) -> List[Dict]:
    if len(jobs) == 1:
        return [_run_job(jobs[0], progress.update)]
    import multiprocessing as mp
    # fork as torch's DataLoader does (workers then take one thread, so no OpenMP pool is re-entered);
    # spawn costs a fresh torch import per job, seconds on a loaded machine.
    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(job, q), daemon=True) for job in jobs]
    for p in procs:
        p.start()
    results: Dict[int, Dict] = {}
    try:
        while len(results) < len(jobs):
            try:
                kind, j, payload = q.get(timeout=1.0)
            except queue_mod.Empty:
                for j, p in enumerate(procs):
                    if j not in results and not p.is_alive() and p.exitcode not in (0, None):
                        raise RuntimeError(f"feature job {j + 1} died with exit code {p.exitcode}")
                continue
            if kind == "progress":
                progress.update(payload)
            elif kind == "done":
                results[j] = payload
            elif kind == "error":
                raise AsrError(*payload)
            else:
                raise RuntimeError(f"feature job {j + 1} failed:\n{payload}")
    finally:
        for p in procs:
            if p.is_alive() and len(results) < len(jobs):
                p.terminate()
            p.join(timeout=10)
    return [results[j] for j in range(len(jobs))]


# ---------------------------------------------------------------------------------------------------------
# The stage

def _fingerprint(data_dir: Path, conf: FeatureConfig, skip_bad: bool) -> str:
    h = hashlib.sha256()
    h.update(str(data_dir.resolve()).encode())
    for name in INPUT_FILES:
        if (data_dir / name).exists():
            h.update(name.encode() + (data_dir / name).read_bytes())
    h.update(json.dumps({"conf": to_dict(conf), "skip_bad": skip_bad}, sort_keys=True).encode())
    return h.hexdigest()


def _select(data_dir: Path, skip_bad: bool) -> Tuple[dd.DataDir, Dict[str, str]]:
    """Validate the input; returns the data dir and (with skip_bad) the utterances it already rules out."""
    problems = find_problems(data_dir, audio=False)
    bad: Dict[str, str] = {}
    for p in problems:
        if not p.utts or not skip_bad:
            raise p.error()
        for utt in p.utts:
            bad.setdefault(utt, str(p))
    data = dd.read_datadir(data_dir, validate=False)
    if not data.wav_scp:
        raise AsrError("no wav.scp: nothing to compute features from", data_dir / "wav.scp",
                       fix="give the data dir made by asrtrain prepare (with wav.scp)")
    return data, bad


def _jobs(data: dd.DataDir, utts: List[str], out: Path, nj: int, conf: FeatureConfig,
          skip_bad: bool) -> List[_Job]:
    from asrtrain.data.perturb import speed_of
    items = []
    for utt in utts:
        rec, start, end = data.recording(utt)
        wav_path, wav_line = data.where("wav.scp", rec)
        seg = Where(*data.where("segments", utt)) if start is not None else None
        items.append(_Utt(utt, data.utt2spk[utt], rec, data.wav_scp[rec], start, end, data.channel(rec),
                          Where(wav_path, wav_line), seg, speed_of(data, rec)))
    nj = max(1, min(nj, len(items)))
    bounds = [round(len(items) * j / nj) for j in range(nj + 1)]
    arks = out / "arks"
    return [_Job(j, items[bounds[j]:bounds[j + 1]], to_dict(conf), str(arks / f".feats.{j + 1}.ark.tmp"),
                 str(arks / f"feats.{j + 1}.ark"), skip_bad) for j in range(nj)]


def compute_features(data_dir: PathLike, out_dir: PathLike, conf: FeatureConfig, nj: int = 1,
                     skip_bad: bool = False) -> FeatureSummary:
    """Compute fbank features and CMVN stats of ``data_dir`` into ``out_dir`` (see module doc).

    Idempotent: a ``.done`` marker matching the config and inputs makes this a no-op. Without
    ``skip_bad`` the first bad utterance raises AsrError; with it, bad utterances are dropped and listed
    in ``out_dir/bad_utts.txt``. Utterance counts in and out are logged.
    """
    data_dir, out = Path(data_dir), Path(out_dir)
    conf.validate()
    if not data_dir.is_dir():
        raise AsrError("data dir not found", data_dir, fix="check the path")
    if out.resolve() == data_dir.resolve():
        raise AsrError("OUT_DIR must differ from DATA_DIR", out, fix="give a new output directory")
    stamp = _fingerprint(data_dir, conf, skip_bad)
    marker = out / ".done"
    if marker.exists():
        info = json.loads(marker.read_text())
        if info.get("fingerprint") == stamp:
            log.info("features: %s is complete for this config and input (.done); skipping", out)
            return FeatureSummary(**info["summary"], skipped=True)
        log.info("features: %s was made from another config or input; recomputing", out)
        marker.unlink()
    t0 = time.monotonic()
    data, bad = _select(data_dir, skip_bad)
    utts = [u for u in data.utts if u not in bad]
    n_in = len(set(data.utt2spk) | set(bad))
    (out / "arks").mkdir(parents=True, exist_ok=True)
    for stale in (out / "arks").glob(".feats.*.tmp"):
        stale.unlink()
    jobs = _jobs(data, utts, out, nj, conf, skip_bad)
    log.info("features %s -> %s: %d utterances in %d job(s)", data_dir, out, len(utts), len(jobs))
    progress = _Progress(len(utts), "fbank")
    try:
        results = _run_jobs(jobs, progress) if utts else []
    except BaseException:
        for job in jobs:
            Path(job.tmp_ark).unlink(missing_ok=True)
        raise
    finally:
        progress.close()
    for job in jobs:
        os.replace(job.tmp_ark, job.final_ark)
    finals = {Path(j.final_ark).name for j in jobs}
    for old in (out / "arks").glob("feats.*.ark"):
        if old.name not in finals:
            old.unlink()  # from an earlier run with more jobs
    return _finish(data, out, conf, jobs, results, bad, n_in, skip_bad, stamp, t0)


def _finish(data: dd.DataDir, out: Path, conf: FeatureConfig, jobs: List[_Job], results: List[Dict],
            bad: Dict[str, str], n_in: int, skip_bad: bool, stamp: str, t0: float) -> FeatureSummary:
    from asrtrain.features.fbank import feature_dim
    feats_scp, num_frames, stats = {}, {}, {}
    seconds = 0.0
    for job, res in zip(jobs, results):
        ark = Path(job.final_ark).resolve()
        for utt, offset, frames in res["entries"]:
            feats_scp[utt], num_frames[utt] = f"{ark}:{offset}", frames
        for utt, why in res["bad"]:
            bad[utt] = why
        for spk, st in res["stats"].items():
            stats[spk] = st if spk not in stats else stats[spk] + st
        seconds += res["seconds"]
    if not feats_scp:
        raise AsrError(f"no utterances left out of {n_in}", data.path,
                       fix="see the reasons in bad_utts.txt" if bad else "the data dir is empty")
    kept = data.subset(feats_scp)
    kept.feats_scp, kept.utt2num_frames = feats_scp, num_frames
    kept.cmvn_scp = None
    dim = feature_dim(conf)
    for name in ("cmvn.scp", "cmvn.ark", "cmvn_global.ark"):
        (out / name).unlink(missing_ok=True)
    if conf.cmvn == "global":
        cmvn.write_global(out / "cmvn_global.ark", np.sum(list(stats.values()), axis=0))
    elif conf.cmvn == "speaker":
        cmvn.write_speaker(out, stats)
        kept.cmvn_scp = read_table(out / "cmvn.scp")
    dd.write_datadir(kept, out)
    atomic_write_text(out / "feat_dim", f"{dim}\n")
    atomic_write_text(out / "features.yaml", yaml.safe_dump(to_dict(conf), sort_keys=False))
    if skip_bad:
        atomic_write_text(out / "bad_utts.txt", "".join(f"{u} {bad[u]}\n" for u in sorted(bad)))
    else:
        (out / "bad_utts.txt").unlink(missing_ok=True)
    summary = FeatureSummary(n_in, len(feats_scp), sorted(bad.items()), sum(num_frames.values()), dim,
                             seconds, time.monotonic() - t0)
    info = {"fingerprint": stamp, "summary": {k: v for k, v in dataclasses.asdict(summary).items()
                                              if k != "skipped"}}
    atomic_write_text(out / ".done", json.dumps(info) + "\n")
    log.info("features %s: %d utterances in, %d out, %d bad%s; %d frames of dim %d; %.1f s of audio at "
             "%.0fx real time", out, n_in, len(feats_scp), len(bad),
             f" (listed in {out / 'bad_utts.txt'})" if bad else "", summary.frames, dim, seconds,
             summary.x_realtime)
    return summary

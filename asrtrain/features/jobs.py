"""The worker side of ``asrtrain features``: jobs of utterances -> fbank -> one ark each, plus per-speaker
CMVN stats, run in ``nj`` worker processes (:func:`run_jobs`).

Each job is a contiguous slice of the sorted utterances (so segments of one recording share one read). A
worker is forked, as DataLoader workers are, and takes one torch thread. Every outcome comes back through one
queue: progress, a result, bad input (an AsrError, re-raised in the parent as the same one line) or a crash
(a bug: its traceback goes to the debug log). :mod:`asrtrain.features.archive` plans the jobs and assembles
their results into the output data dir.
"""

from __future__ import annotations

import logging
import os
import queue as queue_mod
import traceback
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from asrtrain.config import FeatureConfig
from asrtrain.config.file import section_from_dict
from asrtrain.data.audio import Where, read_recording, segment_bounds
from asrtrain.data.resample import resample_to, speed_perturb
from asrtrain.errors import AsrError
from asrtrain.features import cmvn
from asrtrain.features.fbank import fbank
from asrtrain.atomic import reporting_no_space
from asrtrain.progress import Progress

log = logging.getLogger(__name__)
#: A frame longer than this (ms) is taken for a wrong frame_length when audio is shorter than one frame.
LONG_FRAME_MS = 200.0


@dataclass
class Utt:
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
class Job:
    index: int
    utts: List[Utt]
    conf: Dict
    tmp_ark: str  # where the ark is written (inside the staging dir)
    final_ark: str  # where it will be once the staging dir is swapped in (named by feats.scp)
    skip_bad: bool


# ---------------------------------------------------------------------------------------------------------
# One job: audio -> fbank -> ark, plus per-speaker stats

def _read(u: Utt):
    """A whole recording, speed-perturbed when reco2speed says so (segments are in perturbed time)."""
    wave, rate = read_recording(u.spec, u.channel, where=u.wav_where)
    return (speed_perturb(wave, rate, u.speed) if u.speed != 1.0 else wave), rate


def _run_job(job: Job, report: Callable[[int], None]) -> Dict:
    """Compute one job's features into ``job.tmp_ark``; returns entries, bad utts, stats and seconds."""
    from kaldiio.matio import write_array
    conf = section_from_dict(FeatureConfig, job.conf)
    entries: List[Tuple[str, int, int]] = []  # (utt, byte offset, frames)
    bad: List[Tuple[str, str]] = []
    stats: Dict[str, np.ndarray] = {}
    seconds, done = 0.0, 0
    cache: Tuple[Optional[str], object] = (None, None)  # (rec, (wave, rate) or AsrError)
    with reporting_no_space(job.tmp_ark), open(job.tmp_ark, "wb") as fh:
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
                feats = _utterance_features(u, wave, rate, conf)
            except AsrError as err:
                if not job.skip_bad:
                    raise
                bad.append((u.utt, err.render()))
            else:
                fh.write(f"{u.utt} ".encode("utf-8"))
                entries.append((u.utt, fh.tell(), feats.shape[0]))
                write_array(fh, feats)
                stats[u.spk] = cmvn.accumulate(feats, stats.get(u.spk))
                seconds += len(wave) / rate
            done += 1
            if done % 20 == 0:
                report(20)
        fh.flush()
        os.fsync(fh.fileno())
    report(done % 20)
    return {"entries": entries, "bad": bad, "stats": stats, "seconds": seconds}


def _utterance_features(u: Utt, wave: np.ndarray, rate: int, conf: FeatureConfig) -> np.ndarray:
    """One utterance's samples -> fbank [T, D]; non-finite audio or features and too-short audio are
    AsrErrors naming the utterance and its segments (or wav.scp) line."""
    where = u.seg_where or u.wav_where
    finite = np.isfinite(wave)
    if not finite.all():
        raise where.error(f"utterance '{u.utt}' has {int(finite.size - finite.sum())} NaN or Inf audio "
                          f"sample(s) (first at sample {int(np.argmin(finite))})",
                          fix="repair the audio, or drop the utterance (asrtrain features --skip-bad)")
    wave = resample_to(wave, rate, conf.sample_rate, conf.resample, u.wav_where)
    feats = fbank(wave, conf.sample_rate, conf, seed=u.utt)
    if feats.shape[0] == 0:
        frame = int(conf.sample_rate * conf.frame_length / 1000)
        skip, default = "skip it with asrtrain features --skip-bad", FeatureConfig.frame_length
        if conf.frame_length <= default:  # data validate refuses, and data fix drops, what is under it
            fix = f"{where.drop_fix('it')} (with every utterance under one {default:g} ms frame), or {skip}"
        else:
            fix = f"{skip} (asrtrain data fix drops only what is under the default {default:g} ms frame)"
        if conf.frame_length > LONG_FRAME_MS:  # the setting, not the audio, is the likely fault
            fix = (f"features.frame_length = {conf.frame_length:g} ms is far above the usual 25 ms: lower it "
                   f"(--set frame_length=25), or {skip}")
        raise where.error(f"utterance '{u.utt}' is shorter than one frame "
                          f"({len(wave)} samples < {frame} samples of features.frame_length)", fix=fix)
    if not np.isfinite(feats).all():
        raise where.error(f"features of utterance '{u.utt}' are not finite (NaN or Inf; audio out of "
                          f"range?)",
                          fix="check the audio, or drop the utterance (asrtrain features --skip-bad)")
    return feats


def _worker(job: Job, q) -> None:
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


def run_jobs(jobs: List[Job], progress: Progress) -> List[Dict]:
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
                        raise AsrError(f"feature job {j + 1} died with exit code {p.exitcode}",
                                       fix="a negative code is the signal that killed it (-9: out of memory? "
                                           "lower --nj)")
                continue
            if kind == "progress":
                progress.update(payload)
            elif kind == "done":
                results[j] = payload
            elif kind == "error":
                raise AsrError(*payload)
            else:  # a bug, not bad input: the traceback goes to the debug log, the user gets one line
                log.debug("feature job %d crashed:\n%s", j + 1, payload)
                last = payload.strip().splitlines()[-1] if payload.strip() else "no message"
                raise AsrError(f"feature job {j + 1} crashed: {last}",
                               fix="please report this bug with the output of asrtrain -v features ...")
    finally:
        for p in procs:
            if p.is_alive() and len(results) < len(jobs):
                p.terminate()
            p.join(timeout=10)
    return [results[j] for j in range(len(jobs))]

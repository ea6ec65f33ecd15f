"""What a data dir holds, for recipes that adapt to it: counts, the audio's sample rate and hours
(``asrtrain data info``). Reads headers only, except for ``cmd |`` pipes, which are run."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Dict, Optional, Tuple

from asrtrain.data.audio import Where, is_pipe, sphere_header
from asrtrain.data.datadir import DataDir
from asrtrain.errors import AsrError

#: How many recordings (the first, in sorted order) the sample rate is read from.
RATE_PROBES = 8


def _rate_and_seconds(spec: str, where: Where) -> Tuple[int, Optional[float]]:
    """A wav.scp value -> (sample rate, duration in seconds or None when unknown)."""
    import soundfile as sf

    from asrtrain.data.audio import _run_pipe, file_info
    spec = spec.strip()
    if is_pipe(spec):
        raw = _run_pipe(spec, where)
        try:
            info = sf.info(io.BytesIO(raw))
        except Exception as err:  # noqa: BLE001 - libsndfile's own message is named
            raise where.error(f"pipe output is not readable audio ({err}) (in: {spec})",
                              fix="make the command write a wav to stdout (e.g. sph2pipe -f wav)") from None
        return int(info.samplerate), info.frames / info.samplerate
    head = sphere_header(spec)
    if head is not None and "sample_rate" in head:  # shorten-compressed SPHERE: the header still says
        rate = int(head["sample_rate"])
        n = head.get("sample_count")
        return rate, (int(n) / rate if n else None)
    try:
        info = sf.info(spec)
    except Exception as err:  # noqa: BLE001
        raise where.error(f"cannot read the audio header of {spec} ({err})",
                          fix=f"check the file, or {where.drop_fix('the recording')}") from None
    if info.frames == 0:
        info = file_info(spec, where)  # a wav written in stream mode is measured, an empty file refused
    return int(info.samplerate), info.frames / info.samplerate


def sample_rate(data: DataDir, path: Path) -> int:
    """The sample rate of the dir's audio, read from its first recordings; mixed rates are an error."""
    if not data.wav_scp:
        raise AsrError("the data dir has no recordings", path / "wav.scp", fix="give a wav.scp")
    rates: Dict[int, str] = {}
    for rec in sorted(data.wav_scp)[:RATE_PROBES]:
        where = Where(str(path / "wav.scp"), data.lines.get("wav.scp", {}).get(rec))
        rate, _ = _rate_and_seconds(data.wav_scp[rec], where)
        rates.setdefault(rate, rec)
    if len(rates) > 1:
        named = ", ".join(f"{r} Hz ({rec})" for r, rec in sorted(rates.items()))
        raise AsrError(f"recordings at different sample rates: {named}", path / "wav.scp",
                       fix="resample them to one rate (e.g. sox in a wav.scp pipe)")
    return next(iter(rates))


def hours(data: DataDir, path: Path) -> Optional[float]:
    """Hours of speech: the segments' spans (in perturbed time already), else the recordings' durations
    (over their ``reco2speed`` factor); None when unknown."""
    if data.segments:
        ends = {}
        total = 0.0
        for seg in data.segments.values():
            if seg.end < 0:
                if seg.rec not in ends:
                    _, ends[seg.rec] = _rate_and_seconds(data.wav_scp[seg.rec], Where(str(path / "wav.scp")))
                if ends[seg.rec] is None:
                    return None
                total += ends[seg.rec] - seg.start
            else:
                total += seg.end - seg.start
        return total / 3600.0
    speed = {rec: float(f) for rec, f in data.extra.get("reco2speed", {}).items()}  # validated before
    total = 0.0
    for rec, spec in data.wav_scp.items():
        _, secs = _rate_and_seconds(spec, Where(str(path / "wav.scp"), data.lines.get("wav.scp", {}).get(rec)))
        if secs is None:
            return None
        total += secs / speed.get(rec, 1.0)  # a speed-perturbed copy lasts 1/factor as long
    return total / 3600.0


def describe(path: Path, with_hours: bool = True, data: Optional[DataDir] = None) -> Dict[str, object]:
    """utterances, speakers, recordings, sample_rate (and hours) of a valid data dir (``data``: the dir
    already read, e.g. by :func:`asrtrain.data.validate.validate`)."""
    from asrtrain.data.datadir import read_datadir
    data = data if data is not None else read_datadir(path)
    out: Dict[str, object] = {"utterances": len(data.utt2spk), "speakers": len(data.spk2utt),
                              "recordings": len(data.wav_scp), "sample_rate": sample_rate(data, path)}
    if with_hours:
        h = hours(data, path)
        out["hours"] = None if h is None else round(h, 3)
    return out

"""Speed perturbation of a data dir, as Kaldi's perturb_data_dir_speed.sh (3-way) and ESPnet's asr.sh do it.

For each factor other than 1 the data dir is copied with every id prefixed ``sp<factor>-``: utterances,
recordings *and speakers* (``sp0.9-fash``), so a perturbed copy never shares a speaker -- nor CMVN stats --
with its original. Factor 1 keeps the original ids (Kaldi's and ESPnet's default; ``always_prefix`` gives
it ``sp1.0-`` too). The copies are combined into one dir, every file sorted.

- ``segments`` times, ``utt2dur`` and ``reco2dur`` are divided by the factor (a 0.9 copy is longer);
- ``utt2uniq`` maps each new utterance to its original (Kaldi writes it so that dev/held-out splits keep
  the copies of one utterance together);
- ``utt2num_frames``, ``feats.scp`` and ``cmvn.scp`` are dropped: features must be recomputed;
- other ``utt2*``/``spk2*``/``reco2*`` tables are carried with mapped keys and unchanged values.

How the audio gets perturbed. Kaldi writes a wav.scp pipe ``... sox -t wav - -t wav - speed 0.9 |``, which
needs sox at feature time (and a wav input: SPHERE first goes through sph2pipe). We default to a native
form instead: ``wav.scp`` keeps the original entry and a ``reco2speed`` table (``sp0.9-rec 0.9``) tells our
audio reader to apply :func:`asrtrain.data.resample.speed_perturb` (the same resampling sox's ``speed`` does:
pitch and tempo together). It runs in-process, needs no external tool, and is carried by subset, split and
fix like any ``reco2*`` table. Its one drawback: a Kaldi binary reading this dir would see the unperturbed
audio, so ``sox=True`` writes Kaldi's pipe form instead, for dirs meant for Kaldi's own tools.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Union

from asrtrain.data.audio import is_pipe
from asrtrain.data.datadir import DataDir, PathLike, Segment, extra_kind, write_datadir
from asrtrain.data.validate import validate
from asrtrain.errors import AsrError
from asrtrain.atomic import atomic_write_text, check_out_is_not_input

log = logging.getLogger(__name__)

SPEED_TABLE = "reco2speed"
_SCALED = ("utt2dur", "reco2dur")
_DROPPED = ("utt2num_frames", "utt2uniq")  # utt2uniq is rebuilt
#: Speed factors accepted, in --factors and (combined, when perturbed dirs are perturbed again) in a
#: reco2speed table: beyond them the audio is no longer speech a model should learn from (Kaldi's
#: recipes use 0.9 and 1.1), and a hand-written 1e9 or 0.001 would allocate or stretch without bound.
MIN_SPEED, MAX_SPEED = 0.5, 2.0
#: What perturb_speed writes into OUT_DIR: the names it wrote, one a line, so a rerun replaces its own
#: files and refuses a dir holding anything else (it never deletes what it did not make).
MARKER = ".perturb_speed"


def parse_factors(text: Union[str, Sequence[Union[str, float]]]) -> List[float]:
    """``"0.9,1.0,1.1"`` (or a sequence) -> [0.9, 1.0, 1.1]; each > 0, no repeats."""
    items = text.split(",") if isinstance(text, str) else list(text)
    out: List[float] = []
    for item in items:
        try:
            f = float(str(item).strip())
        except ValueError:
            raise AsrError(f"speed factor {item!r} is not a number", fix="give e.g. --factors 0.9,1.0,1.1") from None
        if not MIN_SPEED <= f <= MAX_SPEED:
            raise AsrError(f"--factors: speed factor {f} is outside [{MIN_SPEED}, {MAX_SPEED}]",
                           fix="give e.g. --factors 0.9,1.0,1.1")
        if f in out:
            raise AsrError(f"speed factor {f} is given twice", fix="list each factor once")
        out.append(f)
    if not out:
        raise AsrError("no speed factors given", fix="give e.g. --factors 0.9,1.0,1.1")
    return out


def prefix_of(factor: float, always_prefix: bool = False) -> str:
    """``0.9`` -> ``sp0.9-``; ``1.0`` -> ``""`` unless ``always_prefix`` (then ``sp1.0-``)."""
    return "" if factor == 1.0 and not always_prefix else f"sp{factor!r}-"


def sox_entry(spec: str, factor: float) -> str:
    """Kaldi's wav.scp pipe for a speed-perturbed recording (needs sox; SPHERE files through sph2pipe)."""
    spec = spec.strip()
    if is_pipe(spec):
        return f"{spec} sox -t wav - -t wav - speed {factor!r} |"
    if spec.lower().endswith(".sph"):
        return f"sph2pipe -f wav -p {spec} | sox -t wav - -t wav - speed {factor!r} |"
    return f"sox {spec} -t wav - speed {factor!r} |"


def _scale(value: str, factor: float) -> str:
    return f"{float(value) / factor:.4f}"


def perturb_copy(data: DataDir, factor: float, always_prefix: bool = False, sox: bool = False) -> DataDir:
    """One perturbed copy of ``data`` (ids prefixed, times scaled, audio marked for perturbation)."""
    pre = prefix_of(factor, always_prefix)
    speeds = data.extra.get(SPEED_TABLE, {})
    if sox and speeds:
        raise AsrError("the input is already speed-perturbed natively (it has reco2speed); --sox cannot stack "
                       "on it", data.path, fix="perturb the original data dir")
    utt = {u: pre + u for u in data.utt2spk}
    rec = {r: pre + r for r in data.wav_scp}

    def keyed(table, keymap):
        return None if table is None else {keymap[k]: v for k, v in table.items() if k in keymap}
    segments = None
    if data.segments is not None:
        segments = {utt[u]: Segment(rec[s.rec], round(s.start / factor, 4),
                                    s.end if s.end < 0 else round(s.end / factor, 4))
                    for u, s in data.segments.items()}
    if sox:
        wav = {rec[r]: (spec if factor == 1.0 else sox_entry(spec, factor)) for r, spec in data.wav_scp.items()}
    else:
        wav = {rec[r]: spec for r, spec in data.wav_scp.items()}
    extra: Dict[str, Dict[str, str]] = {}
    for name, table in data.extra.items():
        if name in _DROPPED or name == SPEED_TABLE:
            continue
        kind = extra_kind(name)
        keymap = {"utt": utt, "rec": rec, "spk": None}[kind]
        if keymap is None:
            new = {pre + k: v for k, v in table.items()}
        else:
            new = {keymap[k]: v for k, v in table.items() if k in keymap}
        if name in _SCALED:
            new = {k: _scale(v, factor) for k, v in new.items()}
        extra[name] = new
    uniq = data.extra.get("utt2uniq", {})
    extra["utt2uniq"] = {utt[u]: uniq.get(u, u) for u in data.utt2spk}
    if not sox:
        combined = {r: float(speeds.get(r, 1.0)) * factor for r in data.wav_scp}
        extra[SPEED_TABLE] = {rec[r]: f"{s!r}" for r, s in combined.items()}
    return DataDir(utt2spk={utt[u]: pre + s for u, s in data.utt2spk.items()}, wav_scp=wav,
                   text=keyed(data.text, utt), segments=segments,
                   reco2file_and_channel=keyed(data.reco2file_and_channel, rec), extra=extra)


def combine(parts: Sequence[DataDir]) -> DataDir:
    """The union of data dirs with disjoint ids (utils/combine_data.sh); a shared id is an error."""
    first = parts[0]
    out = replace(first, utt2spk={}, wav_scp={}, text={} if first.text is not None else None,
                  segments={} if first.segments is not None else None,
                  reco2file_and_channel={} if first.reco2file_and_channel is not None else None,
                  extra={n: {} for n in first.extra}, path=None, lines={})
    for part in parts:
        clash = set(part.utt2spk) & set(out.utt2spk) or set(part.wav_scp) & set(out.wav_scp)
        if clash:
            raise AsrError(f"id '{sorted(clash)[0]}' would occur twice in the perturbed dir",
                           fix="the input's ids must not already start with an sp<factor>- prefix")
        out.utt2spk.update(part.utt2spk)
        out.wav_scp.update(part.wav_scp)
        for name in ("text", "segments", "reco2file_and_channel"):
            if getattr(out, name) is not None:
                getattr(out, name).update(getattr(part, name) or {})
        for name, table in part.extra.items():
            out.extra.setdefault(name, {}).update(table)
    return out


def perturb_speed(data_dir: PathLike, out_dir: PathLike, factors: Union[str, Sequence[float]] = "0.9,1.0,1.1",
                  *, always_prefix: bool = False, sox: bool = False) -> DataDir:
    """Write the speed-perturbed copies of ``data_dir`` (one per factor) combined into ``out_dir``.

    The input is validated first (without reading audio); the output is validated after writing.
    Returns the written DataDir.
    """
    data_dir, out_dir = Path(data_dir), Path(out_dir)
    check_out_is_not_input(data_dir, out_dir)
    fs = parse_factors(factors)
    data = validate(data_dir, audio=False)
    if not data.wav_scp:
        raise AsrError("no wav.scp: speed perturbation needs the audio", data_dir / "wav.scp",
                       fix="perturb the data dir made by asrtrain prepare, before features")
    result = combine([perturb_copy(data, f, always_prefix, sox) for f in fs])
    earlier = _earlier_output(out_dir)
    for name in earlier:
        (out_dir / name).unlink(missing_ok=True)  # our own files of an earlier run
    (out_dir / MARKER).unlink(missing_ok=True)
    write_datadir(result, out_dir)
    written = sorted(p.name for p in out_dir.iterdir() if p.name != MARKER)
    atomic_write_text(out_dir / MARKER, "".join(n + "\n" for n in written))
    # frames=False: a copy sped up below one frame is named by features, whose advice (data fix on OUT_DIR)
    # keeps the perturbation; refused here, there would be nothing to fix, as a rerun rewrites OUT_DIR.
    validate(out_dir, audio=not sox, frames=False)
    log.info("perturb-speed %s -> %s: factors %s, %d utterances in, %d out", data_dir, out_dir,
             ",".join(map(repr, fs)), len(data.utt2spk), len(result.utt2spk))
    return replace(result, path=out_dir)


def _earlier_output(out_dir: Path) -> List[str]:
    """The files an earlier ``perturb_speed`` wrote into ``out_dir`` ([] for a new or empty dir); a dir
    holding anything else (a feature dir, another data dir, a file of the user's) is refused."""
    if not out_dir.exists():
        return []
    if not out_dir.is_dir():
        raise AsrError("OUT_DIR exists and is not a directory", out_dir, fix="give a new directory path")
    present = sorted(p.name for p in out_dir.iterdir())
    if not present:
        return []
    marker = out_dir / MARKER
    ours = set(marker.read_text(encoding="utf-8", errors="replace").split()) if marker.is_file() else set()
    foreign = [n for n in present if n != MARKER and n not in ours]
    if foreign:
        kind = ("a feature dir" if "feats.scp" in foreign else "a data dir" if "utt2spk" in foreign
                else "files perturb-speed did not write")
        raise AsrError(f"OUT_DIR holds {kind} ('{foreign[0]}'{' ...' if len(foreign) > 1 else ''}), not an "
                       "earlier perturb-speed output: it would be overwritten", out_dir,
                       fix="give a new or empty OUT_DIR (perturb-speed never deletes what it did not write)")
    return sorted(ours)


def speed_of(data: DataDir, rec: str, where: Optional[str] = None) -> float:
    """The ``reco2speed`` factor of recording ``rec`` (1.0 when the dir has none)."""
    value = data.extra.get(SPEED_TABLE, {}).get(rec)
    if value is None:
        return 1.0
    try:
        f = float(value)
    except ValueError:
        f = -1.0
    if not MIN_SPEED <= f <= MAX_SPEED:
        raise AsrError(f"speed factor {value!r} of recording '{rec}' is not a number in "
                       f"[{MIN_SPEED}, {MAX_SPEED}]",
                       where or (str(data.path / SPEED_TABLE) if data.path else SPEED_TABLE),
                       fix="write '<rec-id> <factor>' lines, or redo asrtrain data perturb-speed")
    return f

"""``asrtrain transcribe``: many inputs -> Kaldi text, json or ctm lines; a bad file gets one log line and
the others are still transcribed, then one error (``asrtrain: error: ...``) says how many failed."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import List, Optional

from asrtrain.errors import AsrError

log = logging.getLogger("asrtrain.transcribe")


def transcribe_inputs(transcriber, items: List[str], fmt: str = "text", out: Optional[Path] = None,
                      channel: Optional[int] = None, echo=print, utt2spk: Optional[Path] = None,
                      batch_size: int = 16, batch_frames: Optional[int] = None) -> None:
    """Transcribe every input; write lines to ``out`` (atomically) or through ``echo``, in input order;
    then, if any input failed, raise one :class:`AsrError`: the input's own error when there was one
    input, else how many failed and the first (each is logged as it fails). ``utt2spk`` (utt id ->
    speaker; speaker-CMVN models) normalises each file with its speaker's stats over all of that
    speaker's files, as training's per-speaker CMVN did. Segments of many files run through the model
    together, sorted by length (``batch_size`` segments, ``batch_frames`` padded frames a batch:
    :meth:`asrtrain.transcribe.model.Transcriber.transcribe_many`)."""
    from asrtrain.atomic import atomic_write_text
    from asrtrain.progress import Progress
    from asrtrain.transcribe.inputs import expand_inputs

    pairs = expand_inputs(items)
    spk_of = _speakers(transcriber, pairs, utt2spk) if utt2spk is not None else None
    lines: List[str] = []
    failed: List[tuple] = []
    t0, audio_s = time.time(), 0.0
    shown = Progress(len(pairs), "transcribe", log) if len(pairs) > 20 else None
    done = transcriber.transcribe_many(pairs, channel, None, batch_size, batch_frames, utt2spk=spk_of)
    for (utt, spec), (_, res) in zip(pairs, done):  # in input order
        if shown is not None:
            shown.update(1)
        if isinstance(res, AsrError):
            failed.append((spec, res))
            if len(pairs) > 1:
                log.error("%s", _named(spec, res))
            continue
        audio_s += res.segments[-1][1] if res.segments else 0.0
        if fmt == "json":
            lines.append(json.dumps({"utt": utt, "file": spec, "text": res.text,
                                     "words": [{"word": w.word, "start": w.start, "end": w.end}
                                               for w in res.words],
                                     "segments": [list(s) for s in res.segments]}))
        elif fmt == "ctm":
            lines += [f"{utt} 1 {w.start:.2f} {max(w.end - w.start, 0.01):.2f} {w.word} 1.00" for w in res.words]
        else:
            lines.append(f"{utt} {res.text}".rstrip())
    if shown is not None:
        shown.close()
    if out is not None:
        atomic_write_text(Path(out), "".join(ln + "\n" for ln in lines))
    else:
        for ln in lines:
            echo(ln)
    elapsed = time.time() - t0
    rtf = f", real-time factor {elapsed / audio_s:.3f}" if audio_s > 0 else ""  # none when nothing was decoded
    log.info("transcribed %d of %d inputs (%.1f s of audio) in %.1f s%s", len(pairs) - len(failed), len(pairs),
             audio_s, elapsed, rtf)
    if failed:
        raise failure(failed, len(pairs))


def failure(failed: List[tuple], total: int) -> AsrError:
    """The one error for the ``(spec, AsrError)`` inputs that failed out of ``total``: the input's own
    (naming the input when it does not) for a single input, else the count and the first."""
    spec, err = failed[0]
    if total == 1:
        named = spec in err.render() or err.path is not None
        return AsrError(err.message, err.path if named else spec, err.line, err.fix)
    return AsrError(f"{len(failed)} of {total} inputs could not be transcribed (each is named above; the "
                    f"first: {_named(spec, err)})", fix="fix or leave out the inputs named above")


def _named(spec: str, err: AsrError) -> str:
    """An input's error, led by the input unless the error names it already."""
    text = err.render()
    return text if spec in text else f"{spec}: {text}"


def _speakers(transcriber, pairs, utt2spk: Path) -> dict:
    """utt -> speaker from ``utt2spk``, which must name every input's speaker (a speaker-CMVN model)."""
    from asrtrain.data.table import read_table

    if transcriber.cfg.features.cmvn != "speaker":
        raise AsrError("--utt2spk is for a model trained with per-speaker CMVN", utt2spk,
                       fix=f"drop --utt2spk (this model's CMVN is {transcriber.cfg.features.cmvn})")
    spk_of = read_table(utt2spk)
    missing = [u for u, _ in pairs if u not in spk_of]
    if missing:
        raise AsrError(f"{len(missing)} input(s) have no speaker (e.g. '{missing[0]}')", utt2spk,
                       fix="give every utterance id (file name without suffix, or wav.scp key) a line")
    return spk_of

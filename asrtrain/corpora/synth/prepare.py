"""Synthesise the embedded corpus: espeak-ng speech into Kaldi data dirs ``train``, ``dev``, ``test``.

Layout written under ``out_dir``::

    train/ dev/ test/       wav.scp text utt2spk spk2utt utt2dur (sorted, LC_ALL=C)
    wav/<split>/<spk>/<utt>.wav   16 kHz mono 16-bit PCM
    words.txt               the grammar's vocabulary, one word per line
    speakers.txt            <spk> <split> <espeak voice> rate=.. pitch=.. range=.. gap=..
    .done                   JSON: the parameters and the summary (re-running them does nothing)

Speakers are an espeak accent (``en-us``, ``en-gb-x-rp``, ``en-029``...) with a voice variant
(``+m3``, ``+f2``, ``+klatt``...), a base rate (words per minute), pitch and pitch range. Test
speakers use variants never heard in training (:data:`TEST_VARIANTS`). Dev speakers use training
variants, but each (accent, variant) pair of a dev speaker is held out of training, and sentences
in dev or test never occur in train. Dev and test depend only on the seed and their utterance
counts, never on ``hours``, so results stay comparable across training sizes.

Every utterance is a pure function of ``(seed, split, index)``: its text, prosody, padding, gain,
noise and the espeak samples themselves (the engine is reloaded per utterance, see
:mod:`.espeak`). Output is therefore byte-identical for a seed whatever ``nj`` is.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set, Tuple

import numpy as np

from asrtrain.corpora.synth import grammar
from asrtrain.corpora.synth.espeak import (check_voice, list_languages, list_variants,
                                           loader_paths)
from asrtrain.corpora.synth.render import SAMPLE_RATE, RenderPool, Utterance
from asrtrain.data.table import spk2utt_from_utt2spk, write_table
from asrtrain.errors import AsrError
from asrtrain.progress import Progress
from asrtrain.atomic import atomic_write_text

log = logging.getLogger(__name__)

CORPUS_VERSION = 1  # bump when the grammar, voices or rendering change what a seed produces
SPLITS = ("train", "dev", "test")
# Kaldi-safe short names of the English accents shipped in espeak-ng-data/lang/gmw.
ACCENTS = {"en": "gb", "en-us": "us", "en-us-nyc": "nyc", "en-029": "carib",
           "en-gb-scotland": "scot", "en-gb-x-gbclan": "lanc", "en-gb-x-gbcwmd": "wmid",
           "en-gb-x-rp": "rp"}
# Clear variants only: no whisper, croak, robot or child-pitched ones.
TRAIN_VARIANTS = ("m1", "m2", "m3", "m4", "m5", "m8", "f1", "f2", "f3", "f5", "klatt", "klatt2",
                  "klatt3", "klatt5", "adam", "david", "edward", "linda", "robert", "paul")
TEST_VARIANTS = ("m6", "m7", "f4", "klatt4")
N_DEV_SPEAKERS = 16
RATE_WPM = (130, 190)
SNR_DB = (15.0, 35.0)
PEAK_DBFS = (-18.0, -2.0)
PAD_S = (0.1, 0.5)


@dataclass(frozen=True)
class Speaker:
    spk: str
    split: str
    voice: str  # espeak name, lang+variant
    rate: int
    pitch: int
    pitch_range: int
    word_gap: int


def check_voices(data_path: Optional[Path] = None) -> None:
    """Fail clearly unless every accent and variant we use is in the shipped espeak data."""
    data_path = data_path or loader_paths()[1]
    languages = {n.lower() for n in list_languages(data_path)}
    variants = {n.lower() for n in list_variants(data_path)}
    for accent in ACCENTS:
        for variant in TRAIN_VARIANTS + TEST_VARIANTS:
            check_voice(f"{accent}+{variant}", data_path, languages, variants)
    if set(TRAIN_VARIANTS) & set(TEST_VARIANTS):
        raise AsrError("a test voice variant is also a training variant")


def plan_speakers(seed: int) -> Dict[str, List[Speaker]]:
    """Speakers of each split; test speakers use :data:`TEST_VARIANTS` only."""
    rng = np.random.default_rng([seed, 1000])
    pool = [(a, v) for v in TRAIN_VARIANTS for a in ACCENTS]
    order = rng.permutation(len(pool))
    combos = {"dev": [pool[k] for k in order[:N_DEV_SPEAKERS]],
              "train": [pool[k] for k in order[N_DEV_SPEAKERS:]],
              "test": [(a, v) for v in TEST_VARIANTS for a in ACCENTS]}
    out: Dict[str, List[Speaker]] = {}
    for split, prefix in (("train", "tr"), ("dev", "dv"), ("test", "te")):
        out[split] = []
        for idx, (accent, variant) in enumerate(combos[split]):
            # A fixed-width index right after the split prefix: no speaker id is a prefix of
            # another, so utterance ids sort in the same order as their speakers (Kaldi's rule).
            out[split].append(Speaker(
                spk=f"{prefix}{idx:03d}-{ACCENTS[accent]}-{variant.lower()}", split=split,
                voice=f"{accent}+{variant}", rate=int(rng.integers(RATE_WPM[0] + 10, RATE_WPM[1] - 9)),
                pitch=int(rng.integers(25, 76)), pitch_range=int(rng.integers(30, 81)),
                word_gap=int(rng.random() < 0.25)))
    return out


def plan_utterance(seed: int, split: str, index: int, speakers: Sequence[Speaker],
                   exclude: Set[str], wav_root: Path) -> Utterance:
    """Utterance ``index`` of ``split``: a pure function of its arguments."""
    rng = np.random.default_rng([seed, SPLITS.index(split), index])
    spk = speakers[index % len(speakers)]
    words = grammar.sentence(rng)
    while " ".join(words) in exclude:
        words = grammar.sentence(rng)
    utt = f"{spk.spk}-{index:06d}"
    return Utterance(
        utt=utt, spk=spk.spk, text=" ".join(words), spoken=grammar.spoken_form(words),
        voice=spk.voice, rate=int(np.clip(spk.rate + rng.integers(-10, 11), *RATE_WPM)),
        pitch=spk.pitch, pitch_range=spk.pitch_range, word_gap=spk.word_gap,
        seed=int(rng.integers(1, 2**31 - 1)), lead_s=float(rng.uniform(*PAD_S)),
        trail_s=float(rng.uniform(*PAD_S)), peak_dbfs=float(rng.uniform(*PEAK_DBFS)),
        snr_db=float(rng.uniform(*SNR_DB)), noise_color=float(rng.choice([0.0, 1.0, 2.0])),
        wav=str(wav_root / split / spk.spk / f"{utt}.wav"))


def prepare_synth(out_dir, hours: float = 1.0, seed: int = 1, dev_utts: int = 200,
                  test_utts: int = 400, nj: int = 1) -> dict:
    """Synthesise the corpus into Kaldi data dirs ``out_dir/{train,dev,test}``.

    Args:
        out_dir: output directory (created).
        hours: training speech to synthesise; the smallest prefix of utterances reaching it.
        seed: everything is a function of the seed: same seed, byte-identical files.
        dev_utts, test_utts: sizes of dev and test (independent of ``hours``).
        nj: parallel processes; the output does not depend on it.

    Returns:
        the summary (also stored in ``out_dir/.done``): per split utterances, speakers, hours and
        words; vocabulary size; bytes written; synthesis speed as x real time.
    """
    if not hours > 0:
        raise AsrError(f"--hours must be positive, got {hours}")
    if dev_utts < 1 or test_utts < 1:
        raise AsrError(f"--dev-utts and --test-utts must be at least 1, got {dev_utts}, {test_utts}")
    if nj < 1:
        raise AsrError(f"--nj must be at least 1, got {nj}")
    out = Path(out_dir).resolve()
    params = {"corpus_version": CORPUS_VERSION, "hours": float(hours), "seed": int(seed),
              "dev_utts": int(dev_utts), "test_utts": int(test_utts)}
    marker = out / ".done"
    previous = _read_marker(marker)
    if previous is not None and previous.get("params") == params:
        log.info("%s already holds the synth corpus with these parameters; nothing to do", out)
        return previous["summary"]
    _clean(out, ours=previous is not None or (out / ".inprogress").exists())
    check_voices()
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / ".inprogress", json.dumps(params) + "\n")

    start = time.time()
    speakers = plan_speakers(seed)
    wav_root = out / "wav"
    test = [plan_utterance(seed, "test", i, speakers["test"], set(), wav_root)
            for i in range(test_utts)]
    dev = [plan_utterance(seed, "dev", i, speakers["dev"], {u.text for u in test}, wav_root)
           for i in range(dev_utts)]
    held_out = {u.text for u in test} | {u.text for u in dev}
    mean_s = 3.3  # first guess of seconds per utterance; refined from what we render
    progress = Progress(test_utts + dev_utts + int(hours * 3600 / mean_s), "synth", log,
                        every_s=float("inf"))
    pool = RenderPool(nj, progress)
    try:
        sizes = {"test": pool.render(test), "dev": pool.render(dev)}
        train, sizes["train"] = _render_train(pool, seed, hours, speakers["train"], held_out,
                                              wav_root)
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        progress.close()
    wall = time.time() - start

    summary = {"sample_rate": SAMPLE_RATE, "splits": {}, "vocabulary": len(grammar.vocabulary()),
               "out_dir": str(out)}
    for split, utts in (("train", train), ("dev", dev), ("test", test)):
        _write_datadir(out / split, utts, sizes[split])
        seconds = sum(sizes[split]) / SAMPLE_RATE
        summary["splits"][split] = {
            "utterances": len(utts), "speakers": len({u.spk for u in utts}),
            "hours": round(seconds / 3600, 4), "words": sum(len(u.text.split()) for u in utts)}
        log.info("%s: %d utterances, %d speakers, %.2f h", split, len(utts),
                 summary["splits"][split]["speakers"], seconds / 3600)
    atomic_write_text(out / "words.txt", "".join(w + "\n" for w in grammar.vocabulary()))
    atomic_write_text(out / "speakers.txt", "".join(
        f"{s.spk} {s.split} {s.voice} rate={s.rate} pitch={s.pitch} range={s.pitch_range} "
        f"gap={s.word_gap}\n" for split in SPLITS for s in speakers[split]))
    audio_s = sum(sum(v) for v in sizes.values()) / SAMPLE_RATE
    summary["bytes"] = sum(p.stat().st_size for p in wav_root.rglob("*.wav"))
    summary["wall_seconds"] = round(wall, 1)
    summary["x_real_time"] = round(audio_s / max(wall, 1e-9), 1)
    summary["nj"] = nj
    log.info("synthesised %.2f h of audio in %.0f s (%.0fx real time, nj=%d), %.1f MB",
             audio_s / 3600, wall, summary["x_real_time"], nj, summary["bytes"] / 1e6)
    atomic_write_text(marker, json.dumps({"params": params, "summary": summary}, indent=1) + "\n")
    (out / ".inprogress").unlink()
    return summary


def _render_train(pool: RenderPool, seed: int, hours: float, speakers: Sequence[Speaker],
                  exclude: Set[str], wav_root: Path) -> Tuple[List[Utterance], List[int]]:
    """Render training utterances 0, 1, 2... until they hold ``hours`` of audio.

    Works in batches sized from the mean duration so far; what a batch renders past the target is
    deleted, so the result (the shortest prefix reaching the target) does not depend on batching.
    """
    target = hours * 3600 * SAMPLE_RATE
    kept: List[Utterance] = []
    sizes: List[int] = []
    total, index, mean = 0, 0, 3.3 * SAMPLE_RATE
    while total < target:
        n = max(8, int(math.ceil((target - total) / mean * 1.03)))
        batch = [plan_utterance(seed, "train", i, speakers, exclude, wav_root)
                 for i in range(index, index + n)]
        index += n
        for u, size in zip(batch, pool.render(batch)):
            if total < target:
                kept.append(u)
                sizes.append(size)
                total += size
            else:
                os.unlink(u.wav)
        mean = total / len(kept)
    for d in {Path(u.wav).parent for u in batch}:
        if d.is_dir() and not any(d.iterdir()):
            d.rmdir()
    return kept, sizes


def _write_datadir(d: Path, utts: List[Utterance], sizes: List[int]) -> None:
    d.mkdir(parents=True, exist_ok=True)
    utt2spk = {u.utt: u.spk for u in utts}
    write_table(d / "wav.scp", {u.utt: u.wav for u in utts})
    write_table(d / "text", {u.utt: u.text for u in utts})
    write_table(d / "utt2spk", utt2spk)
    write_table(d / "spk2utt", spk2utt_from_utt2spk(utt2spk))
    write_table(d / "utt2dur", {u.utt: f"{n / SAMPLE_RATE:.4f}" for u, n in zip(utts, sizes)})


def _read_marker(marker: Path) -> Optional[dict]:
    """The JSON in ``.done``, ``{}`` for a marker we cannot read, None when there is none."""
    if not marker.exists():
        return None
    try:
        data = json.loads(marker.read_text())
        return data if isinstance(data, dict) else {}
    except (ValueError, UnicodeDecodeError):
        return {}


def _clean(out: Path, ours: bool) -> None:
    """Remove a previous corpus of ours; refuse to overwrite data dirs someone else wrote."""
    existing = [out / n for n in SPLITS + ("wav",) if (out / n).exists()]
    if not existing:
        return
    if not ours:
        raise AsrError(f"{existing[0]} exists but was not written by asrtrain prepare synth",
                       out, fix="choose an empty output directory or remove it")
    log.info("removing the previous synth corpus in %s (parameters changed or run interrupted)", out)
    for path in existing:
        shutil.rmtree(path)
    for name in (".done", "words.txt", "speakers.txt"):
        if (out / name).exists():
            (out / name).unlink()

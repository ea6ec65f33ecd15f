"""Decoding speed at Hub5 size: our Python lexicon search vs flashlight's C++ decoder, side by side.

A synthetic case the size of Hub5'00 decoding, made here and deterministic from ``--seed``:

* a vocabulary of ``--vocab`` (30,000) made-up words (syllable strings; shorter words more frequent),
* training text from a Zipf process with recurring phrases (so that 3- and 4-grams carry information),
  a word ``--order`` (4) gram trained on it with :mod:`asrtrain.lm.ngram` (every vocabulary word occurs),
* a sentencepiece unigram tokenizer of ``--pieces`` (1000) trained on that text,
* ``--utts`` test sentences from the same process (``--full``: 4458, as Hub5'00) and, for each, CTC
  log-probs (T, V): blanks with a peak of the reference's pieces, floor noise, and confusions (a piece
  swapped with a similar one, at times more likely than the reference), deletions and insertions.

Both searches decode every utterance with the same beam, token beam, LM weight and word bonus; each
utterance is given to one then the other, so machine load hits both alike. Flashlight's lexicon spells
each word with the tokenizer's own segmentation (ours accepts any segmentation; the references here use
the tokenizer's). Audio seconds = output frames x ``--frame-ms`` (30 ms: 10 ms frames, subsample 3).
The LM, tokenizer and text are cached under ``--work``; LM loading is reported apart from decoding.

The last lines are ``decode_rtf_ours``, ``decode_rtf_flashlight``, ``decode_wer_ours``,
``decode_wer_flashlight``.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import List, Sequence

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ONSETS = ["", "b", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z", "ch", "sh",
          "th", "br", "st", "tr", "pl", "gr"]
VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "ou", "y"]
CODAS = ["", "", "", "n", "r", "s", "t", "l", "m", "ng", "ck"]


def make_vocab(n: int, rng: np.random.Generator) -> List[str]:
    """``n`` distinct made-up words, most frequent first (shorter words tend to be more frequent)."""
    words, seen = [], set()
    while len(words) < n:
        nsyl = rng.choice([1, 2, 3, 4], p=[0.2, 0.4, 0.3, 0.1])
        w = "".join(ONSETS[rng.integers(len(ONSETS))] + VOWELS[rng.integers(len(VOWELS))]
                    + CODAS[rng.integers(len(CODAS))] for _ in range(nsyl))
        if w not in seen:
            seen.add(w)
            words.append(w)
    key = np.array([len(w) for w in words]) + rng.normal(0, 2.0, len(words))
    return [words[i] for i in np.argsort(key, kind="stable")]


class TextSource:
    """Sentences from a Zipf unigram mixed with Zipf-distributed recurring phrases of 2-5 words."""

    def __init__(self, vocab_size: int, rng: np.random.Generator, phrases: int = 20000):
        self.rng = rng
        p = (np.arange(vocab_size) + 3.0) ** -1.05
        self.unigram = p / p.sum()
        self.phrases = [rng.choice(vocab_size, size=rng.integers(2, 6), p=self.unigram).tolist()
                        for _ in range(phrases)]
        q = (np.arange(phrases) + 5.0) ** -1.0
        self.phrase_p = q / q.sum()
        self._words: List[int] = []
        self._phr: List[int] = []

    def _draw(self, stock: List[int], size: int, p: np.ndarray) -> int:
        if not stock:
            stock.extend(self.rng.choice(len(p), size=size, p=p).tolist())
        return stock.pop()

    def sentence(self) -> List[int]:
        n = int(min(40, max(1, round(self.rng.lognormal(math.log(7.0), 0.7)))))
        out: List[int] = []
        while len(out) < n:
            if self.rng.random() < 0.6:
                out += self.phrases[self._draw(self._phr, 100000, self.phrase_p)]
            else:
                out.append(self._draw(self._words, 100000, self.unigram))
        return out[:n]


def source(args, rng: np.random.Generator):
    """The vocabulary and the text process of ``--seed`` (the same for the LM text and the test)."""
    vocab = make_vocab(args.vocab, rng)
    return vocab, TextSource(args.vocab, rng)


def build_case(work: Path, args) -> Path:
    """Vocabulary, LM text, ARPA LM and tokenizer, cached in a directory named by the sizes and seed."""
    from asrtrain.config import TokenizerConfig
    from asrtrain.lm.ngram import train_ngram
    from asrtrain.text.tokenizer import train_tokenizer

    case = work / f"v{args.vocab}_s{args.lm_sents}_o{args.order}_p{args.pieces}_seed{args.seed}"
    if (case / "lm.arpa").is_file() and (case / "tokenizer.model").is_file():
        return case
    case.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    rng = np.random.default_rng(args.seed)
    vocab, src = source(args, rng)
    sents = [[vocab[i] for i in src.sentence()] for _ in range(args.lm_sents)]
    perm = rng.permutation(args.vocab)  # every word occurs at least once
    sents += [[vocab[i] for i in perm[k:k + 10]] for k in range(0, args.vocab, 10)]
    (case / "vocab.txt").write_text("".join(w + "\n" for w in vocab))
    (case / "text").write_text("".join(f"lm{i:07d} {' '.join(s)}\n" for i, s in enumerate(sents)))
    train_tokenizer(case / "text", case, TokenizerConfig("unigram", args.pieces))
    train_ngram(sents, args.order).write_arpa(case / "lm.arpa")
    log(f"built the case in {time.time() - t0:.0f} s: {len(sents)} LM sentences, "
        f"{sum(map(len, sents))} words -> {case}")
    return case


def emissions(ids: Sequence[int], pieces: List[str], similar: List[np.ndarray], rng: np.random.Generator,
              confusion: float, hold: float = 0.2) -> np.ndarray:
    """(T, V) CTC log-probs for the piece ids ``ids`` (see the module docstring)."""
    V = len(pieces)
    plan = [-1] * int(rng.poisson(6))  # -1: a blank frame
    for k in ids:
        plan += [-1] * int(rng.poisson(3)) + [k] * (2 if rng.random() < hold else 1)
    plan += [-1] * int(rng.poisson(6))
    T = len(plan)
    probs = np.exp(rng.normal(-11.0, 2.0, (T, V)))
    for t, k in enumerate(plan):
        if k < 0:
            probs[t, 0] = rng.uniform(0.85, 0.999)
            if rng.random() < 0.01:  # insertion
                probs[t, rng.integers(2, V)] = rng.uniform(0.3, 0.6)
            continue
        u = rng.random()
        if u < confusion:  # a similar piece competes, sometimes wins
            probs[t, k] = rng.uniform(0.2, 0.55)
            probs[t, rng.choice(similar[k])] = rng.uniform(0.15, 0.6)
            probs[t, 0] = rng.uniform(0.02, 0.2)
        elif u < confusion + 0.03:  # deletion: the piece is weaker than blank
            probs[t, k] = rng.uniform(0.15, 0.4)
            probs[t, 0] = rng.uniform(0.5, 0.8)
        else:
            probs[t, k] = rng.uniform(0.7, 0.995)
            probs[t, 0] = rng.uniform(0.0, 0.5) * (1.0 - probs[t, k])
    probs /= probs.sum(1, keepdims=True)
    return np.log(probs).astype(np.float32)


def similar_pieces(pieces: List[str]) -> List[np.ndarray]:
    """For each piece, pieces of the same kind (word start or not) with the same first letter."""
    groups = {}
    for i, p in enumerate(pieces[2:], 2):
        start = p.startswith("\u2581")
        body = p[1:] if start else p
        groups.setdefault((start, body[:1]), []).append(i)
    out = [np.array([1])] * 2
    for i, p in enumerate(pieces[2:], 2):
        start = p.startswith("\u2581")
        body = p[1:] if start else p
        cand = [j for j in groups[(start, body[:1])] if j != i] \
            or [j for j in range(2, len(pieces)) if j != i]
        out.append(np.array(cand))
    return out


def log(msg: str) -> None:
    print(msg, flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", type=Path, default=Path("bench_out/decode"), help="cache dir")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--vocab", type=int, default=30000)
    ap.add_argument("--lm-sents", type=int, default=60000, help="sentences of LM training text")
    ap.add_argument("--order", type=int, default=4)
    ap.add_argument("--pieces", type=int, default=1000)
    ap.add_argument("--utts", type=int, default=300)
    ap.add_argument("--full", action="store_true", help="4458 utterances, as Hub5'00")
    ap.add_argument("--beam", type=int, default=16)
    ap.add_argument("--token-beam", type=int, default=10)
    ap.add_argument("--lm-weight", type=float, default=0.5, help="weight of the natural-log LM score")
    ap.add_argument("--word-bonus", type=float, default=3.0)
    ap.add_argument("--confusion", type=float, default=0.25, help="share of piece frames with a rival")
    ap.add_argument("--hold", type=float, default=0.2, help="share of pieces peaking over 2 frames, not 1")
    ap.add_argument("--frame-ms", type=float, default=30.0)
    ap.add_argument("--skip-ours", action="store_true", help="flashlight only (e.g. a quick --full run)")
    args = ap.parse_args(argv)
    if args.full:
        args.utts = 4458
    logging.basicConfig(level=logging.WARNING)
    import torch

    torch.set_num_threads(1)
    from asrtrain.decode.ctc import greedy
    from asrtrain.decode.flashlight import FlashlightSearch
    from asrtrain.decode.lexicon import Lexicon, lexicon_beam_search
    from asrtrain.lm.ngram import read_arpa
    from asrtrain.score.wer import Counts, count_words
    from asrtrain.text.tokenizer import Tokenizer

    case = build_case(args.work, args)
    tok = Tokenizer(case / "tokenizer.model")
    pieces = [tok.sp.id_to_piece(i) for i in range(tok.vocab_size)]
    vocab = (case / "vocab.txt").read_text().split()

    t0 = time.time()
    lm = None if args.skip_ours else read_arpa(case / "lm.arpa")
    lexicon = None if args.skip_ours else Lexicon(lm.vocab, pieces)
    load_ours = time.time() - t0
    t0 = time.time()
    fl = FlashlightSearch(pieces, vocab, lambda w: tok.sp.encode(w), case / "lm.arpa", beam=args.beam,
                          lm_weight=args.lm_weight, word_bonus=args.word_bonus, unk=tok.sp.unk_id(),
                          token_beam=args.token_beam)
    load_fl = time.time() - t0
    order_counts = [0] * args.order
    with open(case / "lm.arpa") as fh:
        for line in fh:
            if line.startswith("ngram "):
                k, n = line[6:].split("=")
                order_counts[int(k) - 1] = int(n)

    _, src = source(args, np.random.default_rng(args.seed))  # the LM text's phrases ...
    src.rng = np.random.default_rng(args.seed + 1000)  # ... and new sentences
    similar = similar_pieces(pieces)
    counts = {"greedy": Counts(), "ours": Counts(), "flashlight": Counts()}
    secs = {"ours": 0.0, "flashlight": 0.0}
    frames = same = 0
    t_start = time.time()
    for u in range(args.utts):
        ref = [vocab[i] for i in src.sentence()]
        lp = emissions(tok.encode(" ".join(ref)), pieces, similar, np.random.default_rng([args.seed, u]),
                       args.confusion, args.hold)
        frames += lp.shape[0]
        counts["greedy"] += count_words(ref, tok.decode(greedy(lp)[0]).split())
        if not args.skip_ours:
            t0 = time.perf_counter()
            ours = lexicon_beam_search(lp, lexicon, lm, beam=args.beam, lm_weight=args.lm_weight,
                                       word_bonus=args.word_bonus, token_beam=args.token_beam)
            secs["ours"] += time.perf_counter() - t0
            counts["ours"] += count_words(ref, tok.decode(ours[0]).split())
        t0 = time.perf_counter()
        hyp = fl(lp)
        secs["flashlight"] += time.perf_counter() - t0
        counts["flashlight"] += count_words(ref, tok.decode(hyp[0]).split())
        same += (not args.skip_ours) and tok.decode(hyp[0]) == tok.decode(ours[0])
        if (u + 1) % 100 == 0:
            log(f"  {u + 1}/{args.utts} utterances, {time.time() - t_start:.0f} s")
    audio = frames * args.frame_ms / 1000.0
    words = counts["greedy"].wrd
    log(f"machine: {platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} cores "
        f"(loadavg {os.getloadavg()[0]:.1f}); torch threads 1")
    log(f"case: vocab {args.vocab}, {args.order}-gram ({' '.join(map(str, order_counts))} n-grams, "
        f"{args.lm_sents} LM sentences), {tok.vocab_size} pieces, seed {args.seed}")
    log(f"test: {args.utts} utterances, {words} words, {frames} frames = {audio:.0f} s of audio at "
        f"{args.frame_ms:g} ms/frame; confusion {args.confusion}, hold {args.hold}")
    log(f"search: beam {args.beam}, token beam {args.token_beam}, lm_weight {args.lm_weight} (ln), "
        f"word_bonus {args.word_bonus}")
    log(f"LM load: ours (read_arpa + lexicon) {load_ours:.1f} s, flashlight (KenLM + trie) {load_fl:.1f} s")
    log(f"{'search':12s} {'WER%':>6s} {'sub':>5s} {'del':>5s} {'ins':>5s} {'decode s':>9s} {'RTF':>8s}")
    for name, c in counts.items():
        if name == "ours" and args.skip_ours:
            continue
        s = secs.get(name)
        log(f"{name:12s} {c.wer:6.2f} {c.sub:5d} {c.dele:5d} {c.ins:5d} "
            + (f"{s:9.1f} {s / audio:8.5f}" if s is not None else f"{'-':>9s} {'-':>8s}"))
    if not args.skip_ours:
        log(f"identical hypotheses: {same}/{args.utts}; flashlight {secs['ours'] / secs['flashlight']:.1f}x "
            f"faster")
        log(f"decode_rtf_ours: {secs['ours'] / audio:.5f}")
    log(f"decode_rtf_flashlight: {secs['flashlight'] / audio:.5f}")
    if not args.skip_ours:
        log(f"decode_wer_ours: {counts['ours'].wer:.2f}")
    log(f"decode_wer_flashlight: {counts['flashlight'].wer:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

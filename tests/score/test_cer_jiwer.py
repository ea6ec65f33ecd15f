"""`asrtrain score --cer` (sclite's costs over characters, as ESPnet's char trn), and jiwer as an independent
check of our counts where unit and sclite costs must agree."""

import random

import jiwer
import pytest

from asrtrain.score.cer import char_counts, score_cer
from asrtrain.score.report import score_text
from asrtrain.score.wer import count_words
from tests.helpers.cli_helpers import one_error, run
from tests.helpers.sctk_tools import sclite_alignments


def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_cer_counts_characters_with_spaces(tmp_path):
    ref = write(tmp_path / "ref", ["s-1 AB CD", "s-2 X", "s-3 YES"])
    hyp = write(tmp_path / "hyp", ["s-1 AB CX", "s-2 X Y"])  # s-3 missing: all deletions
    c = score_cer(ref, hyp, name="dev", out_dir=tmp_path / "sc")
    # "AB CD"->"AB CX": 1 sub; "X"->"X Y": 2 ins (space, Y); "YES"->"": 3 del; 5 + 1 + 3 = 9 ref chars
    assert (c.snt, c.wrd, c.cor, c.sub, c.dele, c.ins, c.serr) == (3, 9, 5, 1, 3, 2, 3)
    assert c.wer == pytest.approx(100 * 6 / 9)
    assert c.wer == pytest.approx(100 * jiwer.cer(["AB CD", "X", "YES"], ["AB CX", "X Y", ""]))
    line = (tmp_path / "sc" / "cer_summary").read_text().strip()
    assert line == "%CER 66.7 | 3 9 | 55.6 11.1 33.3 22.2 66.7 100.0 | dev"


def test_score_cli_prints_wer_then_cer(tmp_path):
    ref = write(tmp_path / "ref", ["a-1 ONE TWO", "a-2 THREE"])
    hyp = write(tmp_path / "hyp", ["a-1 ONE TOO", "a-2 THREE"])
    r = run("score", ref, hyp, "--cer", "--name", "test")
    assert r.exit_code == 0, r.output
    lines = r.output.strip().splitlines()
    assert lines[-2].startswith("%WER 33.3 | 2 3 |") and lines[-2].endswith("| test")
    assert lines[-1].startswith("%CER 8.3 | 2 12 |")  # "TWO"->"TOO": 1 of 7 + 5 characters
    assert "text mode" in one_error(run("score", "--stm", ref, "--ctm", hyp, "--cer"))


def _corrupt(rng, words, vocab):
    """A hypothesis with isolated edits (never two neighbours), where unit and sclite costs agree."""
    out, i = [], 0
    while i < len(words):
        op = rng.random()
        if op < 0.1:
            out.append(rng.choice(vocab))  # substitution (may hit the same word: then correct)
        elif op < 0.18:
            pass  # deletion
        elif op < 0.25:
            out += [words[i], rng.choice(vocab)]  # insertion after a kept word
        else:
            out.append(words[i])
            i += 1
            continue
        if i + 1 < len(words):
            out.append(words[i + 1])  # keep a neighbour intact
        i += 2
    return out


def test_text_mode_word_counts_match_jiwer_on_isolated_errors():
    rng = random.Random(7)
    vocab = "one two three four five six seven eight nine zero oh yes no go stop".split()
    refs, hyps = [], []
    for _ in range(300):
        ref = [rng.choice(vocab) for _ in range(rng.randint(1, 12))]
        refs.append(ref)
        hyps.append(_corrupt(rng, ref, vocab))
    ours = [count_words(r, h) for r, h in zip(refs, hyps)]
    theirs = jiwer.process_words([" ".join(r) for r in refs], [" ".join(h) if h else "" for h in hyps])
    assert sum(c.wrd for c in ours) == theirs.hits + theirs.substitutions + theirs.deletions
    assert sum(c.err for c in ours) == theirs.substitutions + theirs.deletions + theirs.insertions
    # (the split may differ at ties: "a b" -> "b c" is 2 substitutions for jiwer, del + match + ins for sclite)
    total_wer = 100 * sum(c.err for c in ours) / sum(c.wrd for c in ours)
    assert total_wer == pytest.approx(100 * theirs.wer)
    assert 5 < total_wer < 40  # the check compared real errors


def test_sclite_costs_can_count_more_errors_than_jiwer():
    """Why text mode keeps sclite's weighted DP: it may trade 5 substitutions for 3 del + 3 ins."""
    ref, hyp = "x1 x2 x3 a b".split(), "a b y1 y2 y3".split()
    ours = count_words(ref, hyp)
    theirs = jiwer.process_words(" ".join(ref), " ".join(hyp))
    assert (theirs.substitutions, theirs.deletions, theirs.insertions) == (5, 0, 0)
    assert (ours.sub, ours.dele, ours.ins, ours.cor) == (0, 3, 3, 2)  # 3*6 = 18 < 4*5 = 20 in sclite's costs


def test_char_counts_empty():
    assert char_counts([], []).snt == 0


def test_cer_uses_sclite_costs_not_unit_costs():
    """jiwer finds 5 substitutions in abcde -> xyzab; sclite (4 a substitution, 3 an insertion or a
    deletion) keeps the shared "ab": 3 deletions + 3 insertions, 6 errors of 5 characters."""
    c = char_counts(["abcde"], ["xyzab"])
    assert (c.cor, c.sub, c.dele, c.ins) == (2, 0, 3, 3)
    assert c.line("x", "%CER").startswith("%CER 120.0 | 1 5 |")
    assert jiwer.cer("abcde", "xyzab") == 1.0  # what the old count gave


def test_cer_counts_the_insertions_of_an_empty_reference(tmp_path):
    ref = write(tmp_path / "ref", ["a-1", "a-2 hello there"])
    hyp = write(tmp_path / "hyp", ["a-1 x y", "a-2 hello there"])
    c = score_cer(ref, hyp)
    assert (c.snt, c.wrd, c.ins, c.serr) == (2, 11, 3, 1)  # "x y": three characters inserted
    assert c.line("t", "%CER") == "%CER 27.3 | 2 11 | 100.0 0.0 0.0 27.3 27.3 50.0 | t"


def test_cer_parity_with_sclite_on_espnet_character_trn(tmp_path, sctk):
    """Per utterance, our character counts equal sclite's on the same text written as ESPnet writes its
    char trn (one token per character, a space as <space>)."""
    rng = random.Random(3)
    alphabet = "abcdefgh"
    refs, hyps = {}, {}
    for i in range(60):
        words = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 5))) for _ in range(rng.randint(0, 4))]
        hyp = [w if rng.random() < 0.6 else "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 5)))
               for w in words if rng.random() < 0.9] + (["ab"] if rng.random() < 0.2 else [])
        refs[f"s-{i:03d}"], hyps[f"s-{i:03d}"] = words, hyp
    write(tmp_path / "ref", [f"{u} {' '.join(w)}".strip() for u, w in refs.items()])
    write(tmp_path / "hyp", [f"{u} {' '.join(w)}".strip() for u, w in hyps.items()])
    trn = lambda words, u: " ".join("<space>" if ch == " " else ch for ch in " ".join(words)) + f" ({u})"
    write(tmp_path / "ref.trn", [trn(w, u) for u, w in refs.items()])
    write(tmp_path / "hyp.trn", [trn(w, u) for u, w in hyps.items()])
    rows = sclite_alignments(sctk, ["-r", str(tmp_path / "ref.trn"), "trn", "-h", str(tmp_path / "hyp.trn"),
                                    "trn", "-i", "rm"])
    theirs = {uid.lower(): tuple(r) for uid, *r in rows}
    ours = {}
    for u in refs:
        c = char_counts([" ".join(refs[u])], [" ".join(hyps[u])])
        ours[u.lower()] = (c.cor, c.sub, c.dele, c.ins)
    assert ours == theirs
    total = score_cer(tmp_path / "ref", tmp_path / "hyp")
    assert total.err == sum(s + d + i for _, s, d, i in theirs.values()) > 0

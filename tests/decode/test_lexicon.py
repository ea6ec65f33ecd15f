"""Vocabulary-constrained CTC search with a word LM."""

import numpy as np
import pytest

from asrtrain.decode.ctc import prefix_beam_search
from asrtrain.decode.lexicon import Lexicon, lexicon_beam_search
from asrtrain.lm.ngram import train_ngram

# piece ids: 0 blank, then pieces of a toy sentencepiece inventory
PIECES = ["<blank>", "\u2581ca", "t", "r", "\u2581the", "\u2581a", "\u2581dog", "\u2581cat", "s"]


def frames(*dists, floor=1e-4):
    """(T, V) log-probs: each frame a dict {piece: prob}, the rest shared by blank and a floor."""
    rows = []
    for d in dists:
        row = np.full(len(PIECES), floor)
        for piece, p in d.items():
            row[PIECES.index(piece)] = p
        row[0] = max(row[0], 1.0 - sum(d.values()))
        rows.append(np.log(row / row.sum()))
    return np.array(rows)


def words(tokens):
    return "".join(PIECES[t] for t in tokens).replace("\u2581", " ").split()


def test_out_of_vocabulary_spelling_is_corrected():
    # greedy reads "ca r" -> "car", which is not a word; "cat" (spelled ca+t) is, with some evidence for t
    lp = frames({"\u2581ca": 0.9}, {}, {"r": 0.5, "t": 0.4}, {})
    assert words(prefix_beam_search(lp, beam=8)[0]) == ["car"]
    lex = Lexicon(["cat", "the", "a", "dog"], PIECES)
    toks, fr, _ = lexicon_beam_search(lp, lex, None, beam=8)
    assert words(toks) == ["cat"] and len(fr) == len(toks)


def test_any_segmentation_of_a_word_is_accepted():
    lex = Lexicon(["cat"], PIECES)
    one = frames({"\u2581cat": 0.9}, {})
    two = frames({"\u2581ca": 0.9}, {"t": 0.9})
    assert words(lexicon_beam_search(one, lex, None)[0]) == ["cat"]
    assert words(lexicon_beam_search(two, lex, None)[0]) == ["cat"]


def test_lm_decides_between_acoustically_ambiguous_words():
    lm = train_ngram([["the", "dog"]] * 20 + [["a", "cat"]] * 20, 2)
    lex = Lexicon(lm.vocab, PIECES)
    # "the" is clear; the second word is a coin toss between dog and cat, slightly favouring cat
    lp = frames({"\u2581the": 0.95}, {}, {"\u2581cat": 0.48, "\u2581dog": 0.47}, {})
    assert words(lexicon_beam_search(lp, lex, None, beam=8)[0]) == ["the", "cat"]
    assert words(lexicon_beam_search(lp, lex, lm, beam=8, lm_weight=1.0)[0]) == ["the", "dog"]


def test_without_lm_on_clean_input_it_equals_plain_beam_search():
    lex = Lexicon(["the", "dog", "cats"], PIECES)
    lp = frames({"\u2581the": 0.9}, {}, {"\u2581dog": 0.8}, {"\u2581cat": 0.9}, {"s": 0.7}, {})
    plain = prefix_beam_search(lp, beam=16)  # both searches see every token of this small inventory
    got = lexicon_beam_search(lp, lex, None, beam=16)
    assert got[0] == plain[0] and got[1] == plain[1] and words(got[0]) == ["the", "dog", "cats"]
    assert abs(got[2] - plain[2]) < 1e-9  # no LM, no bonus: the same CTC score


def test_hypothesis_ending_inside_a_word_is_not_returned_when_a_complete_one_exists():
    lex = Lexicon(["cat", "a"], PIECES)
    lp = frames({"\u2581a": 0.5, "\u2581ca": 0.45}, {})  # "ca" alone is only a prefix of cat
    assert words(lexicon_beam_search(lp, lex, None, beam=8)[0]) == ["a"]


def test_when_every_hypothesis_ends_inside_a_word_the_unfinished_word_is_left_out():
    """Flashlight's decodeEnd, and Kaldi's final states: only word ends are final. With beam 1 the last
    frame keeps only "the ca" (a prefix of cat): the output is "the", never the non-word "ca"."""
    lex = Lexicon(["the", "cat"], PIECES)
    lp = frames({"\u2581the": 0.95}, {}, {"\u2581ca": 0.95})
    unfinished = []
    toks, fr, score = lexicon_beam_search(lp, lex, None, beam=1, unfinished=unfinished)
    assert words(toks) == ["the"] and fr == [0] and unfinished == ["ca"]
    # the score is the kept path's, the unfinished word's acoustics included, without its word bonus
    assert abs(score - lexicon_beam_search(lp, lex, None, beam=1, word_bonus=2.0)[2] + 2.0) < 1e-9
    # a beam that keeps a complete hypothesis ends at a word's end as before, and reports nothing
    unfinished = []
    assert words(lexicon_beam_search(lp, lex, None, beam=8, unfinished=unfinished)[0]) == ["the"]
    assert unfinished == []


def test_the_fallback_ranks_with_the_lm_end_and_keeps_the_nbest_distinct():
    """Without their unfinished words the hypotheses end with </s> scored, as flashlight's decodeEnd
    scores them: "the" (acoustically ahead) never ends a training sentence, "a" always does."""
    from asrtrain.decode.lexicon import lexicon_nbest

    lm = train_ngram([["the", "cat"]] * 20 + [["a"]] * 20, 2)
    lex = Lexicon(lm.vocab, PIECES)
    # "the" and "a" compete; both then start "ca" at the last frame (a prefix of cat only)
    lp = frames({"\u2581the": 0.5, "\u2581a": 0.45}, {}, {"\u2581ca": 0.95})
    got = lexicon_nbest(lp, lex, lm, beam=2, lm_weight=1.0, nbest=4)
    assert [words(t) for t, _, _ in got] == [["a"], ["the"]]
    assert all(len(f) == len(t) == 1 for t, f, _ in got)
    no_end = lexicon_nbest(lp, lex, None, beam=2, nbest=4)  # no LM: the acoustics alone rank them
    assert [words(t) for t, _, _ in no_end] == [["the"], ["a"]]


# -- open vocabulary (oov_penalty) ------------------------------------------------------------------

def test_open_vocabulary_keeps_a_clearly_spelled_word_outside_it():
    lex = Lexicon(["cat", "the", "a", "dog"], PIECES)
    lp = frames({"\u2581ca": 0.9}, {}, {"r": 0.85, "t": 0.1}, {})  # "car", clearly; not in the vocabulary
    assert words(lexicon_beam_search(lp, lex, None, beam=8)[0]) == ["cat"]  # closed: the nearest word
    assert words(lexicon_beam_search(lp, lex, None, beam=8, oov_penalty=-1.0)[0]) == ["car"]
    # a penalty larger than the acoustic evidence for r over t keeps the vocabulary word
    assert words(lexicon_beam_search(lp, lex, None, beam=8, oov_penalty=-5.0)[0]) == ["cat"]


def test_an_oov_word_pays_its_penalty_once_and_the_bonus():
    lex = Lexicon(["the"], PIECES)
    lp = frames({"\u2581ca": 0.9}, {"r": 0.9}, {"s": 0.9}, {})  # "cars": leaves the prefixes at "ca"
    plain = prefix_beam_search(lp, beam=16)
    got = lexicon_beam_search(lp, lex, None, beam=16, oov_penalty=-2.0, word_bonus=0.5)
    assert words(got[0]) == ["cars"] and got[0] == plain[0]
    assert abs(got[2] - (plain[2] - 2.0 + 0.5)) < 1e-9


def test_an_oov_word_that_starts_as_a_vocabulary_prefix_is_charged_when_it_ends():
    lex = Lexicon(["cat"], PIECES)
    lp = frames({"\u2581ca": 0.95}, {})  # "ca" is a prefix of "cat" but not a word
    plain = prefix_beam_search(lp, beam=16)
    got = lexicon_beam_search(lp, lex, None, beam=16, oov_penalty=-1.5)
    assert words(got[0]) == ["ca"] and abs(got[2] - (plain[2] - 1.5)) < 1e-9


def test_the_lm_scores_an_oov_word_as_unk_and_forgets_it():
    lm = train_ngram([["the", "dog"]] * 20 + [["a", "cat"]] * 20, 2)
    lex = Lexicon(lm.vocab, PIECES)
    lp = frames({"\u2581ca": 0.9}, {"r": 0.9}, {}, {"\u2581dog": 0.9}, {})  # "car dog"
    plain = prefix_beam_search(lp, beam=16)
    got = lexicon_beam_search(lp, lex, lm, beam=16, lm_weight=1.0, oov_penalty=-0.5)
    assert words(got[0]) == ["car", "dog"]
    unk, state = lm.score(lm.begin_state(), "<unk>")
    dog, state = lm.score((), "dog")  # the history after an unknown word is empty
    expect = plain[2] - 0.5 + unk + dog + lm.end_score(state)
    assert abs(got[2] - expect) < 1e-9


def test_a_prohibitive_penalty_gives_the_closed_search():
    lm = train_ngram([["the", "dog"]] * 20 + [["a", "cat"]] * 20, 2)
    lex = Lexicon(lm.vocab, PIECES)
    rng = np.random.default_rng(0)
    for _ in range(5):
        lp = np.log(rng.dirichlet(np.ones(len(PIECES)) * 0.3, size=8))
        closed = lexicon_beam_search(lp, lex, lm, beam=8, lm_weight=0.7, word_bonus=1.0)
        shut = lexicon_beam_search(lp, lex, lm, beam=8, lm_weight=0.7, word_bonus=1.0, oov_penalty=-1e6)
        assert closed[0] == shut[0] and abs(closed[2] - shut[2]) < 1e-6


def test_the_nbest_is_sorted_starts_with_the_best_and_scores_each_hypothesis_exactly():
    """Without an LM and with nothing pruned (a beam wider than every prefix, every token tried), each
    n-best score is its tokens' exact CTC log-likelihood (torch's ctc_loss sums every alignment), the
    list is sorted, its token sequences are distinct, and its head is lexicon_beam_search's answer."""
    import torch
    import torch.nn.functional as F

    from asrtrain.decode.lexicon import lexicon_nbest

    lex = Lexicon(["cat", "cats", "the", "a", "dog"], PIECES)
    rng = np.random.default_rng(5)
    for _ in range(4):
        lp = np.log(rng.dirichlet(np.ones(len(PIECES)) * 0.5, size=6))
        best = lexicon_beam_search(lp, lex, None, beam=4000, token_beam=len(PIECES), prune=-1e9)
        nbest = lexicon_nbest(lp, lex, None, beam=4000, token_beam=len(PIECES), prune=-1e9, nbest=8)
        assert nbest[0] == best and 1 < len(nbest) <= 8
        scores = [s for _, _, s in nbest]
        assert scores == sorted(scores, reverse=True)
        assert len({tuple(t) for t, _, _ in nbest}) == len(nbest)
        for tokens, _, score in nbest:
            assert all(w in lex.words for w in words(tokens))
            exact = -F.ctc_loss(torch.tensor(lp).unsqueeze(1), torch.tensor([tokens]), [len(lp)],
                                [len(tokens)], reduction="sum")
            assert score == pytest.approx(float(exact), abs=1e-6)
    assert lexicon_nbest(lp, lex, None, nbest=1) == [lexicon_beam_search(lp, lex, None)]

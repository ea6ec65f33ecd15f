import math

import numpy as np

from asrtrain.decode.ctc import greedy, prefix_beam_search
from asrtrain.decode.word_times import ctm_lines, words_with_times


def logp(rows):
    p = np.asarray(rows, dtype=np.float64)
    return np.log(p / p.sum(1, keepdims=True))


def test_greedy_merges_repeats_and_drops_blanks():
    lp = logp([[0.1, 0.8, 0.1], [0.1, 0.8, 0.1], [0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]])
    tokens, frames, _ = greedy(lp)
    assert tokens == [1, 1, 2] and frames == [0, 3, 4]


def test_beam_finds_the_more_probable_labelling_than_greedy():
    # Best path is blank,blank (empty), but "1" summed over its paths is more probable.
    lp = logp([[0.4, 0.35, 0.25], [0.4, 0.35, 0.25]])
    g, _, _ = greedy(lp)
    b, _, score = prefix_beam_search(lp, beam=4)
    assert g == [] and b == [1]
    p = np.exp(lp)
    p1 = p[0, 1] * p[1, 1] + p[0, 1] * p[1, 0] + p[0, 0] * p[1, 1]
    assert math.isclose(score, math.log(p1), rel_tol=1e-9)


def test_beam_equals_greedy_on_peaky_output():
    rng = np.random.default_rng(0)
    best = rng.integers(0, 6, 40)
    rows = np.full((40, 6), 0.01)
    rows[np.arange(40), best] = 1.0
    lp = logp(rows)
    assert prefix_beam_search(lp, beam=8)[0] == greedy(lp)[0]


def test_words_with_times_and_ctm():
    pieces = ["\u2581go", "\u2581to", "ron", "to"]
    words = words_with_times(pieces, [2, 10, 12, 15], 0.03)
    assert [w for w, _, _ in words] == ["go", "toronto"]
    assert abs(words[1][1] - 0.30) < 1e-9 and abs(words[1][2] - 0.18) < 1e-9
    lines = ctm_lines("u1", words, {"u1": ("rec1", 10.0, 12.0)}, {"rec1": ("sw_4390", "A")})
    assert lines[0] == "sw_4390 A 10.06 0.03 go 1.00"
    assert lines[1].startswith("sw_4390 A 10.30 0.18 toronto")

"""Word n-gram LM: a proper distribution, ARPA round trip, Kneser-Ney by hand, bad ARPA files."""

import math

import pytest

from asrtrain.errors import AsrError
from asrtrain.lm.ngram import EOS, UNK, read_arpa, train_ngram

CORPUS = [s.split() for s in ["a b c", "a b d", "b c a", "c a b c", "a a b", "d c b a", "b b c d"]]


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_every_context_is_a_distribution(order):
    lm = train_ngram(CORPUS, order)
    words = lm.vocab + [EOS, UNK]
    for ctx in [(), ("<s>",), ("a",), ("a", "b"), ("b", "c", "d"), ("x", "y"), ("<s>", "a", "b")]:
        total = sum(10 ** lm.logprob10(ctx, w) for w in words)
        assert math.isclose(total, 1.0, abs_tol=1e-9), (ctx, total)


def test_arpa_round_trip(tmp_path):
    lm = train_ngram(CORPUS, 3)
    lm.write_arpa(tmp_path / "lm.arpa")
    text = (tmp_path / "lm.arpa").read_text()
    assert "\\data\\" in text and "ngram 3=" in text and text.rstrip().endswith("\\end\\")
    back = read_arpa(tmp_path / "lm.arpa")
    for ctx in [(), ("a",), ("a", "b"), ("c", "a"), ("d", "d")]:
        for w in lm.vocab + [EOS]:
            assert abs(back.logprob10(ctx, w) - lm.logprob10(ctx, w)) < 1e-5
    state = back.begin_state()
    total = 0.0
    for w in "a b c".split():
        lp, state = back.score(state, w)
        total += lp
    total += back.end_score(state)
    assert math.isclose(total, lm.sentence_logprob10("a b c".split()) * math.log(10), rel_tol=1e-5)


def test_bigram_kneser_ney_by_hand():
    # Bigrams of "<s> x y </s>" twice and "<s> y </s>" once. Continuation counts: x 1 (<s>), y 2 (x, <s>),
    # </s> 1 (y); every count of counts is too small for modified discounts, so D = n1/(n1+2 n2).
    lm = train_ngram([["x", "y"], ["x", "y"], ["y"]], 2)
    # unigram level: continuation counts x:1 y:2 </s>:1 -> n1=2, n2=1, D=0.5, total 4, gamma = 3*0.5/4
    d, total = 0.5, 4
    vocab = 4  # x, y, </s>, <unk>
    gamma1 = 3 * d / total
    p_uni = {"x": (1 - d) / total + gamma1 / vocab, "y": (2 - d) / total + gamma1 / vocab,
             EOS: (1 - d) / total + gamma1 / vocab}
    # bigram counts <s> x:2, x y:2, y </s>:3, <s> y:1 -> n1=1, n2=2, D = 1/5; context x holds only x y
    d2 = 1 / (1 + 2 * 2)
    p_y_given_x = (2 - d2) / 2 + (d2 / 2) * p_uni["y"]
    assert math.isclose(10 ** lm.logprob10(("x",), "y"), p_y_given_x, rel_tol=1e-9)
    # an unseen bigram backs off with the context's interpolation weight
    assert math.isclose(10 ** lm.logprob10(("x",), "x"), (d2 / 2) * p_uni["x"], rel_tol=1e-9)


def test_malformed_arpa_is_one_line_error(tmp_path):
    bad = tmp_path / "bad.arpa"
    bad.write_text("\\data\\\nngram 1=2\n\n\\1-grams:\n-0.3\ta\n-0.3 b c d e\n\\end\\\n")
    with pytest.raises(AsrError) as e:
        read_arpa(bad)
    assert f"{bad}:6" in str(e.value) and "\n" not in str(e.value)
    short = tmp_path / "short.arpa"
    short.write_text("\\data\\\nngram 1=3\n\n\\1-grams:\n-0.3\ta\n-0.3\tb\n\\end\\\n")
    with pytest.raises(AsrError, match="holds 2 entries but .* declares 3"):
        read_arpa(short)


def test_bigram_modified_kneser_ney_three_discounts_by_hand():
    """A corpus whose bigram counts-of-counts define all three modified-KN discounts (Chen & Goodman):
    every seen bigram's probability is (c - D(c)) / c(h) + gamma(h) p_lower(w), with D1, D2, D3+ and
    gamma(h) = (D1 N1(h) + D2 N2(h) + D3+ N3+(h)) / c(h) computed here from the raw counts."""
    import random
    from collections import Counter

    rng = random.Random(2)
    words = [f"w{i}" for i in range(40)]
    sents = [rng.choices(words, [1 / (i + 1) for i in range(40)], k=rng.randint(1, 6)) for _ in range(150)]
    lm = train_ngram(sents, 2)
    big = Counter()
    for s in sents:
        seq = ["<s>"] + s + [EOS]
        big.update(zip(seq, seq[1:]))
    n = Counter(min(c, 5) for c in big.values())
    assert all(n[k] > 0 for k in (1, 2, 3, 4)), n
    y = n[1] / (n[1] + 2 * n[2])
    d = {1: 1 - 2 * y * n[2] / n[1], 2: 2 - 3 * y * n[3] / n[2], 3: 3 - 4 * y * n[4] / n[3]}
    assert all(0 < d[k] < k + 1 for k in (1, 2, 3)), d  # valid, so the model must take the modified path
    assert len({round(v, 9) for v in d.values()}) == 3, d
    ctx_total, ctx_n = Counter(), Counter()
    for (h, _), c in big.items():
        ctx_total[h] += c
        ctx_n[(h, min(c, 3))] += 1
    checked = 0
    for (h, w), c in big.items():
        gamma = sum(d[k] * ctx_n[(h, k)] for k in (1, 2, 3)) / ctx_total[h]
        want = (c - d[min(c, 3)]) / ctx_total[h] + gamma * 10 ** lm.logprob10((), w)
        assert math.isclose(10 ** lm.logprob10((h,), w), want, rel_tol=1e-9), (h, w, c)
        checked += 1
    assert checked > 50


def test_order_is_bounded_and_empty_orders_are_said(tmp_path, caplog):
    """--order 100000 on two sentences wrote 99,995 empty sections and said nothing."""
    with pytest.raises(AsrError, match="--order must be 1 to 10, got 100000"):
        train_ngram(CORPUS, 100000)
    lm = train_ngram([["a", "b"]], 5)  # <s> a b </s>: 4-grams at most
    assert lm.order == 5
    assert "orders 5..5 of the LM are empty" in caplog.text


def test_lm_text_refuses_eps_and_counts_id_only_lines_in_the_log(tmp_path, caplog):
    import logging
    from asrtrain.lm.ngram import read_sentences
    text = tmp_path / "text"
    text.write_text("u1 a <eps> b\n")
    with pytest.raises(AsrError, match="holds '<eps>'"):
        list(read_sentences(text))
    text.write_text("u1 a b\nu2\nu3 c\n")
    with caplog.at_level(logging.INFO):
        assert list(read_sentences(text)) == [["a", "b"], ["c"]]
    assert "1 line(s) with an id and no words are not sentences of the LM" in caplog.text

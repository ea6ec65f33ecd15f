"""The opt-in flashlight engine of the lexicon search, checked against ours (the oracle)."""

from types import SimpleNamespace

import numpy as np
import pytest

from asrtrain.config import DecodeConfig
from asrtrain.decode import flashlight
from asrtrain.decode.lexicon import Lexicon, lexicon_beam_search
from asrtrain.decode.run import _lexicon_search
from asrtrain.errors import AsrError
from asrtrain.lm.ngram import train_ngram
from asrtrain.score.wer import Counts, count_words

needs_fl = pytest.mark.skipif(not flashlight.available(),
                              reason="flashlight-text is not installed (pip install flashlight-text==0.0.7)")

W = "\u2581"
SYL = ["ba", "ko", "mi", "tu", "re", "sa", "lo", "ne", "di", "pu"]
PIECES = ["<blank>", "<unk>"] + [W + s for s in SYL] + SYL


def small_case(seed=0, n_words=40, n_utts=40):
    """Words of 1-3 syllables (each syllable a piece), a trigram of a phrase-heavy text, and CTC
    log-probs of test sentences: one-frame peaks, blanks, and a rival piece on 30% of the peaks."""
    rng = np.random.default_rng(seed)
    spell = {}
    while len(spell) < n_words:
        syl = [SYL[i] for i in rng.integers(len(SYL), size=rng.integers(1, 4))]
        spell.setdefault("".join(syl), [PIECES.index(W + syl[0])] + [PIECES.index(s) for s in syl[1:]])
    words = sorted(spell)
    phrases = [list(rng.choice(words, size=3)) for _ in range(15)]

    def sentence():
        out = []
        while len(out) < 6:
            out += phrases[rng.integers(len(phrases))] if rng.random() < 0.7 \
                else [words[rng.integers(n_words)]]
        return out[:6]

    lm = train_ngram([sentence() for _ in range(400)], 3)
    utts = []
    for _ in range(n_utts):
        ref = sentence()
        ids = [k for w in ref for k in spell[w]]
        plan = [-1] * 2
        for k in ids:
            plan += [-1] * int(rng.integers(1, 3)) + [k]
        plan += [-1] * 2
        p = np.full((len(plan), len(PIECES)), 1e-4)
        for t, k in enumerate(plan):
            if k < 0:
                p[t, 0] = 0.95
            elif rng.random() < 0.3:
                start = PIECES[k].startswith(W)
                rival = rng.choice([j for j in range(2, len(PIECES))
                                    if j != k and PIECES[j].startswith(W) == start])
                p[t, k], p[t, rival], p[t, 0] = rng.uniform(0.3, 0.5), rng.uniform(0.25, 0.55), 0.1
            else:
                p[t, k], p[t, 0] = rng.uniform(0.7, 0.95), 0.05
        utts.append((ref, np.log(p / p.sum(1, keepdims=True))))
    return spell, lm, utts


def words_of(tokens):
    return "".join(PIECES[t] for t in tokens).replace(W, " ").split()


@needs_fl
def test_same_hypotheses_and_wer_as_ours_on_a_small_case(tmp_path):
    spell, lm, utts = small_case()
    lm.write_arpa(tmp_path / "lm.arpa")
    lex = Lexicon(lm.vocab, PIECES)
    fl = flashlight.FlashlightSearch(PIECES, lm.vocab, spell.__getitem__, tmp_path / "lm.arpa", beam=32,
                                     lm_weight=0.5, word_bonus=2.0, unk=1)
    ours_c, fl_c, greedy_c, same = Counts(), Counts(), Counts(), 0
    for ref, lp in utts:
        o = lexicon_beam_search(lp, lex, lm, beam=32, lm_weight=0.5, word_bonus=2.0)
        f = fl(lp)
        ours_c += count_words(ref, words_of(o[0]))
        fl_c += count_words(ref, words_of(f[0]))
        greedy = [k for i, k in enumerate(lp.argmax(1)) if k and (i == 0 or k != lp[i - 1].argmax())]
        greedy_c += count_words(ref, words_of(greedy))
        if o[0] == f[0]:
            same += 1
            assert o[1] == f[1]  # the same frame per token: ctm times agree
            assert abs(o[2] - f[2]) < 0.05  # and the same score (LM weight matched across ln/log10)
    assert greedy_c.wer > 10 and ours_c.wer < greedy_c.wer / 2  # the search has work to do
    assert same >= 0.9 * len(utts)
    assert abs(fl_c.wer - ours_c.wer) <= 2.0


@needs_fl
def test_without_lm_the_vocabulary_corrects_a_spelling():
    pieces = ["<blank>", "<unk>", W + "ca", "t", "r"]
    lp = np.log(np.array([[0.05, 0.01, 0.9, 0.02, 0.02], [0.9, 0.01, 0.03, 0.03, 0.03],
                          [0.09, 0.01, 0.0, 0.4, 0.5], [0.9, 0.01, 0.03, 0.03, 0.03]]) + 1e-6)
    fl = flashlight.FlashlightSearch(pieces, ["cat"], lambda w: [2, 3], None, beam=8, unk=1)
    ours = lexicon_beam_search(lp, Lexicon(["cat"], pieces), None, beam=8)
    assert fl(lp)[:2] == ours[:2] == ([2, 3], [0, 2])


@needs_fl
def test_a_finished_word_cannot_be_held_over_two_frames():
    """The documented difference: flashlight holds a finished word only on its silence token."""
    pieces = ["<blank>", "<unk>", W + "the", W + "cat"]
    row = {"b": [0.9, 0.01, 0.05, 0.04], "the": [0.03, 0.01, 0.95, 0.01], "cat": [0.03, 0.01, 0.01, 0.95]}
    lp = np.log(np.array([row["b"], row["the"], row["the"], row["b"], row["cat"], row["b"]]))
    fl = flashlight.FlashlightSearch(pieces, ["the", "cat"], lambda w: [pieces.index(W + w)], None, beam=8,
                                     unk=1)
    ours = lexicon_beam_search(lp, Lexicon(["the", "cat"], pieces), None, beam=8)
    got = fl(lp)
    assert got[0] == ours[0] == [2, 3]
    assert got[2] < ours[2] - 1.0  # frame 2 paid as blank (ln 0.03), not as a held "the"


@needs_fl
def test_a_model_that_holds_its_pieces_is_warned_of_once(caplog):
    """The difference above turns into repeated or dropped words when a model's pieces last several frames
    (an audit's one-piece-per-word tone model: every utterance wrong): the engine says so, once."""
    pieces = ["<blank>", "<unk>", W + "the", W + "cat"]
    row = {"b": [0.9, 0.01, 0.05, 0.04], "the": [0.03, 0.01, 0.95, 0.01], "cat": [0.03, 0.01, 0.01, 0.95]}
    peaky = np.log(np.array([row["b"], row["the"], row["b"], row["cat"], row["b"]] * 20))
    held = np.log(np.array([row["b"], row["the"], row["the"], row["the"], row["b"], row["cat"], row["cat"]] * 10))
    fl = flashlight.FlashlightSearch(pieces, ["the", "cat"], lambda w: [pieces.index(W + w)], None, beam=8,
                                     unk=1)
    fl(peaky)
    assert "holds a piece over consecutive frames" not in caplog.text  # one-frame peaks: no warning
    fl(held)
    fl(held)
    assert caplog.text.count("holds a piece over consecutive frames") == 1


@needs_fl
def test_an_unfinished_last_word_is_left_out_as_ours_leaves_it_out():
    """When no hypothesis of the last beam ends at a word's end, flashlight lets all compete (decodeEnd)
    and leaves the unfinished word out of its words but not of its tokens; the engine drops its tokens,
    so both engines output "the", not "the ca"."""
    pieces = ["<blank>", "<unk>", W + "the", W + "ca", "t"]
    spell = {"the": [2], "cat": [3, 4]}
    lp = np.log(np.array([[0.03, 0.01, 0.94, 0.01, 0.01], [0.94, 0.01, 0.03, 0.01, 0.01],
                          [0.03, 0.01, 0.01, 0.94, 0.01]]))
    fl = flashlight.FlashlightSearch(pieces, ["the", "cat"], spell.__getitem__, None, beam=1, unk=1)
    ours = lexicon_beam_search(lp, Lexicon(["the", "cat"], pieces), None, beam=1)
    assert fl(lp)[:2] == ours[:2] == ([2], [0])
    assert fl.unfinished == ["ca"]


def test_engine_is_validated():
    DecodeConfig(engine="flashlight").validate()
    with pytest.raises(AsrError, match="decode.engine"):
        DecodeConfig(engine="kaldi").validate()


@needs_fl
def test_unigram_lm_is_refused_in_one_line(tmp_path):
    train_ngram([["a", "b"], ["b", "a"]], 1).write_arpa(tmp_path / "uni.arpa")
    with pytest.raises(AsrError) as err:
        _lexicon_search(None, tmp_path / "uni.arpa", None, 8, 0.5, 1.0, "flashlight")
    msg = str(err.value)
    assert "KenLM cannot load a unigram LM" in msg and "--engine ours" in msg and "\n" not in msg


def test_missing_flashlight_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(flashlight, "available", lambda: False)
    with pytest.raises(AsrError, match="pip install flashlight-text"):
        _lexicon_search(None, tmp_path / "lm.arpa", None, 8, 0.5, 1.0, "flashlight")


class _Sp:
    def id_to_piece(self, i):
        return PIECES[i]

    def unk_id(self):
        return 1

    def encode(self, w):
        return [PIECES.index(W + w)] if W + w in PIECES else [1]


@needs_fl
def test_a_malformed_lm_gets_our_parsers_message(tmp_path):
    arpa = ("\\data\\\nngram 1=3\nngram 2=1\n\n\\1-grams:\n-0.5\t<s>\t-0.3\n-0.5\t</s>\n-0.5\tba\t-0.2\n\n"
            "\\2-grams:\n-0.1\t<s> ba\n")  # cut before \end\
    (tmp_path / "lm.arpa").write_text(arpa)
    tok = SimpleNamespace(sp=_Sp(), vocab_size=len(PIECES))
    with pytest.raises(AsrError, match="no \\\\end\\\\ line"):
        _lexicon_search(tok, tmp_path / "lm.arpa", None, 8, 0.5, 1.0, "flashlight")
    search = _lexicon_search(tok, None, _words(tmp_path), 8, 0.5, 1.0, "flashlight")  # --words, no LM
    assert search.engine == "flashlight"


def _words(tmp_path):
    (tmp_path / "words.txt").write_text("ba\nko\n")
    return tmp_path / "words.txt"

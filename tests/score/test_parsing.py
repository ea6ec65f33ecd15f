"""Pure-Python tests of each parsing rule: STM, CTM, GLM, transcript syntax and the alignment costs."""

import pytest

from asrtrain.errors import AsrError
from asrtrain.score.ctm import CtmItem, filter_ctm, read_ctm, text_to_ctm
from asrtrain.score.glm import DEFAULT_GLM, load_rules, parse_glm
from asrtrain.score.hub5 import assign_to_segments, clean_ref_items, hyp_drop, is_non_speech
from asrtrain.score.stm import Segment, detokenize, parse_stm_line, read_stm, tokenize
from asrtrain.score.wer import Counts, Word, align, align_words, build_net, chain, cost, make_word, words_equal


# --- transcript syntax -------------------------------------------------------------------------
def test_tokenize_alternations_optional_and_nesting():
    assert tokenize("a (uh) { b / c d / @ } e") == ["a", "(uh)", [["b"], ["c", "d"], []], "e"]
    assert tokenize("{YES / YEAH}") == [[["YES"], ["YEAH"]]]
    assert tokenize("{ { a / b } / c }") == [[[[["a"], ["b"]]], ["c"]]]
    assert detokenize(tokenize("x { a / @ } y")) == "x { a / @ } y"
    with pytest.raises(AsrError, match="without a closing"):
        tokenize("{ a / b", "f.stm", 3)
    with pytest.raises(AsrError, match="without a matching"):
        tokenize("a }")


def test_make_word_decodes_optional_and_fragments():
    assert make_word("(uh)", opt_del=True) == Word("uh", opt=True)
    assert make_word("(uh)") == Word("(uh)")  # without -D parentheses are literal
    assert make_word("abo-", frag_corr=True).frag and make_word("-out", frag_corr=True).frag
    assert not make_word("-", frag_corr=True).frag
    assert make_word("(abo-)", opt_del=True, frag_corr=True) == Word("abo-", opt=True, frag=True)


def test_fragment_matching_as_sclite_F():
    f = lambda t: make_word(t, frag_corr=True)
    assert words_equal(f("abo-"), f("about"))
    assert not words_equal(f("abo-"), f("ab"))
    assert words_equal(f("-bout"), f("about"))
    assert words_equal(f("about"), f("abo-"))  # a hypothesis fragment matches too
    assert not words_equal(Word("abo-"), Word("about"))  # only with -F


def test_costs_are_sclites():
    a, b, o, n = Word("a"), Word("b"), Word("uh", opt=True), Word("@")
    assert (cost(a, a), cost(a, b), cost(a, None), cost(None, a)) == (0, 4000, 3000, 3000)
    assert (cost(o, None), cost(n, None), cost(None, n), cost(n, n)) == (2000, 1, 1, 1000)


# --- alignment ---------------------------------------------------------------------------------
def ops(pairs):
    return "".join(p[0] for p in pairs)


def test_align_plain_and_tie_breaking():
    assert ops(align_words("a b c".split(), "a x c".split())) == "CSC"
    assert ops(align_words("a b".split(), [])) == "DD"
    assert ops(align_words([], "a b".split())) == "II"
    # sub (4) beats delete+insert (6); one sub plus one insertion here
    assert ops(align_words(["a"], ["x", "a"])) == "IC"
    assert ops(align_words(["a", "b"], ["b", "c"])) == "DCI"


def test_optional_words_forgiven_and_counted_correct():
    mk = lambda t: make_word(t, opt_del=True)
    ref = build_net(["a", "(uh)", "b"], make=mk)
    pairs = align(ref, chain([Word("a"), Word("b")]))
    assert ops(pairs) == "CCC" and pairs[1][2] is None  # deleted optional word: correct, no hyp word
    assert Counts().add_pairs(pairs).wrd == 3
    assert ops(align(ref, chain([Word("a"), Word("uh"), Word("b")]))) == "CCC"
    assert ops(align(ref, chain([Word("a"), Word("x"), Word("b")]))) == "CSC"


def test_alternations_pick_the_best_branch_and_null_is_free():
    net = build_net(["a", [["b"], ["c", "d"], []], "e"])
    assert [p[2].text for p in align(net, chain([Word(w) for w in "a c d e".split()]))] == list("acde")
    pairs = align(net, chain([Word("a"), Word("e")]))
    assert ops(pairs) == "CC"  # the @ branch: nothing to delete
    assert ops(align(net, chain([Word("a"), Word("b"), Word("e")]))) == "CCC"


def test_counts_percentages_and_empty():
    c = Counts().add_pairs(align_words("a b c d".split(), "a x c d e".split()))
    assert (c.cor, c.sub, c.dele, c.ins, c.serr, c.snt) == (3, 1, 0, 1, 1, 1)
    assert c.line("n") == "%WER 50.0 | 1 4 | 75.0 25.0 0.0 25.0 50.0 100.0 | n"
    assert Counts().wer == 0.0


# --- STM -----------------------------------------------------------------------------------------
def test_stm_line_fields_labels_and_ignore():
    s = parse_stm_line("sw_1 A sw_1_A 0.50 2.25 <O,en,M> hi (uh) there")
    assert (s.file, s.chan, s.spk, s.begin, s.end, s.labels, s.text) == \
        ("sw_1", "A", "sw_1_A", 0.5, 2.25, "<O,en,M>", "hi (uh) there")
    assert parse_stm_line("f 1 s 0 1 no labels here").text == "no labels here"
    assert parse_stm_line("f 1 s 0 1").text == ""
    assert parse_stm_line("f 1 s 0 1 <O> IGNORE_TIME_SEGMENT_IN_SCORING").ignored
    assert not parse_stm_line("f 1 s 0 1 <O> words").ignored


def test_stm_file_comments_and_errors(tmp_path):
    p = tmp_path / "x.stm"
    p.write_text(';; comment\n;; CATEGORY "0" "" ""\nf A s 0.0 1.0 <O> a b\n\nf A s 1.0 2.0 c\n')
    segs = read_stm(p)
    assert [s.text for s in segs] == ["a b", "c"] and segs[1].line == 5
    p.write_text("f A s zero 1.0 a\n")
    with pytest.raises(AsrError, match=r"x.stm:1: begin/end times"):
        read_stm(p)
    p.write_text("f A s 2.0 1.0 a\n")
    with pytest.raises(AsrError, match="ends"):
        read_stm(p)
    p.write_text("f A s\n")
    with pytest.raises(AsrError, match="five leading"):
        read_stm(p)
    p.write_text("f A s 0 1 { a / b\n")
    with pytest.raises(AsrError, match=r"x.stm:1: '\{' without"):
        read_stm(p)


# --- CTM -----------------------------------------------------------------------------------------
def test_ctm_words_confidences_and_alternations(tmp_path):
    p = tmp_path / "h.ctm"
    p.write_text(";; c\nsw_1 A 1.00 0.20 hi 0.9\nsw_1 A * * <ALT_BEGIN>\nsw_1 A 1.2 0.2 I'M\n"
                 "sw_1 A * * <ALT>\nsw_1 A 1.2 0.1 I\nsw_1 A 1.3 0.1 AM\nsw_1 A * * <ALT_END>\n")
    items = read_ctm(p)
    assert items[0].word == "hi" and items[0].mid == pytest.approx(1.1)
    assert items[1].alts == [[("I'M", 1.2, 0.2)], [("I", 1.2, 0.1), ("AM", 1.3, 0.1)]]
    assert items[1].mid == pytest.approx(1.35)  # the largest word midpoint, as sclite
    p.write_text("sw_1 A 1.0 x hi\n")
    with pytest.raises(AsrError, match="h.ctm:1"):
        read_ctm(p)
    p.write_text("sw_1 A 1.0 0.1\n")
    with pytest.raises(AsrError, match="five fields"):
        read_ctm(p)
    p.write_text("sw_1 A * * <ALT_BEGIN>\nsw_1 A 1 1 a\n")
    with pytest.raises(AsrError, match="ALT_END"):
        read_ctm(p)
    for bad in ("sw_1 A 1.0 0.1 hi notaconf\n", "sw_1 A 1.0 0.1 hi 0.9 extra\n", "sw_1 A 1.0 0.1 hi nan\n"):
        p.write_text("sw_1 A 0.5 0.1 ok 1.0\n" + bad)  # csrfilt would score the extra fields as words
        with pytest.raises(AsrError, match="h.ctm:2: expected .* numeric confidence"):
            read_ctm(p)


def test_text_to_ctm_spreads_words_evenly(tmp_path):
    (tmp_path / "text").write_text("u1 a b c d\nu2\n")
    (tmp_path / "segments").write_text("u1 r1 1.0 3.0\nu2 r1 4.0 5.0\n")
    (tmp_path / "r2fc").write_text("r1 sw_1 A\n")
    items = text_to_ctm(tmp_path / "text", tmp_path / "segments", tmp_path / "r2fc")
    assert [(i.file, i.chan, i.begin, i.dur, i.word) for i in items] == [
        ("sw_1", "A", 1.0, 0.5, "a"), ("sw_1", "A", 1.5, 0.5, "b"),
        ("sw_1", "A", 2.0, 0.5, "c"), ("sw_1", "A", 2.5, 0.5, "d")]
    (tmp_path / "segments").write_text("u1 r9 1.0 3.0\nu2 r1 4.0 5.0\n")
    with pytest.raises(AsrError, match="r9"):
        text_to_ctm(tmp_path / "text", tmp_path / "segments", tmp_path / "r2fc")


# --- GLM -----------------------------------------------------------------------------------------
GLM = """;; test rules
* name "t"
* desc "test"
* format = 'NIST1'
* case_sensitive = 'F'
UH => %HESITATION / [ ] __ [ ]
I'M => { I'M / I AM } / [ ] __ [ ]
A B => X / [ ] __ [ ]
A => Y / [ ] __ [ ]   ;; trailing comment
TH => QQ
;; INPUT_DEPENDENT_APPLICATION = "hyp"
ZED => Z / [ ] __ [ ]
"""


def test_glm_parse_headers_comments_sections(tmp_path):
    p = tmp_path / "t.glm"
    p.write_text(GLM)
    g = parse_glm(p)
    assert [r.src for _, r in g.rules] == ["UH", "I'M", "A B", "A", "TH", "ZED"]
    assert g.rules[1][1].dst == "{ I'M / I AM }" and g.rules[0][1].left == " "
    assert g.rules[4][1].left == "" and g.rules[5][0] == "hyp"
    assert not g.case_sensitive
    p.write_text("* name 'x'\nno arrow here\n")
    with pytest.raises(AsrError, match=r"t.glm:2: not a rule"):
        parse_glm(p)


def test_glm_rewrite_as_rfilter1(tmp_path):
    p = tmp_path / "t.glm"
    p.write_text(GLM)
    ref = load_rules(p, "stm", "ref")
    hyp = load_rules(p, "ctm", "hyp")
    # first matching rule in file order wins at a position; output is not rewritten again
    assert ref.filter_text("a b c a uh uh the") == "X C Y %HESITATION %HESITATION QQE"
    assert ref.filter_text("i'm (uh) zed") == "{ I'M / I AM } (%HESITATION) ZED"
    assert hyp.filter_text("zed") == "Z"
    # -dh splits hyphenated words but keeps fragments; optional groups are split per word
    assert ref.filter_text("well-known abo- (-bout)") == "WELL KNOWN ABO- (-BOUT)"
    assert ref.filter_text("(two words)") == "(TWO) (WORDS)"
    assert ref.filter_text("well-known", delete_hyphens=False) == "WELL-KNOWN"


def test_shipped_glm_covers_the_hub5_conventions():
    rules = load_rules(DEFAULT_GLM, "stm", "ref")
    for h in "UH UM EH MM HM AH HUH HA ER OOF HEE ACH EEE EW".split():
        assert rules.filter_text(h.lower()) == "%HESITATION"
    assert rules.filter_text("mhm") == rules.filter_text("uh-huh")
    assert rules.filter_text("don't") == "{ DON'T / DO NOT }"
    assert rules.filter_text("ok") == rules.filter_text("okay")


def test_filter_ctm_splits_times_and_drops(tmp_path):
    p = tmp_path / "t.glm"
    p.write_text(GLM)
    items = [CtmItem("f", "A", 1.0, 0.4, "i'm"), CtmItem("f", "A", 2.0, 0.2, "uh"),
             CtmItem("f", "A", 3.0, 0.4, "well-known"), CtmItem("f", "A", 4.0, 0.2, "[noise]")]
    out = filter_ctm(items, load_rules(p, "ctm", "hyp"), hyp_drop("optional"))
    assert out[0].alts == [[("I'M", 1.0, 0.4)], [("I", 1.0, 0.2), ("AM", 1.2, 0.2)]]
    assert [(o.word, o.begin, o.dur) for o in out[1:]] == [("WELL", 3.0, 0.2), ("KNOWN", 3.2, 0.2)]


# --- Hub5 helpers --------------------------------------------------------------------------------
def test_non_speech_and_hesitation_policy():
    assert is_non_speech("[laughter]") and is_non_speech("<unk>") and is_non_speech("((")
    assert not is_non_speech("word")
    assert clean_ref_items(["a", "[noise]", "%HESITATION", [["%HESITATION"], []]]) == \
        ["a", "(%HESITATION)", [["(%HESITATION)"], []]]
    assert clean_ref_items(["%HESITATION"], "keep") == ["%HESITATION"]
    assert hyp_drop()("%hesitation") and not hyp_drop("keep")("%HESITATION")


def test_time_mediated_assignment_as_sclite():
    segs = [Segment("f", "A", "s", 1.0, 2.0, "", ""), Segment("f", "A", "s", 3.0, 4.0, "", ""),
            Segment("f", "A", "s", 5.0, 6.0, "", "")]
    w = lambda b, d=0.2: CtmItem("f", "A", b, d, f"w{b}")
    items = [w(0.1), w(1.5), w(1.85, 0.4), w(2.5), w(5.5), w(7.0)]
    got = [[i.word for i in seg] for seg in assign_to_segments(segs, items)]
    # before the first segment -> first; midpoint past the end -> next; gap -> next; tail -> last
    assert got == [["w0.1", "w1.5"], ["w1.85", "w2.5"], ["w5.5", "w7.0"]]

"""Hub5 scoring parity with real NIST sclite (Debian sctk).

Reference pipeline, independent of our code: sctk's own ``csrfilt.sh -dh`` applies the shipped GLM to
the STM and the CTM (as hubscr does), the documented pre-filter is applied with plain regexps (drop
``[...]`` tokens; with ``hesitations="optional"`` also bare ref ``%HESITATION`` -> ``(%HESITATION)`` and
hyp ``%HESITATION`` lines dropped; with ``"keep"`` hesitations go to sclite untouched), then
``sclite -F -D`` aligns. Our ``score_hub5`` gets the raw files. Per-speaker Corr/Sub/Del/Ins and
sentence counts must be equal.
"""

import random
import re

import pytest

from asrtrain.score.glm import DEFAULT_GLM
from asrtrain.score.hub5 import align_hub5, score_hub5, subset_totals

from tests.helpers.sctk_tools import run_sctk, sclite_alignments


def reference_filter(sctk, stm, ctm, tmp_path, glm=DEFAULT_GLM, hesitations="optional", sclite_args=()):
    fstm = run_sctk(sctk, ["csrfilt.sh", "-i", "stm", "-t", "ref", "-dh", str(glm)], stdin=stm.read_text())
    fctm = run_sctk(sctk, ["csrfilt.sh", "-i", "ctm", "-t", "hyp", "-dh", str(glm)], stdin=ctm.read_text())
    out_stm = []
    for line in fstm.splitlines():
        if not line.startswith(";;"):
            line = re.sub(r"\s\[[^\]\s]*\](?=\s|$)", "", line)
            if hesitations == "optional":
                line = re.sub(r"(?<=[\s{/])%HESITATION(?=[\s}/]|$)", "(%HESITATION)", line)
        out_stm.append(line)
    drop = r"(%HESITATION|\[[^\]]*\])" if hesitations == "optional" else r"(\[[^\]]*\])"
    out_ctm = [l for l in fctm.splitlines() if not re.match(r"^\S+ \S+ \S+ \S+ " + drop + r"(\s|$)", l)]
    (tmp_path / "f.stm").write_text("\n".join(out_stm) + "\n")
    (tmp_path / "f.ctm").write_text("\n".join(out_ctm) + "\n")
    rows = sclite_alignments(sctk, ["-r", str(tmp_path / "f.stm"), "stm", "-h", str(tmp_path / "f.ctm"),
                                    "ctm", "-F", "-D", *sclite_args])
    per = {}
    for uid, c, s, d, i in rows:
        row = per.setdefault(uid.rsplit("-", 1)[0], [0, 0, 0, 0, 0])
        for k, v in enumerate((1, c, s, d, i)):
            row[k] += v
    return per


def ours_per_speaker(scored):
    per = {}
    for s in scored:
        row = per.setdefault(s.spk, [0, 0, 0, 0, 0])
        for k, v in enumerate((1, s.counts.cor, s.counts.sub, s.counts.dele, s.counts.ins)):
            row[k] += v
    return per


HANDMADE_STM = """\
;; handmade: every rule once
;; CATEGORY "0" "" ""
sw_4001 A sw_4001_A 1.000 4.000 <O,en,M> i'm gonna (uh) talk abo- about the the weather
sw_4001 A sw_4001_A 5.000 8.000 <O,en,M> { yeah / yes } um it was [laughter] well-known
sw_4001 A sw_4001_A 9.000 10.000 <O> IGNORE_TIME_SEGMENT_IN_SCORING
sw_4001 A sw_4001_A 11.000 13.000 <O,en,M> okay alright bye
sw_4001 B sw_4001_B 0.500 3.000 <O,en,F> mhm uh-huh right
en_5002 A en_5002_A 2.000 6.000 <O,en,F> we don't know (what) they'd do
en_5002 A en_5002_A 7.000 9.000 <O,en,F> hello there
"""

HANDMADE_CTM = """\
sw_4001 A 0.200 0.300 so
sw_4001 A 1.100 0.300 I
sw_4001 A 1.400 0.200 am
sw_4001 A 1.700 0.300 going
sw_4001 A 2.000 0.200 to
sw_4001 A 2.300 0.300 talk
sw_4001 A 2.700 0.300 about
sw_4001 A 3.000 0.200 the
sw_4001 A 3.300 0.500 weather
sw_4001 A 4.400 0.400 gap
sw_4001 A 5.100 0.300 yep
sw_4001 A 5.500 0.200 uh
sw_4001 A 5.800 0.200 it
sw_4001 A 6.100 0.200 is
sw_4001 A 6.400 0.300 well
sw_4001 A 6.700 0.300 known
sw_4001 A 7.900 0.400 edge
sw_4001 A 9.300 0.300 ignored
sw_4001 A 11.100 0.300 ok
sw_4001 A 11.500 0.400 all
sw_4001 A 11.900 0.300 right
sw_4001 A 12.500 0.300 bye
sw_4001 A 13.500 0.300 tail
sw_4001 B 0.600 0.300 uh-huh
sw_4001 B 1.000 0.300 [noise]
sw_4001 B 1.500 0.300 right
en_5002 A 2.100 0.300 we
en_5002 A 2.500 0.300 do
en_5002 A 2.800 0.300 not
en_5002 A 3.200 0.300 know
en_5002 A 3.600 0.300 what
en_5002 A 4.000 0.300 they
en_5002 A 4.300 0.300 would
en_5002 A 4.700 0.300 do
en_5002 A 7.200 0.300 hello
"""


@pytest.mark.parametrize("hesitations", ["optional", "keep"])
def test_handmade_cases_match_sclite(tmp_path, sctk, hesitations):
    stm = tmp_path / "ref.stm"
    ctm = tmp_path / "hyp.ctm"
    stm.write_text(HANDMADE_STM)
    ctm.write_text(HANDMADE_CTM)
    result = score_hub5(stm, ctm, name="hand", hesitations=hesitations)
    scored = align_hub5(stm, ctm, hesitations=hesitations)
    assert subset_totals(scored) == result
    theirs = reference_filter(sctk, stm, ctm, tmp_path, hesitations=hesitations)
    assert ours_per_speaker(scored) == theirs
    # both subsets are present and add up to all
    assert set(result) == {"swbd", "callhm", "all"}
    assert (result["swbd"] + result["callhm"]).__dict__ == result["all"].__dict__
    assert result["all"].ins > 0 and result["all"].sub > 0 and result["all"].dele > 0


WORDS = ["the", "a", "we", "know", "about", "talk", "weather", "right", "so", "it", "was", "do"]
REF_EXTRA = ["uh", "um", "(uh)", "(hmm)", "abo-", "wea-", "i'm", "don't", "gonna", "yeah", "okay",
             "{ yeah / yes }", "{ a / @ }", "[laughter]", "well-known", "(the)"]
HYP_EXTRA = ["uh", "um", "I", "am", "do", "not", "going", "to", "yep", "ok", "yes", "[noise]", "well",
             "known", "weath", "i'm", "don't"]


def random_case(rng):
    stm, ctm = [], []
    for file in ("sw_1000", "sw_1001", "en_2000"):
        for chan in ("A", "B") if file != "sw_1001" else ("A",):
            t = rng.uniform(0, 1.0)
            for _ in range(rng.randint(2, 5)):
                begin = round(t + rng.uniform(0.2, 1.5), 2) + 0.003
                n = rng.randint(0, 7)
                ref = [rng.choice(WORDS + REF_EXTRA) for _ in range(n)]
                if rng.random() < 0.1:
                    ref = ["IGNORE_TIME_SEGMENT_IN_SCORING"]
                end = round(begin + 0.4 * max(n, 1) + rng.uniform(0, 0.5), 2) + 0.003
                stm.append((file, chan, begin, f"{file} {chan} {file}_{chan} {begin:.3f} {end:.3f} <O,en,M> "
                            f"{' '.join(ref)}".rstrip()))
                # hypothesis words: edited ref words spread over the segment, sometimes spilling over
                hyp = []
                for w in ref:
                    w = w.strip("()").strip("{} ").split(" / ")[0] if w[0] in "({" else w
                    r = rng.random()
                    if r < 0.15:
                        continue
                    hyp.append(rng.choice(WORDS + HYP_EXTRA) if r < 0.35 else w)
                    if rng.random() < 0.12:
                        hyp.append(rng.choice(WORDS + HYP_EXTRA))
                span = end - begin
                lo, hi = begin - 0.3 * rng.random(), end + 0.3 * rng.random()
                for k, w in enumerate(hyp):
                    b = lo + (hi - lo) * k / max(len(hyp), 1)
                    ctm.append((file, chan, round(b, 2), round(min(0.3, span / max(len(hyp), 1)), 2), w))
                if rng.random() < 0.3:  # a word in the gap after the segment
                    ctm.append((file, chan, round(end + 0.05, 2), 0.1, rng.choice(WORDS)))
                t = end + 0.1
    if rng.random() < 0.5:  # a channel with no hypothesis at all: every reference word deleted
        ctm = [x for x in ctm if (x[0], x[1]) != ("sw_1000", "B")]
    # sclite needs both files in the same (file, channel, time) order, as hubscr sorts them
    stm.sort(key=lambda x: x[:3])
    ctm.sort(key=lambda x: (x[0], x[1], x[2]))
    return ";; random case\n" + "".join(x[3] + "\n" for x in stm), "".join(f"{f} {c} {b:.2f} {d:.2f} {w}\n" for f, c, b, d, w in ctm)


@pytest.mark.parametrize("seed", range(1, 9))
def test_random_cases_match_sclite(tmp_path, sctk, seed):
    stm_text, ctm_text = random_case(random.Random(seed))
    stm, ctm = tmp_path / "ref.stm", tmp_path / "hyp.ctm"
    stm.write_text(stm_text)
    ctm.write_text(ctm_text)
    hes = "optional" if seed % 2 else "keep"
    scored = align_hub5(stm, ctm, hesitations=hes)
    assert ours_per_speaker(scored) == reference_filter(sctk, stm, ctm, tmp_path, hesitations=hes)


def test_glm_filter_equals_csrfilt(tmp_path, sctk):
    from asrtrain.score.glm import load_rules

    lines = ["uh I'm gonna (um) say alright all right mhm it's well-known abc- ok",
             "{ yeah / yes } we'd they'll (hmm) huh-uh uh-huh T.V. o.k. 'cause cause",
             "(well-known) don't can't won't (i'm) theatre ach eee ew oof hee",
             "mixed Case Words UH um-hmm Yep yup nope sorta kinda (-bout) -bout"]
    stm = "".join(f"f A s {i}.0 {i}.5 <O> {l}\n" for i, l in enumerate(lines))
    theirs = run_sctk(sctk, ["csrfilt.sh", "-i", "stm", "-t", "ref", "-dh", str(DEFAULT_GLM)], stdin=stm)
    rules = load_rules(DEFAULT_GLM, "stm", "ref")
    ours = [f"f A s {i}.0 {i}.5 <O> {rules.filter_text(l)}" for i, l in enumerate(lines)]
    assert ours == theirs.splitlines()


def test_ctm_confidences_score_as_with_sclite(tmp_path, sctk):
    """A sixth field (a confidence) changes nothing in hubscr's pipeline (csrfilt.sh, then sclite) nor
    in ours. (A non-numeric one or a seventh field would: csrfilt filters them as words, sclite alone
    ignores them; ours refuses such a line, tests/score/test_parsing.py.)"""
    lines = HANDMADE_CTM.splitlines()
    lines[1] += " 0.93"
    stm, ctm = tmp_path / "ref.stm", tmp_path / "hyp.ctm"
    stm.write_text(HANDMADE_STM)
    ctm.write_text("\n".join(lines) + "\n")
    assert ours_per_speaker(align_hub5(stm, ctm)) == reference_filter(sctk, stm, ctm, tmp_path)


MIXED_STM = """\
sw_4001 A sw_4001_A 1.000 4.000 <O,en,M> The Café ÉTÉ was Okay uh
sw_4001 B sw_4001_B 0.500 3.000 <O,en,F> Naïve NAÏVE right
"""

MIXED_CTM = """\
sw_4001 A 1.100 0.300 THE
sw_4001 A 1.400 0.200 CAFÉ
sw_4001 A 1.700 0.300 été
sw_4001 A 2.000 0.200 WAS
sw_4001 A 2.300 0.300 okay
sw_4001 B 0.600 0.300 naïve
sw_4001 B 1.000 0.300 naïve
sw_4001 B 1.500 0.300 Right
"""


@pytest.mark.parametrize("case_sensitive", [False, True], ids=["sclite-default", "sclite-s"])
def test_mixed_case_matches_sclite(tmp_path, sctk, case_sensitive):
    """Case as sclite (after csrfilt, which upper-cases a-z on both sides): only A-Z fold, so "ÉTÉ" and
    "été" stay two words, as do "NAÏVE" and "naïve" (the Python str.lower() we used to fold made them
    equal); sclite -s and --case-sensitive agree too."""
    stm, ctm = tmp_path / "ref.stm", tmp_path / "hyp.ctm"
    stm.write_text(MIXED_STM, encoding="utf-8")
    ctm.write_text(MIXED_CTM, encoding="utf-8")
    scored = align_hub5(stm, ctm, case_sensitive=case_sensitive)
    theirs = reference_filter(sctk, stm, ctm, tmp_path, sclite_args=["-s"] if case_sensitive else [])
    theirs = {spk.lower(): row for spk, row in theirs.items()}  # sclite -s keeps the ids' case too
    assert ours_per_speaker(scored) == theirs
    # A: the café/été pair are errors (É vs é), the rest correct; B: NAÏVE vs naïve is one
    assert theirs == {"sw_4001_a": [1, 4, 2, 0, 0], "sw_4001_b": [1, 2, 1, 0, 0]}

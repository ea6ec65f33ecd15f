"""Text mode: `asrtrain score REF HYP` on Kaldi text files, and parity with sclite's trn mode."""

import random

import pytest
from click.testing import CliRunner

from asrtrain.cli import cli
from asrtrain.errors import AsrError
from asrtrain.score.report import align_text, score_text, speaker_of
from asrtrain.score.wer import Counts

from tests.helpers.sctk_tools import run_sctk, sclite_alignments, sclite_pra


def write(path, lines):
    path.write_text("".join(l + "\n" for l in lines), encoding="utf-8")
    return path


def test_counts_are_summed_over_the_corpus_not_averaged(tmp_path):
    ref = write(tmp_path / "ref", ["a-1 one two three four", "a-2 x"])
    hyp = write(tmp_path / "hyp", ["a-1 one two three four", "a-2 y"])
    total = score_text(ref, hyp)
    # corpus WER = 1 error / 5 words = 20%, not the mean of per-utterance 0% and 100%
    assert (total.cor, total.sub, total.dele, total.ins, total.wrd, total.snt, total.serr) == (4, 1, 0, 0, 5, 2, 1)
    assert abs(total.wer - 20.0) < 1e-9
    assert total.line("x") == "%WER 20.0 | 2 5 | 80.0 20.0 0.0 0.0 20.0 50.0 | x"


def test_missing_hyp_utterance_counts_as_deletions_and_is_reported(tmp_path, caplog):
    ref = write(tmp_path / "ref", ["s-1 a b c", "s-2 d e"])
    hyp = write(tmp_path / "hyp", ["s-1 a b c"])
    with caplog.at_level("WARNING"):
        total = score_text(ref, hyp, out_dir=tmp_path / "out", name="t")
    assert (total.dele, total.wrd, total.snt) == (2, 5, 2)
    assert "have no hypothesis" in caplog.text
    pra = (tmp_path / "out" / "t.pra").read_text()
    assert "id: (s-2)" in pra and "missing from hypothesis" in pra


def test_hyp_id_not_in_ref_is_a_clear_error(tmp_path):
    ref = write(tmp_path / "ref", ["s-1 a b c"])
    hyp = write(tmp_path / "hyp", ["s-1 a b c", "s-9 zz"])
    res = CliRunner().invoke(cli, ["score", str(ref), str(hyp)])
    assert res.exit_code == 1
    assert "not in the reference" in res.output and "s-9" in res.output
    assert "Traceback" not in res.output


def test_cli_prints_the_wer_line_and_writes_reports(tmp_path):
    ref = write(tmp_path / "ref", ["spk1-u1 the cat sat on the mat", "spk2_u2 hello world"])
    hyp = write(tmp_path / "hyp", ["spk1-u1 the cat sat on mat mat too", "spk2_u2 hello word"])
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["score", str(ref), str(hyp), "--name", "dev", "--out-dir", str(out)])
    assert res.exit_code == 0, res.output
    line = res.output.strip().splitlines()[-1]
    assert line == "%WER 37.5 | 2 8 | 75.0 25.0 0.0 12.5 37.5 100.0 | dev"
    assert (out / "wer_summary").read_text().strip() == line
    pra = (out / "dev.pra").read_text()
    assert "REF:  the cat sat on THE mat ***" in pra
    assert "HYP:  the cat sat on MAT mat TOO" in pra
    assert "Eval:                S       I  " in pra
    sys_txt = (out / "dev.sys").read_text()
    assert "| spk1 " in sys_txt and "| spk2 " in sys_txt and "| Sum " in sys_txt


def test_utt2spk_overrides_the_id_prefix(tmp_path):
    ref = write(tmp_path / "ref", ["u1 a", "u2 b"])
    hyp = write(tmp_path / "hyp", ["u1 a", "u2 c"])
    u2s = write(tmp_path / "utt2spk", ["u1 alice", "u2 bob"])
    scored = align_text(ref, hyp, utt2spk=u2s)
    assert [s.spk for s in scored] == ["alice", "bob"]
    assert speaker_of("sw02001-A_0001") == "sw02001" and speaker_of("a_b") == "a" and speaker_of("x") == "x"


def test_counts_line_and_addition():
    c = Counts(snt=4459, cor=37917, sub=3439, dele=1633, ins=731, serr=2149)
    assert c.wrd == 42989
    assert c.line("eval2000") == "%WER 13.5 | 4459 42989 | 88.2 8.0 3.8 1.7 13.5 48.2 | eval2000"
    assert (c + c).wrd == 2 * 42989


def test_percentages_round_halves_up_as_sclite_prints_them():
    from asrtrain.score.wer import percent_text
    assert percent_text(1, 16) == "6.3"  # 6.25: Python's "%.1f" gives 6.2 (half to even)
    assert percent_text(15, 16) == "93.8" and percent_text(389, 400) == "97.3"
    assert percent_text(1, 2000) == "0.1" and percent_text(1, 3) == "33.3" and percent_text(2, 3) == "66.7"
    assert percent_text(3, 0) == "0.0"
    c = Counts(snt=1, cor=15, sub=1, serr=1)
    assert c.line("x") == "%WER 6.3 | 1 16 | 93.8 6.3 0.0 0.0 6.3 100.0 | x"


def test_no_reference_words_prints_zeros_as_sclite_does(tmp_path):
    """sclite prints 0.0 for every word percentage of a reference without words (the insertions stay in
    the counts); the old line printed Ins 200.0 beside Err 100.0."""
    ref, hyp = write(tmp_path / "ref", ["a-1"]), write(tmp_path / "hyp", ["a-1 x y"])
    c = score_text(ref, hyp)
    assert (c.wrd, c.ins) == (0, 2)
    assert c.line("t") == "%WER 0.0 | 1 0 | 0.0 0.0 0.0 0.0 0.0 100.0 | t"


def test_words_split_on_ascii_whitespace_only(tmp_path):
    """sclite and Kaldi split on ASCII whitespace: an ideographic (U+3000) or no-break (U+00A0) space
    inside a token keeps it one word."""
    ref = write(tmp_path / "ref", ["a-1 hello world", "a-2 one two"])
    hyp = write(tmp_path / "hyp", ["a-1 hello\u3000world", "a-2 one\u00a0two"])
    c = score_text(ref, hyp)
    assert (c.cor, c.sub, c.dele) == (0, 2, 2)
    tabs = write(tmp_path / "tabs", ["a-1 hello\tworld ", "a-2  one \t two"])
    assert score_text(ref, tabs).err == 0


def test_a_duplicate_hypothesis_id_names_its_line_and_a_fix_for_a_hypothesis(tmp_path):
    ref = write(tmp_path / "ref", ["a-1 hello world", "a-2 the cat"])
    hyp = write(tmp_path / "hyp", ["a-1 hello world", "a-1 hello", "a-2 the cat"])
    with pytest.raises(AsrError) as err:
        score_text(ref, hyp)
    msg = str(err.value)
    assert "hyp:2" in msg and "duplicate id 'a-1'" in msg and "one line per utterance" in msg


def test_summary_percentages_equal_sclite_sum_rows(tmp_path, sctk):
    """Every speaker row of sclite's sum table, against ours from the same counts: 1-40 words with every
    error count, so exact halves (1 in 16, 3 in 8...) are among them."""
    from asrtrain.score.report import per_speaker, sys_table
    import re
    ref, hyp, cases = [], [], {}
    for b in range(1, 41):
        for a in range(b + 1):
            spk = f"s{b:02d}x{a:02d}"
            ref.append(" ".join(f"w{j}" for j in range(b)) + f" ({spk}_u1)")
            hyp.append(" ".join("zz" if j < a else f"w{j}" for j in range(b)) + f" ({spk}_u1)")
            cases[spk] = (a, b)
    write(tmp_path / "ref.trn", ref)
    write(tmp_path / "hyp.trn", hyp)
    out = run_sctk(sctk, [f"{sctk}/sclite", "-r", str(tmp_path / "ref.trn"), "trn", "-h", str(tmp_path / "hyp.trn"),
                          "trn", "-i", "rm", "-o", "sum", "stdout"])
    theirs = {}
    for line in out.splitlines():
        m = re.match(r"\s*\|\s*(s\d+x\d+)\s*\|\s*\d+\s+\d+\s*\|([\d. ]+)\|", line)
        if m:
            theirs[m.group(1)] = m.group(2).split()
    assert len(theirs) == len(cases)
    ours = {spk: list(Counts(snt=1, cor=b - a, sub=a, serr=int(a > 0)).percent_texts()) for spk, (a, b) in cases.items()}
    assert ours == theirs
    assert any(v[1] == "6.3" for v in theirs.values())  # the exact half that "%.1f" rounds down


def _random_corpus(rng, n_utt=40):
    # mixed case, as sclite folds it (A-Z only: "ÉTÉ" and "été" stay two words)
    vocab = ["the", "a", "cat", "dog", "sat", "ran", "on", "mat", "and", "then", "it", "was", "Big", "big",
             "The", "CAT", "Mat", "ÉTÉ", "été", "Été"]
    ref, hyp = {}, {}
    for i in range(n_utt):
        uid = f"spk{i % 4}-utt{i:03d}"
        words = [rng.choice(vocab) for _ in range(rng.randint(0, 9))]
        h = []
        for w in words:
            r = rng.random()
            if r < 0.12:
                continue
            h.append(rng.choice(vocab) if r < 0.3 else w.swapcase() if r < 0.45 else w)
            if rng.random() < 0.1:
                h.append(rng.choice(vocab))
        if not words and not h:
            words = ["a"]
        ref[uid], hyp[uid] = words, h
    return ref, hyp


def _write_random_corpus(tmp_path, seed=7):
    ref, hyp = _random_corpus(random.Random(seed))
    missing = "spk3-utt039"
    write(tmp_path / "ref", [f"{u} {' '.join(w)}".strip() for u, w in ref.items()])
    write(tmp_path / "hyp", [f"{u} {' '.join(w)}".strip() for u, w in hyp.items() if u != missing])
    # sclite needs every utterance in the hyp trn; ours scores a missing one against nothing, as here
    write(tmp_path / "ref.trn", [f"{' '.join(w)} ({u})" for u, w in ref.items()])
    write(tmp_path / "hyp.trn", [f"{' '.join(w if u != missing else [])} ({u})" for u, w in hyp.items()])
    return ["-r", str(tmp_path / "ref.trn"), "trn", "-h", str(tmp_path / "hyp.trn"), "trn", "-i", "swb"]


@pytest.mark.parametrize("case_sensitive", [False, True], ids=["sclite-default", "sclite-s"])
def test_text_mode_parity_with_sclite_trn(tmp_path, sctk, case_sensitive):
    """Counts and the .pra's words equal sclite's: by default both fold case (A-Z); with -s neither does."""
    args = _write_random_corpus(tmp_path) + (["-s"] if case_sensitive else [])
    total = score_text(tmp_path / "ref", tmp_path / "hyp", out_dir=tmp_path / "out", name="r",
                       case_sensitive=case_sensitive)
    scored = align_text(tmp_path / "ref", tmp_path / "hyp", case_sensitive=case_sensitive)
    rows = sclite_alignments(sctk, args)
    theirs = {uid.lower(): tuple(r) for uid, *r in rows}
    ours = {s.utt.lower(): (s.counts.cor, s.counts.sub, s.counts.dele, s.counts.ins) for s in scored}
    assert ours == theirs
    assert sum(t[0] for t in theirs.values()) == total.cor
    # the other mode counts differently on this corpus, so the test tells the two apart
    other = score_text(tmp_path / "ref", tmp_path / "hyp", case_sensitive=not case_sensitive)
    assert (other.cor < total.cor) == (not case_sensitive) and other.cor != total.cor
    # the .pra shows the words as compared, as sclite's own .pra does (case marks only when folded)
    pra = sclite_pra(sctk, args)
    blocks = (tmp_path / "out" / "r.pra").read_text().split("\n\n")[1:]
    got = {}
    for b in filter(str.strip, blocks):
        lines = b.splitlines()
        uid = lines[0][len("id: ("):-1]
        get = lambda tag: next(l for l in lines if l.startswith(tag))
        attrs = [l for l in lines if l.startswith("Attributes:")]
        got[uid.lower()] = (get("REF:")[4:].split(), get("HYP:")[4:].split(), attrs)
    # a gap is as many '*' as the word has characters (sclite counts UTF-8 bytes: "éTé" -> 5)
    gap = lambda words: ["*" if set(w) == {"*"} else w for w in words]
    assert {u: (gap(r), gap(h), a) for u, (r, h, a) in got.items()} == \
        {u.lower(): (gap(r), gap(h), a) for u, (r, h, a) in pra.items()}


def test_case_is_folded_as_sclite_does_and_the_pra_shows_it(tmp_path):
    ref = write(tmp_path / "ref", ["a-1 Remind me ABOUT the Movie été"])
    hyp = write(tmp_path / "hyp", ["a-1 REMIND ME about THE movies ÉTÉ"])
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["score", str(ref), str(hyp), "--name", "up", "--out-dir", str(out)])
    assert res.exit_code == 0, res.output
    # A-Z fold; "movie"/"movies" and "été"/"ÉTÉ" (not ASCII) are substitutions
    assert res.output.strip().splitlines()[-1] == "%WER 33.3 | 1 6 | 66.7 33.3 0.0 0.0 33.3 100.0 | up"
    pra = (out / "up.pra").read_text()
    assert "REF:  remind me about the MOVIE  éTé" in pra and "HYP:  remind me about the MOVIES ÉTÉ" in pra
    assert "Attributes" not in pra
    res = CliRunner().invoke(cli, ["score", str(ref), str(hyp), "--name", "cs", "--out-dir", str(out),
                                   "--case-sensitive"])
    assert res.exit_code == 0, res.output
    assert res.output.strip().splitlines()[-1].startswith("%WER 100.0 | 1 6 | 0.0 100.0 ")
    pra = (out / "cs.pra").read_text()  # as written, as sclite -s prints them
    assert "REF:  Remind me ABOUT the Movie  été" in pra and "HYP:  REMIND ME about THE movies ÉTÉ" in pra
    assert "Attributes: Case_sensitve" in pra
    # the CER folds case the same way
    res = CliRunner().invoke(cli, ["score", str(ref), str(hyp), "--cer"])
    assert res.exit_code == 0, res.output
    cer = [l for l in res.output.splitlines() if l.startswith("%CER")][0]
    # 29 characters; the fold leaves é/É x2 (substitutions) and the s of movies (an insertion)
    assert cer.startswith("%CER 10.3 | 1 29 | 93.1 6.9 0.0 3.4 10.3 "), cer


def test_default_name_is_the_decode_dir_and_reports_are_logged(tmp_path, caplog):
    data = tmp_path / "data" / "test"
    data.mkdir(parents=True)
    ref = write(data / "text", ["te000-gb-m6-000 a b", "te001-us-m6-001 c d"])
    write(data / "utt2spk", ["te000-gb-m6-000 te000-gb-m6", "te001-us-m6-001 te001-us-m6"])
    out = tmp_path / "scoring"
    for dec, words in (("decode_test", "a b"), ("decode_test_lm", "a x")):
        (tmp_path / dec).mkdir()
        hyp = write(tmp_path / dec / "text", [f"te000-gb-m6-000 {words}", "te001-us-m6-001 c d"])
        with caplog.at_level("INFO"):
            res = CliRunner().invoke(cli, ["score", str(ref), str(hyp), "--out-dir", str(out)])
        assert res.exit_code == 0, res.output
        assert f"wrote {out / dec}.pra, {dec}.sys and wer_summary" in caplog.text
    # one report per decode dir, none named after the file "text"
    reports = [f"decode_test{s}.{x}" for s in ("", "_lm") for x in ("pra", "sys")] + ["wer_summary"]
    assert sorted(p.name for p in out.iterdir()) == reports
    # wer_summary keeps a line per name; scoring a dir again replaces its own line only
    summary = (out / "wer_summary").read_text().splitlines()
    assert [l.rsplit("| ", 1)[1] for l in summary] == ["decode_test", "decode_test_lm"]
    assert summary[0].startswith("%WER 0.0 ") and summary[1].startswith("%WER 25.0 ")
    again = ["score", str(ref), str(tmp_path / "decode_test" / "text"), "--out-dir", str(out), "--cer"]
    res = CliRunner().invoke(cli, again)
    assert res.exit_code == 0, res.output
    assert (out / "wer_summary").read_text().splitlines() == [summary[1], summary[0]]
    assert (out / "cer_summary").read_text().startswith("%CER 0.0 ")
    assert (out / "cer_summary").read_text().rstrip().endswith("| decode_test")
    # speakers from the utt2spk beside REF, not the id prefix before '-'
    sys_txt = (out / "decode_test_lm.sys").read_text()
    assert "| te000-gb-m6 " in sys_txt and "| te001-us-m6 " in sys_txt and "| te000 " not in sys_txt
    assert "Speaker: te000-gb-m6" in (out / "decode_test_lm.pra").read_text()


def test_utt2spk_beside_ref_without_every_utterance_is_not_used(tmp_path, caplog):
    ref = write(tmp_path / "text", ["s1-u1 a", "s2-u2 b"])
    write(tmp_path / "utt2spk", ["s1-u1 alice"])
    hyp = write(tmp_path / "hyp", ["s1-u1 a", "s2-u2 b"])
    with caplog.at_level("WARNING"):
        score_text(ref, hyp, out_dir=tmp_path / "out", name="n")
    assert "no speaker for 's2-u2'" in caplog.text
    sys_txt = (tmp_path / "out" / "n.sys").read_text()
    assert "| s1 " in sys_txt and "| s2 " in sys_txt and "alice" not in sys_txt

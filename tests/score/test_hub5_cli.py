"""`asrtrain score --stm ...`: Hub5 mode through the CLI, text hypotheses, reports and bad input."""

from click.testing import CliRunner

from asrtrain.cli import cli
from asrtrain.score.hub5 import score_hub5, score_hub5_text

STM = """;; tiny eval set
sw_4001 A sw_4001_A 1.0 3.0 <O,en,M> uh i'm fine [laughter] thanks
sw_4001 A sw_4001_A 4.0 5.0 <O> IGNORE_TIME_SEGMENT_IN_SCORING
sw_4001 B sw_4001_B 1.0 3.0 <O,en,F> okay (uh) abo- about it
en_6001 A en_6001_A 0.0 2.0 <O,en,F> hello there
"""


def write_inputs(tmp_path):
    (tmp_path / "stm").write_text(STM)
    (tmp_path / "text").write_text("sw_4001-A_0001 um i am fine thanks\nsw_4001-A_0002 noise words\n"
                                   "sw_4001-B_0001 ok about about it\nen_6001-A_0001 hello\n")
    (tmp_path / "segments").write_text("sw_4001-A_0001 sw_4001-A 1.0 3.0\nsw_4001-A_0002 sw_4001-A 4.0 5.0\n"
                                       "sw_4001-B_0001 sw_4001-B 1.0 3.0\nen_6001-A_0001 en_6001-A 0.0 2.0\n")
    (tmp_path / "r2fc").write_text("en_6001-A en_6001 A\nsw_4001-A sw_4001 A\nsw_4001-B sw_4001 B\n")


def test_text_hypothesis_scores_three_subsets(tmp_path):
    write_inputs(tmp_path)
    result = score_hub5_text(tmp_path / "stm", tmp_path / "text", tmp_path / "segments",
                                     tmp_path / "r2fc", name="eval2000")
    sw, ch, al = result["swbd"], result["callhm"], result["all"]
    # swbd A: (%hes) {i'm / i am} fine thanks: the deleted optional hesitation counts as correct (as in
    # sclite -D), "i am" takes the two-word branch, [laughter] is dropped -> 5 correct;
    # swbd B: okay (uh) abo- about it vs ok about about it -> 5 correct (GLM, optional, fragment)
    assert (sw.snt, sw.cor, sw.sub, sw.dele, sw.ins) == (2, 10, 0, 0, 0)
    assert (ch.snt, ch.cor, ch.sub, ch.dele, ch.ins) == (1, 1, 0, 1, 0)
    assert al.wrd == sw.wrd + ch.wrd and al.snt == 3


def test_cli_ctm_prints_three_lines_and_writes_reports(tmp_path):
    write_inputs(tmp_path)
    (tmp_path / "hyp.ctm").write_text("sw_4001 A 1.1 0.2 uh\nsw_4001 A 1.5 0.3 I'm\nsw_4001 A 2.0 0.2 fine\n"
                                      "sw_4001 A 2.5 0.3 thanks\nsw_4001 A 3.5 0.2 extra\n"
                                      "sw_4001 B 1.2 0.2 okay\nsw_4001 B 1.6 0.2 about\nsw_4001 B 2.0 0.2 it\n"
                                      "en_6001 A 0.5 0.3 hello\nen_6001 A 1.0 0.3 their\n")
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["score", "--stm", str(tmp_path / "stm"), "--ctm", str(tmp_path / "hyp.ctm"),
                                   "--name", "eval2000", "--out-dir", str(out)])
    assert res.exit_code == 0, res.output
    lines = [l for l in res.output.splitlines() if l.startswith("%WER")]
    assert [l.rsplit("|", 1)[1].strip() for l in lines] == ["eval2000 swbd", "eval2000 callhm", "eval2000 all"]
    # "extra" (mid 3.6) falls in the gap before the ignored segment, so it is dropped with it
    # swbd: A 4 correct (i'm is one word); B okay (uh) [abo- deleted] about it -> 4 correct, 1 deletion
    assert lines[0] == "%WER 11.1 | 2 9 | 88.9 0.0 11.1 0.0 11.1 50.0 | eval2000 swbd"
    assert lines[1] == "%WER 50.0 | 1 2 | 50.0 50.0 0.0 0.0 50.0 100.0 | eval2000 callhm"
    assert (out / "wer_summary").read_text().splitlines() == lines
    pra = (out / "eval2000.pra").read_text()
    assert "id: (sw_4001_b-000)" in pra and "REF:  okay (%hesitation) ABO- about it" in pra
    assert "| sw_4001_a " in (out / "eval2000.sys").read_text()


def test_cli_bad_combinations_and_unknown_channel(tmp_path):
    write_inputs(tmp_path)
    run = lambda *a: CliRunner().invoke(cli, ["score", *map(str, a)])
    r = run("--stm", tmp_path / "stm")
    assert r.exit_code == 1 and "exactly one of --ctm or --hyp-text" in r.output
    r = run("--stm", tmp_path / "stm", "--hyp-text", tmp_path / "text")
    assert r.exit_code == 1 and "--segments" in r.output
    r = run(tmp_path / "text")
    assert r.exit_code == 1 and "REF HYP" in r.output
    (tmp_path / "bad.ctm").write_text("sw_9999 A 1.0 0.2 hi\n")
    r = run("--stm", tmp_path / "stm", "--ctm", tmp_path / "bad.ctm")
    assert r.exit_code == 1 and "sw_9999" in r.output and "Traceback" not in r.output


def test_missing_channel_in_hyp_is_all_deletions(tmp_path):
    write_inputs(tmp_path)
    (tmp_path / "hyp.ctm").write_text("en_6001 A 0.5 0.3 hello\nen_6001 A 1.0 0.3 there\n")
    result = score_hub5(tmp_path / "stm", tmp_path / "hyp.ctm", hesitations="keep")
    sw = result["swbd"]
    # everything deleted except the explicitly optional (uh), which a deletion leaves correct
    assert (sw.cor, sw.sub, sw.ins) == (1, 0, 0) and sw.dele == sw.wrd - 1 > 0
    assert result["callhm"].wer == 0.0

"""Text mode: `asrtrain score REF HYP` on Kaldi text files, and parity with sclite's trn mode."""

import random

from click.testing import CliRunner

from asrtrain.cli import cli
from asrtrain.score.report import align_text, score_text, speaker_of
from asrtrain.score.wer import Counts

from sctk_tools import sclite_alignments


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


def _random_corpus(rng, n_utt=40):
    vocab = ["the", "a", "cat", "dog", "sat", "ran", "on", "mat", "and", "then", "it", "was", "Big", "big"]
    ref, hyp = {}, {}
    for i in range(n_utt):
        uid = f"spk{i % 4}-utt{i:03d}"
        words = [rng.choice(vocab) for _ in range(rng.randint(0, 9))]
        h = []
        for w in words:
            r = rng.random()
            if r < 0.12:
                continue
            h.append(rng.choice(vocab) if r < 0.3 else w)
            if rng.random() < 0.1:
                h.append(rng.choice(vocab))
        if not words and not h:
            words = ["a"]
        ref[uid], hyp[uid] = words, h
    return ref, hyp


def test_text_mode_parity_with_sclite_trn(tmp_path, sctk):
    rng = random.Random(7)
    ref, hyp = _random_corpus(rng)
    missing = "spk3-utt039"
    write(tmp_path / "ref", [f"{u} {' '.join(w)}".strip() for u, w in ref.items()])
    write(tmp_path / "hyp", [f"{u} {' '.join(w)}".strip() for u, w in hyp.items() if u != missing])
    total = score_text(tmp_path / "ref", tmp_path / "hyp")
    scored = align_text(tmp_path / "ref", tmp_path / "hyp")
    # sclite needs every utterance in the hyp trn; ours scores a missing one against nothing, as here
    write(tmp_path / "ref.trn", [f"{' '.join(w)} ({u})" for u, w in ref.items()])
    write(tmp_path / "hyp.trn", [f"{' '.join(w if u != missing else [])} ({u})" for u, w in hyp.items()])
    rows = sclite_alignments(sctk, ["-r", str(tmp_path / "ref.trn"), "trn", "-h", str(tmp_path / "hyp.trn"),
                                    "trn", "-i", "swb", "-s"])
    theirs = {uid.lower(): tuple(r) for uid, *r in rows}
    ours = {s.utt.lower(): (s.counts.cor, s.counts.sub, s.counts.dele, s.counts.ins) for s in scored}
    assert ours == theirs
    assert sum(t[0] for t in theirs.values()) == total.cor

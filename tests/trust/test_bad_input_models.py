"""The bad-input corpus, models and scoring: decode (LM, vocabulary, exp and feature dir damage), score,
tokenizer and LM training, output paths, and the limits where values enter (issue 57: sizes that would
allocate or run without bound, silent acceptances, special files). The data, features and training cases
and the format of a case are in test_bad_input_corpus.py.
"""

import os
import sys
from pathlib import Path

import pytest

from tests.helpers.corpus_world import (UTTS, append, check_case, cut, line, materialize, nan_checkpoints,
                                        huge_stats, nan_model, nan_stats, prepend, replace)

CASES = []
F = "features {data} {tmp}/out"
T = "train --train-data {feats} --tokenizer {tok}/tokenizer.model --exp-dir {tmp}/e"


def case(cid, files, command, fragment):
    CASES.append(pytest.param(files, command, fragment, id=cid))


# -- decode: LM, vocabulary, exp dir and feature dir damage -----------------------------------------------
D = "decode {exp} {feats} {tmp}/dec"
ARPA_OK = "\\data\\\nngram 1=3\nngram 2=1\n\n\\1-grams:\n-0.5\t<s>\t-0.3\n-0.5\t</s>\n-0.5\tone\t-0.2\n\n" \
          "\\2-grams:\n-0.1\t<s> one\n\n\\end\\\n"
for cid, arpa, frag in [
    ("cut-after-unigrams", ARPA_OK.split("\\2-grams:")[0], "no \\end\\ line: the file is cut short"),
    ("cut-mid-section", ARPA_OK.split("-0.5\tone")[0], "\\1-grams: holds 2 entries but \\data\\ declares 3"),
    ("missing-section", ARPA_OK.split("\\2-grams:")[0] + "\\end\\\n", "declares 2 order(s) but 1 section(s) follow"),
    ("count-mismatch", ARPA_OK.replace("ngram 1=3", "ngram 1=4"), "holds 3 entries but \\data\\ declares 4"),
    ("no-data-header", "\\1-grams:\n-0.5\tone\n\\end\\\n", "not an ARPA file: no \\data\\ header"),
    ("empty", "", "not an ARPA file"),
    ("latin1-line1", b"\xe9\\data\\\n", "lm.arpa:1: malformed ARPA file: not valid UTF-8"),
    ("latin1-later", ARPA_OK.replace("one", "\udce9").encode("utf-8", "surrogateescape"), "not valid UTF-8"),
    ("section-order", ARPA_OK.replace("\\1-grams:", "\\3-grams:"), "out of order"),
    ("ngram-garbage", ARPA_OK.replace("ngram 2=1", "ngram two=1"), "expected 'ngram K=N'"),
    ("ngram-skip-order", ARPA_OK.replace("ngram 2=1", "ngram 3=1"), "expected 'ngram 2=N'"),
    ("ngram-negative", ARPA_OK.replace("ngram 2=1", "ngram 2=-1"), "with N >= 0"),
    ("header-junk", ARPA_OK.replace("ngram 2=1", "ngram 2=1\nhello"), "unexpected line in the \\data\\ header"),
    ("prob-nan", ARPA_OK.replace("-0.5\tone", "nan\tone"), "not a finite number"),
    ("prob-plus-inf", ARPA_OK.replace("-0.5\tone", "inf\tone"), "not a finite number"),
    ("bow-inf", ARPA_OK.replace("\t-0.2", "\tinf"), "not a finite number"),
    ("prob-text", ARPA_OK.replace("-0.5\tone", "x\tone"), "not a number"),
    ("too-many-fields", ARPA_OK.replace("-0.1\t<s> one", "-0.1\t<s> one two"), "expected a log10 probability, 2 word(s)"),
    ("top-order-backoff", ARPA_OK.replace("-0.1\t<s> one", "-0.1\t<s> one\t-0.5"), "got 4 fields"),
    ("duplicate-ngram", ARPA_OK.replace("ngram 1=3", "ngram 1=4").replace("-0.5\tone\t-0.2", "-0.5\tone\t-0.2\n-0.4\tone"),
     "duplicate 1-gram 'one'"),
    ("second-data", ARPA_OK.replace("\\1-grams:", "\\data\\\n\\1-grams:"), "a second \\data\\ header"),
    ("section-header-junk", ARPA_OK.replace("\\2-grams:", "\\x-grams:"), "bad section header"),
]:
    case(f"decode-arpa-{cid}", {"lm/lm.arpa": arpa}, D + " --lm {lm}/lm.arpa", frag)
case("decode-arpa-missing", {}, D + " --lm {tmp}/none.arpa", "language model not found")
for cid, words, frag in [
    ("latin1", b"one\ncaf\xe9\n", "words.txt:2: not valid UTF-8"),
    ("three-fields", "one 1 x\n", "expected one word"),
    ("non-integer-id", "one x\n", "expected one word (optionally followed by an integer id)"),
    ("empty", "", "vocabulary file has no words"),
    ("only-specials", "<eps> 0\n#0 1\n", "vocabulary file has no words"),
]:
    case(f"decode-words-{cid}", {"lm/words.txt": words}, D + " --words {lm}/words.txt", frag)
case("decode-words-missing", {}, D + " --words {tmp}/none.txt", "vocabulary file not found")
for cid, files, frag in [
    ("config-garbage", {"exp/config.yaml": b"\xff\xfe\x00"}, "config file is not UTF-8"),
    ("config-syntax", {"exp/config.yaml": "model: [\n"}, "invalid YAML"),
    ("config-duplicate", {"exp/config.yaml": append("model:\n  hidden: 3\n")}, "duplicate key 'model'"),
    ("config-mel-zero", {"exp/config.yaml": replace("num_mel_bins: 13", "num_mel_bins: 0")},
     "features.num_mel_bins = 0"),
    ("config-missing", {"exp/config.yaml": None}, "not an exp dir (no config.yaml)"),
    ("final-missing", {"exp/final.pt": None}, "model file not found"),
    ("tokenizer-garbage", {"exp/tokenizer.model": b"\x08\x01garbage"}, "not a sentencepiece model"),
    ("feat-dim-text", {"feats/feat_dim": "x\n"}, "feat_dim does not hold"),
    ("ark-truncated", {"feats/feats.ark": cut(0.5)}, "cannot read features of"),
    ("ark-garbage", {"feats/feats.ark": lambda p: b"\x00" * len(p.read_bytes())}, "cannot read features of"),
    ("cmvn-nan", {"feats/cmvn_global.ark": nan_stats}, "hold NaN or Inf"),
    ("cmvn-overflow", {"feats/cmvn_global.ark": huge_stats(1e40, row=1)}, "cmvn_global.ark overflow"),
    ("features-differ", {"feats/features.yaml": replace("dither: 0.0", "dither: 1.0")},
     "features differ from the model's"),
    ("no-features", {"feats/features.yaml": None}, "features.yaml is missing"),
    ("segments-nan", {"feats/segments": lambda p: "".join(f"{u} rec nan 1\n" for u in
                                                          sorted(p.with_name("utt2spk").read_text().split()[::2]))},
     "segments: malformed segment of"),
    ("segments-short", {"feats/segments": lambda p: "".join(f"{u} rec 0\n" for u in
                                                            sorted(p.with_name("utt2spk").read_text().split()[::2]))},
     "segments: malformed segment of"),
]:
    case(f"decode-{cid}", files, D, frag)

# -- score: text mode and Hub5 ---------------------------------------------------------------------------
H = "score --stm {hub5}/ref.stm --ctm {hub5}/hyp.ctm"
for cid, row, frag in [
    ("begin-nan", "sw_4390 A 0.10 0.40 hello 1.0", "sw_4390 A nan 0.40 hello 1.0"),
    ("begin-negative", "sw_4390 A 0.10 0.40 hello 1.0", "sw_4390 A -0.10 0.40 hello 1.0"),
    ("dur-negative", "sw_4390 A 0.10 0.40 hello 1.0", "sw_4390 A 0.10 -0.40 hello 1.0"),
    ("dur-inf", "sw_4390 A 0.10 0.40 hello 1.0", "sw_4390 A 0.10 inf hello 1.0"),
    ("begin-inf", "sw_4390 A 0.10 0.40 hello 1.0", "sw_4390 A inf 0.4 hello 1.0"),
]:
    case(f"score-ctm-{cid}", {"hub5/hyp.ctm": replace(row, frag)}, H,
         "hyp.ctm:1: begin/duration")
case("score-ctm-text-time", {"hub5/hyp.ctm": line(1, "sw_4390 A zero 0.4 hello")}, H, "are not numbers")
case("score-ctm-four-fields", {"hub5/hyp.ctm": line(1, "sw_4390 A 0.1 0.4")}, H, "hyp.ctm:1: expected '<file>")
case("score-ctm-alt-unclosed", {"hub5/hyp.ctm": append("sw_4390 A 2.0 0.1 <ALT_BEGIN>\n")}, H, "without <ALT_END>")
case("score-ctm-alt-stray", {"hub5/hyp.ctm": append("sw_4390 A 2.0 0.1 <ALT_END>\n")}, H, "<ALT_END> without")
case("score-ctm-latin1", {"hub5/hyp.ctm": prepend(b"\xe9")}, H, "hyp.ctm:1: not valid UTF-8")
case("score-ctm-missing", {"hub5/hyp.ctm": None}, H, "file not found")
for cid, new, frag in [
    ("end-inf", "sw_4390 A sw_4390-A 0.00 inf <O,en,M> hello world", "must be finite"),
    ("begin-nan", "sw_4390 A sw_4390-A nan 2.00 <O,en,M> hello world", "must be finite"),
    ("begin-negative", "sw_4390 A sw_4390-A -1.00 2.00 <O,en,M> hello world", "not negative"),
    ("reversed", "sw_4390 A sw_4390-A 3.00 2.00 <O,en,M> hello world", "ends (2.0) before it begins (3.0)"),
    ("text-time", "sw_4390 A sw_4390-A zero 2.00 <O,en,M> hello world", "are not numbers"),
    ("four-fields", "sw_4390 A sw_4390-A 0.00", "expected '<file> <chan> <speaker>"),
    ("unclosed-labels", "sw_4390 A sw_4390-A 0.00 2.00 <O,en,M hello world", "unterminated '<labels>'"),
]:
    case(f"score-stm-{cid}", {"hub5/ref.stm": line(1, new)}, H, ("ref.stm:1: ", frag))
case("score-stm-empty", {"hub5/ref.stm": ";; nothing\n"}, H, "no segments")
case("score-stm-latin1", {"hub5/ref.stm": prepend(b";; \xe9\n")}, H, "ref.stm:1: not valid UTF-8")
G = H + " --glm {tmp}/x.glm"
for cid, glm, frag in [
    ("regexp-paren", ';; INPUT_DEPENDENT_APPLICATION = "(ctm"\nA => B / [ ] __ [ ]\n', "x.glm:1: INPUT_DEPENDENT_APPLICATION is not a valid regular expression"),
    ("regexp-bracket", ';; INPUT_DEPENDENT_APPLICATION = "[stm"\n', "not a valid regular expression"),
    ("regexp-star", ';; INPUT_DEPENDENT_APPLICATION = "*ctm"\n', "not a valid regular expression"),
    ("regexp-group", ';; INPUT_DEPENDENT_APPLICATION = "(?P<x"\n', "not a valid regular expression"),
    ("no-arrow", "HELLO HULLO\n", "x.glm:1: not a rule"),
    ("empty-from", " => HULLO\n", "rule with an empty FROM side"),
    ("latin1", b"A => \xe9\n", "x.glm:1: not valid UTF-8"),
]:
    case(f"score-glm-{cid}", {"x.glm": glm}, G, frag)
HT = "score --stm {hub5}/ref.stm --hyp-text {hub5}/hyp.txt --segments {hub5}/segments --reco2file-and-channel {hub5}/r2fc"
for cid, files, frag in [
    ("segments-short", {"hub5/segments": line(1, "{key} sw_4390-A 0.0")}, "segments:1: malformed segment of 'sw_4390-A-0000'"),
    ("segments-text", {"hub5/segments": line(1, "{key} sw_4390-A zero 2.0")}, "are not numbers"),
    ("segments-nan", {"hub5/segments": line(1, "{key} sw_4390-A nan 2.0")}, "not finite"),
    ("segments-inf", {"hub5/segments": line(1, "{key} sw_4390-A 0.0 inf")}, "not finite"),
    ("segments-to-end", {"hub5/segments": line(1, "{key} sw_4390-A 0.0 -1")}, "gives no time to place the words"),
    ("segments-no-value", {"hub5/segments": line(1, "{key}")}, "segments:1: expected a key and a value"),
    ("segments-missing-utt", {"hub5/segments": line(1, "other sw_4390-A 0 2")}, "has no entry in"),
    ("r2fc-short", {"hub5/r2fc": line(1, "{key} sw_4390")}, "expected '<reco> <file> <channel>'"),
    ("r2fc-missing-reco", {"hub5/r2fc": line(1, "other sw_4390 A")}, "recording 'sw_4390-A' has no entry"),
    ("hyp-latin1", {"hub5/hyp.txt": prepend(b"\xe9")}, "hyp.txt:1: not valid UTF-8"),
]:
    case(f"score-hyp-text-{cid}", files, HT, frag)
case("score-hyp-text-no-segments", {}, "score --stm {hub5}/ref.stm --hyp-text {hub5}/hyp.txt",
     "--hyp-text needs --segments")
case("score-both-hyps", {}, H + " --hyp-text {hub5}/hyp.txt", "exactly one of --ctm or --hyp-text")
case("score-nothing", {}, "score", "give REF HYP")
case("score-text-latin1", {"h.txt": b"u1 caf\xe9\n", "r.txt": "u1 cafe\n"}, "score {tmp}/r.txt {tmp}/h.txt",
     "h.txt:1: not valid UTF-8")
case("score-text-missing", {"r.txt": "u1 a\n"}, "score {tmp}/r.txt {tmp}/none.txt", "file not found")
case("score-text-dup", {"r.txt": "u1 a\nu1 b\n", "h.txt": "u1 a\n"}, "score {tmp}/r.txt {tmp}/h.txt", "duplicate id")

# -- tokenizer, lm, topology ------------------------------------------------------------------------------
TD = "tokenizer decode --model {tok}/tokenizer.model --ids {tmp}/ids.txt"
for cid, ids, frag in [
    ("word", "u1 1 two 3\n", "ids.txt:1: 'two' is not a token id"),
    ("float", "u1 1.5\n", "'1.5' is not a token id"),
    ("exp", "u1 1e3\n", "'1e3' is not a token id"),
    ("plus", "u1 +4\n", "'+4' is not a token id"),
    ("out-of-range", "u1 99999\n", "token id 99999 is outside this tokenizer's range"),
    ("negative", "u1 -1\n", "token id -1 is outside"),
    ("arabic-digits", "u1 \u0663\n", "is not a token id"),
    ("latin1", b"u1 \xe9\n", "ids.txt:1: not valid UTF-8"),
]:
    case(f"tokenizer-decode-{cid}", {"ids.txt": ids}, TD, frag)
for cid, model, frag in [("garbage", b"garbage" * 10, "not a sentencepiece model"),
                         ("truncated", cut(0.3), "not a sentencepiece model"),
                         ("empty", b"", "tokenizer.model"),
                         ("text", "hello\n", "not a sentencepiece model")]:
    case(f"tokenizer-model-{cid}", {"tok/tokenizer.model": model, "t.txt": "u1 one two\n"},
         "tokenizer encode --model {tok}/tokenizer.model {tmp}/t.txt", frag)
case("tokenizer-model-missing", {"t.txt": "u1 one\n"}, "tokenizer encode --model {tmp}/no.model {tmp}/t.txt",
     "tokenizer model not found")
case("tokenizer-encode-latin1", {"t.txt": b"u1 caf\xe9\n"}, "tokenizer encode --model {tok}/tokenizer.model {tmp}/t.txt",
     "t.txt:1: not valid UTF-8")
case("tokenizer-train-latin1", {"t.txt": b"u1 caf\xe9\n"}, "tokenizer train --text {tmp}/t.txt --out {tmp}/tk",
     "not valid UTF-8")
case("tokenizer-train-vocab-one", {}, "tokenizer train --text {feats}/text --out {tmp}/tk --vocab-size 1",
     "tokenizer.vocab_size = 1")
case("tokenizer-train-char-vocab", {}, "tokenizer train --text {feats}/text --out {tmp}/tk --model-type char "
     "--vocab-size 50", "--vocab-size 50 cannot apply to --model-type char")
case("lm-train-latin1", {"t.txt": b"u1 caf\xe9\n"}, "lm train --text {tmp}/t.txt --out {tmp}/l", "not valid UTF-8")
case("lm-train-missing", {}, "lm train --text {tmp}/none.txt --out {tmp}/l", "file not found")
case("lm-train-order-zero", {}, "lm train --text {feats}/text --out {tmp}/l --order 0", "--order")
# -- an output path that is a file, or lies under one: the path and the fix, not "File exists" ------------
NOT_DIR = "exists and is not a directory"
UNDER_FILE = "is a file where a directory was expected"
for cid, command in [
    ("features", "features {data} {tmp}/out"),
    ("lm-train", "lm train --text {feats}/text --out {tmp}/out"),
    ("tokenizer-train", "tokenizer train --text {feats}/text --out {tmp}/out"),
    ("train", "train --train-data {feats} --tokenizer {tok}/tokenizer.model --exp-dir {tmp}/out"),
    ("decode", "decode {exp} {feats} {tmp}/out"),
    ("subset", "data subset {data} {tmp}/out --first 1"),
]:
    case(f"out-is-a-file-{cid}", {"out": "a file\n"}, command, ("{tmp}/out: ", NOT_DIR))
    case(f"out-under-a-file-{cid}", {"out": "a file\n"}, command.replace("{tmp}/out", "{tmp}/out/sub"),
         "{tmp}/out: " + UNDER_FILE)
case("lm-train-text-is-a-dir", {}, "lm train --text {feats} --out {tmp}/l", "is a directory where a file was expected")

case("topology-odd", {}, "topology --learners 3", "3")
case("topology-zero", {}, "topology --learners 0", "learners")

# -- issue 57: limits where values enter (sizes that would allocate or run without bound) ------------------
for cid, sets, frag in [
    ("hidden-huge", ["model.hidden=100000"], "model.hidden = 100000 must be >= 1 and <= 8192"),
    ("params-huge", ["model.hidden=4096", "model.num_layers=8"], "parameters, more than the"),
    ("layers-huge", ["model.num_layers=1000"], "model.num_layers = 1000 must be"),
    ("proj-huge", ["model.proj=100000"], "model.proj = 100000"),
    ("subsample-huge", ["model.subsample=1000"], "model.subsample = 1000"),
    ("threads-huge", ["train.threads=100000"], "train.threads = 100000"),
    ("beam-huge", ["decode.beam_size=1000000"], "decode.beam_size = 1000000"),
    ("max-frames-huge", ["train.max_frames=1000000000"], "train.max_frames"),
    ("dp-clip-inf", ["dp.enabled=true", "dp.clip=.inf", "dp.epsilon=8"], "dp.clip = inf"),
    ("dp-noise-inf", ["dp.enabled=true", "dp.noise_multiplier=.inf"], "dp.noise_multiplier = inf"),
]:
    case(f"limits-train-{cid}", {}, T + " --print-config" + "".join(f" --set {s}" for s in sets), frag)
BOMB = "train:\n  a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1]\n  b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
case("limits-train-config-alias", {"c.yaml": BOMB}, T + " --config {tmp}/c.yaml",
     "c.yaml:2: invalid YAML: YAML anchors and aliases are not accepted in a config (&a)")
case("limits-train-config-alias-only", {"c.yaml": "train:\n  lr: *x\n"}, T + " --config {tmp}/c.yaml",
     "c.yaml:2: invalid YAML")
case("limits-tokenizer-vocab-huge", {}, "tokenizer train --text {feats}/text --out {tmp}/tk --vocab-size 10000000",
     "tokenizer.vocab_size = 10000000 must be")
case("limits-decode-beam-huge", {}, D + " --method beam --beam-size 1000000", "beam size 1000000 must be")
case("limits-decode-threads-huge", {}, D + " --threads 100000", "--threads 100000 is far more than")
case("limits-decode-config-beam-huge", {"exp/config.yaml": replace("beam_size: 8", "beam_size: 1000000")}, D,
     "decode.beam_size = 1000000")
for cid, opt, frag in [("step", "--step-s 1e308", "--step-s 1e+308 is more than"),
                       ("batches", "--batches 100000000000", "--batches"),
                       ("params", "--params 10000000000000000", "--params"),
                       ("latency", "--inter-latency-us 1e300", "--inter-latency-us"),
                       ("epochs", "--epochs 1000000000", "--epochs 1000000000 must be")]:
    case(f"limits-simulate-{cid}", {}, f"simulate --learners 2 --strategies ssgd {opt}", frag)
case("limits-perturb-factor-small", {}, "data perturb-speed {data} {tmp}/sp --factors 0.001",
     "speed factor 0.001 is outside [0.5, 2.0]")
case("limits-perturb-factor-huge", {}, "data perturb-speed {data} {tmp}/sp --factors 1e9", "is outside")
case("limits-reco2speed-huge", {"data/reco2speed": "".join(f"{u} 1e9\n" for u in UTTS)}, F,
     "speed factor '1e9' of recording")
case("limits-reco2speed-tiny", {"data/reco2speed": "".join(f"{u} 0.001\n" for u in UTTS)}, F,
     "is not a number in [0.5, 2.0]")
case("limits-perturb-into-feats", {}, "data perturb-speed {data} {feats}", "OUT_DIR holds a feature dir")
case("limits-perturb-into-data", {"other/utt2spk": "a a\n"}, "data perturb-speed {data} {tmp}/other",
     "OUT_DIR holds a data dir")
case("limits-decode-nan-weights", {"exp/final.pt": nan_model}, D, "final.pt: the model has non-finite weights")
case("limits-average-nan-weights", {"exp/checkpoints": nan_checkpoints}, "average {exp} --out {tmp}/avg.pt",
     "has non-finite weights")
for cid, opts, frag in [
    ("period-ssgd", "--strategy ssgd --period 4", "--set dist.period=4 is ignored: --strategy ssgd does not use it"),
    ("averaging-ssgd", "--strategy ssgd --averaging random", "dist.averaging=random is ignored"),
    ("delay-single", "--delay-by-one", "dist.delay_by_one=True is ignored: --strategy single"),
    ("dp-without-dp", "--set dp.epsilon=8", "--set dp.epsilon=8.0 is ignored: differential privacy is off"),
]:
    case(f"ignored-option-{cid}", {}, T + " --print-config " + opts, frag)


def head_pipe(path: Path) -> str:
    """wav.scp with line 2's file read through ``head -c 3000 FILE |`` (a pipe cut short)."""
    lines = path.read_text().splitlines()
    key, file = lines[1].split(maxsplit=1)
    lines[1] = f"{key} head -c 3000 {file} |"
    return "".join(ln + "\n" for ln in lines)


case("limits-wav-pipe-truncated", {"data/wav.scp": head_pipe}, F, ("wav.scp:2: ", "pipe output is truncated"))
case("limits-resume-without-config", {"e/checkpoints/epoch1.pt": "x", "e/checkpoints/latest": "epoch1.pt"},
     T + " --resume --set train.lr=0.5", "config.yaml: --resume: the run's config.yaml is missing")
WORDS = " ".join(f"w{i % 50}" for i in range(5000))
case("limits-score-long-utterance", {"r.txt": f"u1 {WORDS}\n", "h.txt": f"u1 {WORDS} x\n"},
     "score {tmp}/r.txt {tmp}/h.txt", "alignment table of 25,005,000 cells")
case("limits-score-long-line", {"r.txt": "u1 " + "a" * (17 << 20) + "\n", "h.txt": "u1 a\n"},
     "score {tmp}/r.txt {tmp}/h.txt", "r.txt:1: a line")


@pytest.mark.parametrize("files,command,fragment", CASES)
def test_bad_input_gives_one_line_error(world, tmp_path, files, command, fragment):
    check_case(world, tmp_path, files, command, fragment)


def test_the_corpus_is_large():
    assert len(CASES) >= 150, len(CASES)


def fifo_line(n: int, suffix: str = "") -> "callable":
    """Point line ``n`` of an scp file at a new FIFO beside the case's dirs."""
    def apply(path: Path) -> str:
        fifo = path.parent.parent / "fifo"
        os.mkfifo(fifo)
        return line(n, f"{{key}} {fifo}{suffix}")(path)
    return apply


def make_fifo(path: Path) -> None:
    if path.exists():
        path.unlink()
    os.mkfifo(path)


# Special files: the old code hung on each of these (a FIFO's open waits for a writer; /dev/zero never
# ends), so they run in a subprocess with a timeout: a hang fails the case instead of hanging CI.
SPECIAL = [
    ("feats-scp-dev-zero", {"feats/feats.scp": line(2, "{key} /dev/zero:0")}, D, "feats.scp:2: the ark of"),
    ("feats-scp-fifo", {"feats/feats.scp": fifo_line(2, ":0")}, D, "is a FIFO (named pipe), not a regular file"),
    ("wav-scp-dev-zero", {"data/wav.scp": line(2, "{key} /dev/zero")}, F, "wav.scp:2: audio file /dev/zero is not"),
    ("wav-scp-fifo", {"data/wav.scp": fifo_line(2)}, F, "is not a regular file"),
    ("score-dev-zero", {"r.txt": "u1 a\n"}, "score {tmp}/r.txt /dev/zero", "is a character device"),
    ("score-fifo", {"r.txt": "u1 a\n", "fifo": make_fifo}, "score {tmp}/r.txt {tmp}/fifo", "is a FIFO"),
    ("text-fifo", {"data/text": make_fifo}, "data validate {data} --no-audio", "text is a FIFO"),
]


@pytest.mark.slow
def test_special_files_are_refused_without_hanging(world, tmp_path):
    import subprocess

    for cid, files, command, fragment in SPECIAL:
        (tmp_path / cid).mkdir()
        dirs = materialize(world, tmp_path / cid, files, command)
        args = [a.format(**dirs) for a in command.split()]
        try:
            r = subprocess.run([sys.executable, "-m", "asrtrain", *args], capture_output=True, text=True,
                               timeout=60, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{cid}: hung (no answer in 60 s)")
        errs = [ln for ln in r.stderr.splitlines() if ln.startswith("asrtrain: error:")]
        assert r.returncode == 1 and "Traceback" not in r.stderr and len(errs) == 1, (cid, r.stderr)
        assert fragment in errs[0], (cid, errs[0])

"""The bad-input corpus: every case is a command on damaged input that must fail with exactly one line
``asrtrain: error: ...`` holding the expected fragment: no traceback, no silent success.

Each case is (id, files to damage, command, fragment). ``files`` maps a path under the case's copy of the
clean world (see corpus_world.py: data/, feats/, tok/, lm/, exp/, hub5/) to new content; the command's
``{data}``, ``{feats}``, ``{tok}``, ``{lm}``, ``{exp}``, ``{hub5}`` and ``{tmp}`` name those copies.
The commands run in-process through click's CliRunner: the 316 cases take about 40 s (20 s of it one
tiny training run for the exp dir).
"""

import os
import sys
from pathlib import Path

import pytest

from tests.helpers.cli_helpers import one_error, run
from tests.helpers.corpus_world import (UTTS, append, audio_at, build_world, cut, dup_line, float_audio, line,
                                        materialize, nan_checkpoints, nan_model, nan_stats, prepend, replace,
                                        segments_for_data, swap_lines)

U2 = UTTS[1]  # the utterance on line 2 of every data dir table
CASES = []


def case(cid, files, command, fragment):
    CASES.append(pytest.param(files, command, fragment, id=cid))


# -- data validate: what validate_data_dir.sh / validate_text.pl refuse -----------------------------------
V = "data validate {data}"
for cid, new, frag in [
    ("bos", "{key} hello <s> world", "holds '<s>'"),
    ("eos", "{key} hello </s>", "holds '</s>'"),
    ("disambig0", "{key} #0 hello", "holds '#0'"),
    ("disambig12", "{key} hello #12", "holds '#12'"),
    ("nbsp-in-words", "{key} hello\u00a0world", "U+00A0 (no-break space)"),
    ("nbsp-after-id", "{key}\u00a0hello world", "U+00A0"),
    ("cr-mid-line", "{key} hello\rworld", "U+000D"),
    ("em-space", "{key} hello\u2003world", "U+2003"),
    ("zero-width-space", "{key} hello\u200bworld", "U+200B (zero-width space)"),
    ("ideographic-space", "{key} hello\u3000world", "U+3000"),
    ("next-line", "{key} hello\u0085world", "U+0085"),
    ("form-feed", "{key} hello\x0cworld", "U+000C"),
    ("vertical-tab", "{key} hello\x0bworld", "U+000B"),
    ("line-separator", "{key} hello\u2028world", "U+2028"),
    ("bom-mid-line", "{key} hello\ufeffworld", "U+FEFF (byte-order mark)"),
    ("thin-space", "{key} hello\u2009world", "U+2009"),
    ("empty-transcript", "{key}", "empty transcript"),
    ("nbsp-only-transcript", "{key} \u00a0", "empty transcript"),
]:
    case(f"validate-text-{cid}", {"data/text": line(2, new)}, V,
         ("text:2: ", frag) if "transcript" in frag else (f"text:2: utterance '{U2}': ", frag))
case("validate-text-bom-at-start", {"data/text": prepend("\ufeff")}, V, "text:1:")
case("validate-text-latin1", {"data/text": prepend(b"a\xe9 b\n")}, V, "text:1: not valid UTF-8")
case("validate-text-duplicate", {"data/text": dup_line(2)}, V, "text:3: duplicate id")
case("validate-text-unsorted", {"data/text": swap_lines(1, 2)}, V, "text:2: not sorted")
case("validate-text-extra-utt", {"data/text": append("spk9-utt9 hello\n")}, V, "is in text but not in utt2spk")
case("validate-text-missing-utt", {"data/text": line(2, "spk0-utt1b hi")}, V, "not in")

for cid, times, frag in [
    ("nan-start", "nan 0.5", "not finite"), ("nan-end", "0.0 nan", "not finite"),
    ("inf-end", "0.0 inf", "not finite"), ("inf-start", "inf 0.5", "not finite"),
    ("minus-inf-start", "-inf 0.5", "not finite"), ("minus-inf-end", "0.0 -inf", "not finite"),
    ("negative-start", "-0.1 0.5", "not 0 <= start < end"), ("empty", "0.5 0.5", "not 0 <= start < end"),
    ("reversed", "0.5 0.2", "not 0 <= start < end"), ("end-minus-2", "0.0 -2", "not 0 <= start < end"),
    ("text-start", "x 0.5", "not numbers"), ("text-end", "0.0 y", "not numbers"),
    ("overflow-start", "1e999 2", "not finite"), ("overflow-end", "0 1e999", "not finite"),
    ("NaN-caps", "NaN 1", "not finite"), ("plus-infinity", "0 +Infinity", "not finite"),
    ("hex-ish", "0.0x 1", "not numbers"), ("three-fields", "0.0", "expected '<utt-id> <rec-id>"),
    ("five-fields", "0.0 0.5 0.7", "expected '<utt-id> <rec-id>"),
]:
    case(f"validate-segments-{cid}", {"data/segments": segments_for_data(times)}, V,
         (f"segments:2: malformed record for '{U2}': ", frag))
case("validate-segments-unknown-rec", {"data/segments": segments_for_data(rec="nosuchrec")}, V,
     f"segments:2: recording 'nosuchrec' of utterance '{U2}' is not in wav.scp")
case("validate-segments-past-end", {"data/segments": segments_for_data("0.0 30.0")}, V, "is outside recording")
case("validate-segments-start-past-end", {"data/segments": segments_for_data("20.0 30.0")}, V,
     "is outside recording")

for cid, files, frag in [
    ("utt2spk-three-fields", {"data/utt2spk": line(2, "{key} spk0 extra")}, "utt2spk:2: malformed record"),
    ("utt2spk-missing", {"data/utt2spk": None}, "missing utt2spk"),
    ("utt2spk-empty", {"data/utt2spk": ""}, "utt2spk"),
    ("utt2spk-latin1", {"data/utt2spk": prepend(b"caf\xe9 spk0\n")}, "utt2spk:1: not valid UTF-8"),
    ("utt2spk-duplicate", {"data/utt2spk": dup_line(1)}, "utt2spk:2: duplicate id"),
    ("utt2spk-unsorted", {"data/utt2spk": swap_lines(2, 3)}, "utt2spk:3: not sorted"),
    ("spk2utt-disagrees", {"data/spk2utt": line(1, "spk0 spk0-utt0")}, "spk2utt and utt2spk disagree"),
    ("spk2utt-missing", {"data/spk2utt": None}, "missing spk2utt"),
    ("spk2utt-latin1", {"data/spk2utt": prepend(b"\xff\xfe")}, "spk2utt:1: not valid UTF-8"),
    ("wav-missing-file", {"data/wav.scp": line(2, "{key} /nonexistent/x.wav")}, "wav.scp:2: audio file not found"),
    ("wav-no-value", {"data/wav.scp": line(2, "{key}")}, "wav.scp:2: malformed record"),
    ("wav-scp-missing", {"data/wav.scp": None}, "missing wav.scp"),
    ("wav-unsorted", {"data/wav.scp": swap_lines(1, 2)}, "wav.scp:2: not sorted"),
    ("wav-duplicate", {"data/wav.scp": dup_line(3)}, "wav.scp:4: duplicate id"),
    ("wav-latin1", {"data/wav.scp": prepend(b"\xe9 /a.wav\n")}, "wav.scp:1: not valid UTF-8"),
    ("r2fc-one-field", {"data/reco2file_and_channel": "".join(f"{u} {u}\n" for u in UTTS)},
     "reco2file_and_channel:1: malformed record"),
    ("r2fc-missing-rec", {"data/reco2file_and_channel": "".join(f"{u} {u} A\n" for u in UTTS[:3])},
     f"recording '{UTTS[3]}' is not in reco2file_and_channel"),
    ("utt2num-frames-text", {"data/utt2num_frames": "".join(f"{u} x\n" for u in UTTS)},
     "utt2num_frames:1: malformed record"),
    ("feats-scp-no-value", {"data/feats.scp": "".join(f"{u}\n" for u in UTTS)}, "feats.scp:1: malformed record"),
]:
    case(f"validate-{cid}", files, V, frag)
case("validate-not-a-dir", {}, "data validate {tmp}/nope", "data dir not found")
case("validate-a-file", {"plain": "x"}, "data validate {tmp}/plain", "data dir not found")

# -- data fix / subset / split ----------------------------------------------------------------------------
case("fix-latin1-text", {"data/text": prepend(b"a\xe9 b\n")}, "data fix {data}", "not valid UTF-8")
case("fix-no-utt2spk", {"data/utt2spk": None}, "data fix {data}", "nothing to fix from")
case("fix-not-a-dir", {}, "data fix {tmp}/nope", "data dir not found")
case("subset-negative", {}, "data subset {data} {tmp}/s --first -1", "must be >= 0")
case("subset-two-selectors", {}, "data subset {data} {tmp}/s --first 1 --last 1", "exactly one of")
case("subset-no-selector", {}, "data subset {data} {tmp}/s", "exactly one of")
case("subset-bad-dir", {"data/text": line(2, "{key} <s>")}, "data subset {data} {tmp}/s --first 1", "<s>")
case("split-zero", {}, "data split {data} 0", "must be >= 1")
case("split-too-many", {}, "data split {data} 9", "cannot split 2 speakers into 9")
case("split-latin1", {"data/utt2spk": prepend(b"\xe9")}, "data split {data} 2", "not valid UTF-8")

# -- features: bad audio, bad options ---------------------------------------------------------------------
F = "features {data} {tmp}/out"
for cid, damage, frag in [
    ("nan-sample", float_audio(float("nan")), f"utterance '{U2}' has 1 NaN or Inf audio sample(s) (first at sample 100)"),
    ("inf-sample", float_audio(float("inf")), "NaN or Inf audio"),
    ("minus-inf-sample", float_audio(float("-inf"), at=0), "(first at sample 0)"),
    ("huge-sample", float_audio(3e38), "are not finite"),
    ("8khz", audio_at(8000), "sample rate 8000 Hz does not match features.sample_rate 16000 Hz"),
    ("44khz", audio_at(44100), "sample rate 44100 Hz does not match"),
    ("empty-file", lambda p: b"", "corrupt or unsupported"),
    ("garbage-file", lambda p: b"RIFF\x00\x01junk" + bytes(range(256)) * 4, "corrupt"),
    ("truncated", cut(0.5), "truncated"),
    ("too-short", audio_at(16000, seconds=0.01), "shorter than one frame"),
]:
    case(f"features-audio-{cid}", {f"audio/{U2}.wav": damage}, F, frag)
for cid, times in [("nan", "nan 0.5"), ("inf", "0.0 inf"), ("negative", "-1 0.5"), ("reversed", "0.4 0.1")]:
    case(f"features-segments-{cid}", {"data/segments": segments_for_data(times)}, F, "segments:2: malformed record")
for cid, spec, frag in [
    ("pipe-fails", "false |", "pipe command failed with exit code 1"),
    ("pipe-not-found", "asrtrain_no_such_program_xyz -f wav |", "not found on PATH"),
    ("pipe-no-output", "true |", "wrote no audio"),
    ("pipe-not-audio", "echo hello |", "not readable audio"),
]:
    case(f"features-{cid}", {"data/wav.scp": line(2, "{key} " + spec)}, F, ("wav.scp:2: ", frag))
for cid, sets, frag in [
    ("mel-zero", ["num_mel_bins=0"], "features.num_mel_bins = 0 must be >= 3"),
    ("mel-negative", ["num_mel_bins=-1"], "must be >= 3"),
    ("mel-too-many", ["num_mel_bins=1000"], "<= 256"),
    ("mel-float", ["num_mel_bins=2.5"], "num_mel_bins must be int"),
    ("mel-text", ["num_mel_bins=abc"], "num_mel_bins must be int"),
    ("shift-zero", ["frame_shift=0"], "features.frame_shift = 0.0 must be > 0"),
    ("shift-negative", ["frame_shift=-10"], "frame_shift"),
    ("shift-inf", ["frame_shift=.inf"], "frame_shift"),
    ("length-zero", ["frame_length=0"], "frame_length = 0.0 must be > 0"),
    ("length-tiny", ["frame_length=0.01"], "samples at 16000 Hz"),
    ("rate-negative", ["sample_rate=-8000"], "features.sample_rate = -8000 must be >= 1"),
    ("rate-zero", ["sample_rate=0"], "sample_rate"),
    ("rate-text", ["sample_rate=fast"], "sample_rate must be int"),
    ("dither-negative", ["dither=-1"], "features.dither"),
    ("dither-nan", ["dither=.nan"], "dither must be float, got nan"),
    ("preemph", ["preemphasis_coefficient=1.5"], "preemphasis_coefficient"),
    ("low-negative", ["low_freq=-5"], "low_freq"),
    ("low-nyquist", ["low_freq=8000"], "low_freq"),
    ("high-above-nyquist", ["high_freq=9000"], "high_freq"),
    ("high-below-minus-nyquist", ["high_freq=-9000"], "high_freq"),
    ("high-below-low", ["low_freq=200", "high_freq=100"], "not above features.low_freq"),
    ("cmvn", ["cmvn=utterance"], "features.cmvn = 'utterance' is not one of"),
    ("window", ["window_type=kaiser"], "window_type"),
    ("kind", ["kind=mfcc"], "features.kind"),
    ("bool", ["use_energy=maybe"], "use_energy must be bool"),
    ("unknown-key", ["num_mel_bin=3"], "unknown config key 'num_mel_bin'"),
    ("sectioned-unknown-key", ["features.num_mel_bin=3"], "unknown config key 'num_mel_bin'"),
    ("other-section-key", ["train.lr=0.2"], ("only the features keys can be set here",
                                             "--set features.sample_rate=16000")),
    ("no-equals", ["num_mel_bins"], ("is not of the form features.key=value",
                                     "(fix: write e.g. --set features.sample_rate=16000)")),
]:
    case(f"features-set-{cid}", {}, F + "".join(f" --set {s}" for s in sets), frag)
for cid, conf, frag in [
    ("duplicate-key", "num_mel_bins: 40\nnum_mel_bins: 80\n", "conf.yaml:2: invalid YAML: duplicate key 'num_mel_bins' (first on line 1)"),
    ("syntax", "num_mel_bins: [40\n", "invalid YAML"),
    ("list", "- num_mel_bins\n", "expected a mapping"),
    ("latin1", b"dither: 0\n# caf\xe9\n", "not UTF-8"),
    ("bad-date", "sample_rate: 2001-02-30\n", "conf.yaml"),
    ("huge-int-string", "num_mel_bins: 1e400\n", "num_mel_bins must be int"),
    ("nested", "features:\n  num_mel_bins: 40\n", "unknown config key 'features'"),
    ("mel-zero", "num_mel_bins: 0\n", "conf.yaml:1: features.num_mel_bins = 0"),
]:
    case(f"features-conf-{cid}", {"conf.yaml": conf}, F + " --conf {tmp}/conf.yaml", frag)
case("features-conf-missing", {}, F + " --conf {tmp}/none.yaml", "config file not found")
case("features-conf-directory", {"confdir/x": "1"}, F + " --conf {tmp}/confdir", "cannot read config file")
case("features-nj-zero", {}, F + " --nj 0", "--nj must be >= 1")
case("features-out-is-data", {}, "features {data} {data}", "OUT_DIR must differ from DATA_DIR")
case("features-out-foreign", {"out/notes.txt": "mine"}, F, "OUT_DIR holds 'notes.txt'")
case("features-out-is-file", {"out": "x"}, F, "OUT_DIR exists and is not a directory")
case("features-no-data", {}, "features {tmp}/nope {tmp}/out", "data dir not found")
case("features-no-wav-scp", {"data/wav.scp": None}, F, "missing wav.scp")
case("features-all-bad", {"data/wav.scp": lambda p: "".join(f"{u} false |\n" for u in UTTS)},
     F + " --skip-bad", "no utterances left out of 4: all 4 are bad")
case("features-text-bos", {"data/text": line(2, "{key} <s> hi")}, F, "holds '<s>'")

# -- train: config values, settings it would ignore, a corrupt exp dir -------------------------------------
T = "train --train-data {feats} --tokenizer {tok}/tokenizer.model --exp-dir {tmp}/e"
for cid, sets, frag in [
    ("timeout-negative", ["dist.timeout_s=-1"], "dist.timeout_s = -1.0 must be > 0"),
    ("timeout-zero", ["dist.timeout_s=0"], "dist.timeout_s"),
    ("timeout-nan", ["dist.timeout_s=.nan"], "dist.timeout_s must be float"),
    ("timeout-text", ["dist.timeout_s=soon"], "dist.timeout_s must be float"),
    ("learners-zero", ["dist.learners=0"], "dist.learners = 0 must be >= 1"),
    ("per-node-negative", ["dist.learners_per_node=-1"], "dist.learners_per_node"),
    ("strategy", ["dist.strategy=allreduce"], "dist.strategy = 'allreduce' is not one of"),
    ("averaging", ["dist.averaging=ring"], "dist.averaging"),
    ("backend", ["dist.backend=mpi"], "dist.backend"),
    ("optimizer", ["train.optimizer=rmsprop"], "train.optimizer"),
    ("epochs-zero", ["train.epochs=0"], "train.epochs and train.max_frames must be >= 1"),
    ("max-frames-zero", ["train.max_frames=0"], "must be >= 1"),
    ("anneal", ["train.anneal=linear"], "train.anneal"),
    ("balance", ["train.balance=greedy"], "train.balance"),
    ("lr-text", ["train.lr=fast"], "train.lr must be float"),
    ("lr-list", ["train.lr=[1,2]"], "train.lr must be float"),
    ("loss", ["model.loss=rnnt"], "model.loss"),
    ("hidden-zero", ["model.hidden=0"], "must be >= 1"),
    ("layers-zero", ["model.num_layers=0"], "must be >= 1"),
    ("vocab-one", ["tokenizer.vocab_size=1"], "tokenizer.vocab_size = 1 must be >= 2"),
    ("model-type", ["tokenizer.model_type=wordpiece"], "tokenizer.model_type"),
    ("beam-zero", ["decode.beam_size=0"], "decode.beam_size = 0 must be >= 1"),
    ("method", ["decode.method=viterbi"], "decode.method"),
    ("batch-frames-zero", ["decode.batch_frames=0"], "decode.batch_frames"),
    ("engine", ["decode.engine=kaldi"], "decode.engine = 'kaldi' is not one of ours, flashlight"),
    ("mel-zero", ["features.num_mel_bins=0"], "features.num_mel_bins = 0"),
    ("unknown-section", ["bogus.key=1"], "unknown config key 'bogus'"),
    ("unknown-key", ["train.bogus=1"], "unknown config key 'train.bogus'"),
    ("no-equals", ["train.lr"], "is not of the form section.key=value"),
    ("section-value", ["train=5"], "section 'train' must be a mapping"),
    ("mel-ignored", ["features.num_mel_bins=40"], "--set features.num_mel_bins=40 is ignored: training uses the features of"),
    ("cmvn-ignored", ["features.cmvn=speaker"], "features.cmvn"),
    ("rate-ignored", ["features.sample_rate=8000"], "features.sample_rate = 16000"),
    ("tokenizer-unused", ["tokenizer.vocab_size=50"], "is not used by train"),
    ("input-dim", ["model.input_dim=7"], "model.input_dim=7 but"),
    ("num-targets", ["model.num_targets=5"], "model.num_targets"),
]:
    case(f"train-set-{cid}", {}, T + "".join(f" --set {s}" for s in sets), frag)
for cid, conf, frag in [
    ("duplicate-key", "train:\n  lr: 0.1\n  lr: 0.2\n", "c.yaml:3: invalid YAML: duplicate key 'lr' (first on line 2)"),
    ("duplicate-section", "train:\n  lr: 0.1\ntrain:\n  epochs: 2\n", "duplicate key 'train'"),
    ("list", "- train\n", "must be a mapping"),
    ("syntax", "train: {lr: 0.1\n", "invalid YAML"),
    ("latin1", b"# caf\xe9\ntrain: {}\n", "not UTF-8"),
    ("features-ignored", "features:\n  num_mel_bins: 40\n", "c.yaml:2: features.num_mel_bins: 40 is ignored"),
    ("timeout", "dist:\n  timeout_s: -1\n", "c.yaml:2: dist.timeout_s = -1.0 must be > 0"),
    ("unknown", "train:\n  learning_rate: 0.1\n", "c.yaml:2: unknown config key 'train.learning_rate'"),
]:
    case(f"train-config-{cid}", {"c.yaml": conf}, T + " --config {tmp}/c.yaml", frag)
case("train-config-missing", {}, T + " --config {tmp}/none.yaml", "config file not found")
case("train-strategy-config-dup", {"s.yaml": "dist:\n  learners: 2\n  learners: 4\n"},
     T + " --strategy-config {tmp}/s.yaml", "s.yaml:3: invalid YAML: duplicate key 'learners'")
for cid, text, frag in [
    ("garbage", b"\x00\xff\xfe garbage", "config.yaml: config file is not UTF-8"),
    ("syntax", "train: [\n", "config.yaml:2: invalid YAML"),
    ("list", "- 1\n- 2\n", "config.yaml:1: not a YAML mapping"),
    ("section-scalar", "train: 5\n", "config.yaml:1: section 'train' is not a mapping"),
    ("duplicate", "train:\n  lr: 1\n  lr: 2\n", "config.yaml:3: invalid YAML: duplicate key 'lr'"),
    ("empty", "", "config.yaml:1: not a YAML mapping of config sections (empty)"),
]:
    case(f"train-resume-config-{cid}", {"e/config.yaml": text, "e/checkpoints/latest": "x"}, T + " --resume", frag)
case("train-no-tokenizer", {}, "train --train-data {feats} --exp-dir {tmp}/e", "CTC training needs --tokenizer")
case("train-tokenizer-missing", {}, "train --train-data {feats} --tokenizer {tmp}/no.model --exp-dir {tmp}/e",
     "tokenizer model not found")
case("train-tokenizer-garbage", {"tok/tokenizer.model": b"garbage" * 10}, T, "not a sentencepiece model")
case("train-tokenizer-truncated", {"tok/tokenizer.model": cut(0.5)}, T, "not a sentencepiece model")
case("train-tokenizer-empty", {"tok/tokenizer.model": b""}, T, "tokenizer.model")
case("train-feat-dim-text", {"feats/feat_dim": "abc\n"}, T, "feat_dim:1: feat_dim does not hold a feature dimension")
case("train-feat-dim-empty", {"feats/feat_dim": ""}, T, "feat_dim does not hold")
case("train-feat-dim-zero", {"feats/feat_dim": "0\n"}, T, "feat_dim holds 0")
case("train-utt2num-frames-text", {"feats/utt2num_frames": line(2, "{key} many")}, T,
     "utt2num_frames:2: expected '<utt-id> <num-frames>'")
case("train-features-yaml-dup", {"feats/features.yaml": append("dither: 1.0\n")}, T, "duplicate key 'dither'")
case("train-features-yaml-mel-zero", {"feats/features.yaml": replace("num_mel_bins: 13", "num_mel_bins: 0")},
     T, "features.num_mel_bins = 0")
case("train-no-feats-scp", {"feats/feats.scp": None}, T, "not a features dir: feats.scp is missing")
case("train-cmvn-missing", {"feats/cmvn_global.ark": None}, T, "cmvn_global.ark is missing")
case("train-cmvn-truncated", {"feats/cmvn_global.ark": cut(0.5)}, T, "cannot read CMVN stats")
case("train-ark-truncated", {"feats/feats.ark": cut(0.5)}, T + " --set model.hidden=4 --set model.subsample=2",
     "(truncated or corrupt ark? AssertionError)")
case("train-exp-holds-run", {"e/checkpoints/latest": "x", "e/checkpoints/epoch1.pt": "x"}, T,
     "exp dir already holds a training run")

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


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return build_world(tmp_path_factory.mktemp("world"))


@pytest.mark.parametrize("files,command,fragment", CASES)
def test_bad_input_gives_one_line_error(world, tmp_path, files, command, fragment):
    dirs = materialize(world, tmp_path, files, command)
    args = [a.format(**dirs) for a in command.split()]
    err = one_error(run(*args))
    for frag in fragment if isinstance(fragment, tuple) else (fragment,):
        assert frag.format(**dirs) in err, err


def test_the_corpus_is_large():
    assert len(CASES) >= 200, len(CASES)


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

def test_perturb_speed_keeps_what_it_did_not_write(world, tmp_path):
    dirs = materialize(world, tmp_path, {}, "{data} {feats}")
    before = sorted(p.name for p in dirs["feats"].iterdir())
    one_error(run("data", "perturb-speed", dirs["data"], dirs["feats"]))
    assert sorted(p.name for p in dirs["feats"].iterdir()) == before
    out = tmp_path / "sp"
    for _ in range(2):  # its own output is replaced, not refused
        r = run("data", "perturb-speed", dirs["data"], out, "--factors", "0.9,1.0")
        assert r.exit_code == 0, r.output
    r = run("data", "perturb-speed", dirs["data"], out, "--factors", "1.0")
    assert r.exit_code == 0, r.output
    assert not any(ln.startswith("sp0.9-") for ln in (out / "utt2spk").read_text().splitlines())


def test_an_ignored_key_in_a_config_file_is_a_warning(world, tmp_path, caplog):
    (tmp_path / "c.yaml").write_text("dist:\n  period: '4'\n")
    r = run("train", "--train-data", world["feats"], "--tokenizer", world["tok"] / "tokenizer.model",
            "--config", tmp_path / "c.yaml", "--print-config")
    assert r.exit_code == 0, r.output
    assert "c.yaml:2: dist.period: 4 is ignored (it is in a config file): --strategy single" in caplog.text

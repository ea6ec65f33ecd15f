"""The bad-input corpus, data dirs, features and training: every case is a command on damaged input that
must fail with exactly one line ``asrtrain: error: ...`` holding the expected fragment: no traceback, no
silent success. Decode, scoring, tokenizer, LM and the limits of issue 57 are in test_bad_input_models.py.

Each case is (id, files to damage, command, fragment). ``files`` maps a path under the case's copy of the
clean world (see corpus_world.py: data/, feats/, tok/, lm/, exp/, hub5/; built once for tests/trust by its
conftest.py) to new content; the command's ``{data}``, ``{feats}``, ``{tok}``, ``{lm}``, ``{exp}``,
``{hub5}`` and ``{tmp}`` name those copies. The commands run in-process through click's CliRunner.
"""

import pytest

from tests.helpers.cli_helpers import one_error, run
from tests.helpers.corpus_world import (UTTS, append, audio_at, check_case, cut, dup_line, float_audio,
                                        huge_stats, line, materialize, prepend, replace, segments_for_data,
                                        swap_lines)

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
case("train-cmvn-overflow", {"feats/cmvn_global.ark": huge_stats(1e300)}, T,
     ("CMVN stats in {feats}/cmvn_global.ark overflow", "recompute CMVN: asrtrain features"))
case("train-ark-truncated", {"feats/feats.ark": cut(0.5)}, T + " --set model.hidden=4 --set model.subsample=2",
     "(truncated or corrupt ark? AssertionError)")
case("train-exp-holds-run", {"e/checkpoints/latest": "x", "e/checkpoints/epoch1.pt": "x"}, T,
     "exp dir already holds a training run")


@pytest.mark.parametrize("files,command,fragment", CASES)
def test_bad_input_gives_one_line_error(world, tmp_path, files, command, fragment):
    check_case(world, tmp_path, files, command, fragment)


def test_the_corpus_is_large():
    assert len(CASES) >= 150, len(CASES)


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

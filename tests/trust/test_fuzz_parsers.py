"""Property-based fuzzing of every input parser: a clean one-line AsrError or a correct parse, never any
other exception. Inputs mix random bytes with the tokens that broke parsers before (nan, inf, 1e999,
<s>, #0, no-break spaces, cut lines, non-UTF-8 bytes)."""

import math
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from asrtrain.errors import AsrError

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TRICKY = ["nan", "NaN", "inf", "-inf", "+Infinity", "1e999", "-1", "-0.5", "0", "0.0", "1.5", "2", "10", "x",
          "<s>", "</s>", "#0", "#3", "a", "b", "spk0", "utt1", "utt2", "rec1", "A", "B", "1", "|", "sox", "=>",
          "/", "__", "[", "]", "(", ")", "{", "}", ";;", "<O>", "<ALT_BEGIN>", "<ALT>", "<ALT_END>", "@",
          "\\data\\", "\\end\\", "\\1-grams:", "\\2-grams:", "ngram", "1=2", "2=1", "-0.3", "\u00a0", "\u200b",
          "\ufeff", "é", "caf\u00e9", "%HESITATION", "-", "'"]
SEPS = [" ", " ", " ", "\t", "\u00a0", "\r", "  "]


@st.composite
def text_lines(draw, max_lines=6):
    """A file's text: lines of tricky tokens joined by (mostly) spaces."""
    lines = []
    for _ in range(draw(st.integers(0, max_lines))):
        toks = draw(st.lists(st.sampled_from(TRICKY) | st.text(max_size=4), max_size=7))
        seps = [draw(st.sampled_from(SEPS)) for _ in toks]
        lines.append("".join(t + s for t, s in zip(toks, seps)).rstrip(" "))
    return "\n".join(lines) + draw(st.sampled_from(["\n", "", "\r\n"]))


NUM = (st.sampled_from(["nan", "NaN", "inf", "-inf", "+Infinity", "1e999", "-1", "-0.5", "0", "0.0", "0.3",
                        "1.5", "2", "10", "x", "", "1_0", "0x1"])
       | st.floats(allow_nan=True, allow_infinity=True).map(repr))
IDS = st.sampled_from(["utt1", "utt2", "utt3", "rec1", "spk0", "a", "b"])
WORDS = st.lists(st.sampled_from(TRICKY), max_size=4).map(" ".join)
RECORD = {  # well-formed-looking records of each data dir file, with tricky values
    "text": st.tuples(IDS, WORDS).map(" ".join),
    "utt2spk": st.tuples(IDS, IDS).map(" ".join),
    "spk2utt": st.tuples(IDS, st.lists(IDS, max_size=3).map(" ".join)).map(" ".join),
    "wav.scp": st.tuples(IDS, st.sampled_from(["/nonexistent.wav", "false |", "", "a b |"])).map(" ".join),
    "segments": st.tuples(IDS, IDS, NUM, NUM).map(" ".join),
    "reco2file_and_channel": st.tuples(IDS, IDS, st.sampled_from(["A", "B", "1", ""])).map(" ".join),
    "utt2num_frames": st.tuples(IDS, NUM).map(" ".join),
    "feats.scp": st.tuples(IDS, st.sampled_from(["/x.ark:12", ""])).map(" ".join),
}


def records(name):
    return st.lists(RECORD[name], max_size=5).map(lambda rows: "".join(r + "\n" for r in rows).encode("utf-8"))


file_bytes = (text_lines().map(lambda t: t.encode("utf-8"))
              | st.binary(max_size=200)
              | st.tuples(text_lines(), st.binary(max_size=8)).map(lambda p: p[0].encode("utf-8") + p[1]))


def one_line(err: AsrError) -> None:
    assert "\n" not in str(err) and str(err).strip()


def write(tmp: Path, name: str, data: bytes) -> Path:
    path = tmp / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


# -- data dir files ---------------------------------------------------------------------------------------

DATA_FILES = ["text", "utt2spk", "spk2utt", "wav.scp", "segments", "reco2file_and_channel", "utt2num_frames",
              "feats.scp"]


@FUZZ
@st.composite
def data_dirs(draw):
    names = draw(st.lists(st.sampled_from(DATA_FILES), min_size=1, max_size=6, unique=True))
    return {n: draw(records(n) | file_bytes if draw(st.booleans()) else records(n)) for n in names}


@settings(max_examples=100, deadline=None)
@given(data_dirs())
def test_data_dir_validate_and_fix(files):
    from asrtrain.data.validate import find_problems, fix, validate
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for name, data in files.items():
            write(tmp, name, data)
        for p in find_problems(tmp, audio=False):
            one_line(p.error())
        try:
            data = validate(tmp, audio=False)
        except AsrError as err:
            one_line(err)
        else:  # a valid dir: every segment is finite and ordered, every transcript clean
            for seg in (data.segments or {}).values():
                assert math.isfinite(seg.start) and 0 <= seg.start and (seg.end == -1 or seg.end > seg.start)
            assert all(w not in ("<s>", "</s>", "#0") for t in (data.text or {}).values() for w in t.split())
        try:
            fix(tmp, audio=False)
        except AsrError as err:
            one_line(err)
        else:  # what fix keeps has no utterance-level problem left
            assert not [p for p in find_problems(tmp, audio=False) if p.utts]


@FUZZ
@given(st.lists(st.sampled_from(TRICKY) | st.text(max_size=6), max_size=5).map(" ".join)
       | st.tuples(IDS, NUM, NUM).map(" ".join))
def test_segment_values(value):
    from asrtrain.data.datadir import parse_segment
    try:
        seg = parse_segment(value)
    except ValueError as err:
        assert "\n" not in str(err)
    else:
        assert math.isfinite(seg.start) and math.isfinite(seg.end)
        assert seg.start >= 0 and (seg.end == -1 or seg.end > seg.start)


@FUZZ
@given(text_lines(max_lines=1))
def test_text_line_check(line):
    from asrtrain.data.textcheck import text_line_problem
    line = line.rstrip("\r\n")
    why = text_line_problem(line)
    if why is None:  # accepted: Python's split and Kaldi's split on spaces/tabs agree
        assert line.split() == [w for w in line.replace("\t", " ").split(" ") if w]
        assert not {"<s>", "</s>", "#0"} & set(line.split()[1:])


# -- scoring inputs ---------------------------------------------------------------------------------------

@FUZZ
@given(file_bytes)
def test_stm(data):
    from asrtrain.score.stm import read_stm, tokenize
    with tempfile.TemporaryDirectory() as d:
        try:
            segs = read_stm(write(Path(d), "x.stm", data))
        except AsrError as err:
            one_line(err)
        else:
            for s in segs:
                assert math.isfinite(s.begin) and math.isfinite(s.end) and 0 <= s.begin <= s.end
                tokenize(s.text)


@FUZZ
@given(file_bytes)
def test_ctm(data):
    from asrtrain.score.ctm import read_ctm
    with tempfile.TemporaryDirectory() as d:
        try:
            items = read_ctm(write(Path(d), "x.ctm", data))
        except AsrError as err:
            one_line(err)
        else:
            for it in items:
                assert math.isfinite(it.begin) and math.isfinite(it.dur) and it.begin >= 0 and it.dur >= 0


@FUZZ
@given(file_bytes, text_lines(max_lines=1))
def test_glm_rules_then_filtering(data, transcript):
    from asrtrain.score.glm import parse_glm
    with tempfile.TemporaryDirectory() as d:
        try:
            glm = parse_glm(write(Path(d), "x.glm", data))
        except AsrError as err:
            one_line(err)
            return
        for kind in ("ctm", "stm"):  # every applicability regexp compiles, every rule applies
            glm.select(kind, "hub5").filter_text(transcript)


@FUZZ
@given(file_bytes, file_bytes, file_bytes)
def test_hyp_text_to_ctm(text, segments, r2fc):
    from asrtrain.score.ctm import text_to_ctm
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        try:
            items = text_to_ctm(write(tmp, "text", text), write(tmp, "segments", segments), write(tmp, "r2fc", r2fc))
        except AsrError as err:
            one_line(err)
        else:
            assert all(math.isfinite(i.begin) and i.dur >= 0 for i in items)


# -- language models and vocabularies ---------------------------------------------------------------------

ARPA = ("\\data\\\nngram 1=3\nngram 2=1\n\n\\1-grams:\n-0.5\t<s>\t-0.3\n-0.5\t</s>\n-0.5\tone\t-0.2\n\n"
        "\\2-grams:\n-0.1\t<s> one\n\n\\end\\\n")


@FUZZ
@given(file_bytes)
def test_arpa_random(data):
    from asrtrain.lm.ngram import read_arpa
    with tempfile.TemporaryDirectory() as d:
        try:
            lm = read_arpa(write(Path(d), "x.arpa", data))
        except AsrError as err:
            one_line(err)
        else:
            assert lm.order >= 1 and all(not math.isnan(p) for k in lm.probs for p in k.values())


@settings(max_examples=100, deadline=None)
@given(st.integers(0, len(ARPA)), st.sampled_from(["cut", "flip", "insert"]), st.sampled_from(TRICKY))
def test_arpa_damaged(pos, how, token):
    """A valid ARPA cut, or with a token swapped in, is refused, or still parses to the same counts."""
    from asrtrain.lm.ngram import read_arpa
    text = {"cut": ARPA[:pos], "flip": ARPA[:pos] + token + ARPA[pos + len(token):],
            "insert": ARPA[:pos] + token + ARPA[pos:]}[how]
    with tempfile.TemporaryDirectory() as d:
        try:
            lm = read_arpa(write(Path(d), "x.arpa", text.encode("utf-8")))
        except AsrError as err:
            one_line(err)
        else:
            if how == "cut":
                assert "\\end\\" in text  # a cut file never reads as a smaller LM
            assert [len(k) for k in lm.probs] == [3, 1]


@FUZZ
@given(file_bytes)
def test_vocabulary(data):
    from asrtrain.decode.lexicon import read_words
    with tempfile.TemporaryDirectory() as d:
        try:
            words = read_words(write(Path(d), "words.txt", data))
        except AsrError as err:
            one_line(err)
        else:
            assert words and all(w and not any(c.isspace() for c in w) for w in words)


# -- YAML configs and --set -------------------------------------------------------------------------------

YAML_TOKENS = ["features:", "train:", "dist:", "model:", "  num_mel_bins: ", "  lr: ", "  timeout_s: ",
               "  hidden: ", "num_mel_bins: ", "frame_shift: ", "sample_rate: ", "dither: ", "cmvn: ",
               "0", "-1", "40", ".nan", ".inf", "1e400", "2001-02-30", "[1, 2]", "{a: 1}", "yes", "global",
               "'x'", "!!python/object:os.system", "&a", "*a", "- ", "\t", ": ", "\"", "\n", "\n  "]
yaml_text = st.lists(st.sampled_from(YAML_TOKENS), max_size=14).map("".join)
OVERRIDE_KEYS = ["train.lr", "dist.timeout_s", "features.num_mel_bins", "features.frame_shift", "model.hidden",
                 "dist.learners", "decode.beam_size", "tokenizer.vocab_size", "train", "bogus.x", "", "a.b.c"]
override = st.tuples(st.sampled_from(OVERRIDE_KEYS), st.sampled_from(["=", "", "=="]),
                     st.sampled_from(YAML_TOKENS[13:29]) | st.text(max_size=5)).map("".join)


@FUZZ
@given(yaml_text, st.lists(override, max_size=3))
def test_full_config(text, overrides):
    from asrtrain.config.file import load_config
    with tempfile.TemporaryDirectory() as d:
        path = write(Path(d), "c.yaml", text.encode("utf-8"))
        try:
            cfg = load_config(path, overrides)
        except AsrError as err:
            one_line(err)
        else:
            assert cfg.features.num_mel_bins >= 3 and cfg.features.frame_shift > 0 and cfg.dist.timeout_s > 0
            from asrtrain.limits import MAX_BEAM, MAX_HIDDEN
            assert cfg.model.hidden <= MAX_HIDDEN and cfg.decode.beam_size <= MAX_BEAM


SIZE_KEYS = ["model.hidden", "model.num_layers", "model.proj", "model.att_dim", "model.stack", "model.subsample",
             "model.conv_channels", "tokenizer.vocab_size", "decode.beam_size", "decode.batch_frames",
             "train.max_frames", "train.max_utts", "train.threads", "dp.clip", "dp.noise_multiplier"]
SIZES = st.sampled_from(["100000", "1e9", "1000000000000", ".inf", ".nan", "-1", "0", "8192", "8193", "64",
                         "65", "4096", "1e308", "99999999999999999999"]) | st.integers(-10, 10 ** 12).map(str)


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(SIZE_KEYS), SIZES), min_size=1, max_size=4),
       st.sampled_from(["", "&a ", "*a", "!!binary x"]))
def test_sizes_are_bounded_before_anything_is_built(sets, yaml_prefix):
    """Issue 57: an absurd size is refused by the config's validation (one line naming the key), so
    nothing is allocated for it; an anchor or alias in a config file is refused where it is composed."""
    from asrtrain.config.file import load_config
    from asrtrain.limits import MAX_PARAMS, estimated_params
    with tempfile.TemporaryDirectory() as d:
        path = write(Path(d), "c.yaml", f"train:\n  lr: {yaml_prefix}0.1\n".encode("utf-8"))
        try:
            cfg = load_config(path, [f"{k}={v}" for k, v in sets])
        except AsrError as err:
            one_line(err)
            return
    assert yaml_prefix == "", "an anchor or alias was accepted"
    m = cfg.model
    assert estimated_params(m.input_dim, m.num_targets, m.stack, m.num_layers, m.hidden, m.proj, 0) <= MAX_PARAMS
    assert all(math.isfinite(v) for v in (cfg.dp.clip, cfg.dp.noise_multiplier))


@FUZZ
@given(yaml_text, st.lists(override.map(lambda o: o.split(".", 1)[-1]), max_size=3))
def test_feature_config(text, overrides):
    from asrtrain.config import FeatureConfig
    from asrtrain.config.file import load_section
    from asrtrain.features.fbank import fbank
    with tempfile.TemporaryDirectory() as d:
        path = write(Path(d), "f.yaml", text.encode("utf-8"))
        try:
            conf = load_section(FeatureConfig, path, overrides)
        except AsrError as err:
            one_line(err)
            return
    wave = np.sin(np.arange(conf.sample_rate // 4) * 0.05).astype(np.float32) * 0.1
    feats = fbank(wave, conf.sample_rate, conf)  # a config that loads computes finite features
    assert np.isfinite(feats).all()


@FUZZ
@given(file_bytes)
def test_stored_config_on_resume(data):
    from asrtrain.config.yamlio import read_yaml_mapping
    with tempfile.TemporaryDirectory() as d:
        try:
            out = read_yaml_mapping(write(Path(d), "config.yaml", data))
        except AsrError as err:
            one_line(err)
        else:
            assert isinstance(out, dict) and all(isinstance(v, dict) for v in out.values())


# -- feature dirs: feats.scp, arks, CMVN, feat_dim --------------------------------------------------------

@pytest.fixture(scope="module")
def feat_dir(tmp_path_factory):
    from tests.helpers.featfix import make_feat_dir
    return make_feat_dir(tmp_path_factory.mktemp("fz") / "feats", 6, dim=5)


@pytest.mark.filterwarnings("error::RuntimeWarning")  # damaged CMVN stats are refused, not cast to Inf
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["feats.ark", "cmvn_global.ark", "feat_dim", "feats.scp", "utt2num_frames",
                        "features.yaml"]),
       st.sampled_from(["cut", "flip", "random"]), st.integers(0, 10 ** 6), st.binary(min_size=1, max_size=40))
def test_feature_dir_damage(feat_dir, name, how, pos, junk):
    import shutil
    from asrtrain.features.reader import FeatureReader
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d) / "feats"
        shutil.copytree(feat_dir, tmp)
        for scp in ("feats.scp",):
            (tmp / scp).write_text((tmp / scp).read_text().replace(str(feat_dir), str(tmp)))
        raw = (tmp / name).read_bytes()
        pos = pos % (len(raw) + 1)
        raw = {"cut": raw[:pos], "flip": raw[:pos] + junk + raw[pos + len(junk):], "random": junk}[how]
        assume(raw != (tmp / name).read_bytes())
        (tmp / name).write_bytes(raw)
        try:
            reader = FeatureReader(tmp)
            mats = [reader.load(u) for u in reader.keys()]
        except AsrError as err:
            one_line(err)
        else:
            assert all(m.ndim == 2 and m.shape[1] == reader.dim and np.isfinite(m).all() for m in mats)


def test_a_nul_byte_in_an_ark_path_is_named(feat_dir, tmp_path):
    """Found by test_feature_dir_damage: open() raises ValueError (not OSError) on a NUL in the path."""
    import shutil
    from asrtrain.features.reader import FeatureReader
    tmp = tmp_path / "feats"
    shutil.copytree(feat_dir, tmp)
    lines = (tmp / "feats.scp").read_text().replace(str(feat_dir), str(tmp)).splitlines()
    key, spec = lines[0].split(maxsplit=1)
    lines[0] = f"{key} {spec[:5]}\0{spec[5:]}"
    (tmp / "feats.scp").write_text("\n".join(lines) + "\n")
    with pytest.raises(AsrError, match="NUL byte") as err:
        reader = FeatureReader(tmp)
        [reader.load(u) for u in reader.keys()]
    one_line(err.value)
    assert "feats.scp:1" in str(err.value)


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize("value,row", [(1e300, 0), (1e39, 0), (1e40, 1), (-1e300, 1), (1e33, 0)])
def test_overflowing_cmvn_stats_are_refused_where_read(feat_dir, tmp_path, value, row):
    """Stats finite in float64 but beyond float32 (or whose normalisation is) used to be cast to Inf with a
    RuntimeWarning and turn every feature into Inf/NaN; now the stats file is named when read."""
    import shutil
    from asrtrain.features.reader import FeatureReader
    from tests.helpers.corpus_world import huge_stats
    tmp = tmp_path / "feats"
    shutil.copytree(feat_dir, tmp)
    (tmp / "feats.scp").write_text((tmp / "feats.scp").read_text().replace(str(feat_dir), str(tmp)))
    huge_stats(value, row)(tmp / "cmvn_global.ark")
    with pytest.raises(AsrError) as err:
        reader = FeatureReader(tmp)
        [reader.load(u) for u in reader.keys()]
    one_line(err.value)
    text = err.value.render()
    assert f"CMVN stats in {tmp / 'cmvn_global.ark'}" in text and "asrtrain features" in text, text


# -- tokenizer --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tokenizer_model(tmp_path_factory):
    from tests.helpers.cli_helpers import run
    root = tmp_path_factory.mktemp("tokfz")
    (root / "text").write_text("".join(f"u{i} one two three four five six seven\n" for i in range(20)))
    assert run("tokenizer", "train", "--text", root / "text", "--out", root / "t", "--model-type", "word",
               "--vocab-size", "12").exit_code == 0
    return root / "t" / "tokenizer.model"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 10 ** 6), st.binary(max_size=30), st.lists(st.sampled_from(TRICKY) | st.integers(-5, 40).map(str),
                                                                  max_size=5))
def test_tokenizer_model_and_ids(tokenizer_model, pos, junk, ids):
    from asrtrain.text.tokenizer import Tokenizer
    from tests.helpers.cli_helpers import one_error, run
    raw = tokenizer_model.read_bytes()
    pos = pos % (len(raw) + 1)
    with tempfile.TemporaryDirectory() as d:
        damaged = write(Path(d), "tok.model", raw[:pos] + junk)
        try:
            Tokenizer(damaged)
        except AsrError as err:
            one_line(err)
        ids_file = write(Path(d), "ids", ("u1 " + " ".join(ids) + "\n").encode("utf-8"))
        r = run("tokenizer", "decode", "--model", tokenizer_model, "--ids", ids_file)
        if r.exit_code != 0:
            one_error(r)

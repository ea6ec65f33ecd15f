"""The bad-input corpus, errors raised inside libraries (issue 57): sentencepiece (a corrupt or foreign
tokenizer model, text it cannot train on), soundfile (unreadable audio in wav.scp and for transcribe, a
directory where a file belongs) and kaldiio (a truncated or damaged ark, CMVN stats that are not a matrix).
Each must reach the user as one ``asrtrain: error:`` line naming the file and a fix, never as the
library's exception through cli.py's generic handler. The format of a case is test_bad_input_corpus.py's.
"""

import gzip
import shutil

import pytest

from tests.helpers.corpus_world import UTTS, check_case, cut, replace

U0, U2 = UTTS[0], UTTS[1]
CASES = []
ZIP = b"PK\x03\x04" + bytes(range(256)) * 2  # a torch file's first bytes, or any zip
CORRUPT = "corrupt or unsupported format"


def case(cid, files, command, fragment):
    CASES.append(pytest.param(files, command, fragment, id=cid))


def a_directory(path):
    """Replace a file by a directory of the same name."""
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
    path.mkdir()


def flip(start: int, stop: int):
    """Bytes ``start:stop`` of a file set to 0xff."""
    def apply(path):
        b = bytearray(path.read_bytes())
        b[start:stop] = b"\xff" * (stop - start)
        return bytes(b)
    return apply


def every_97th_flipped(path):
    b = bytearray(path.read_bytes())
    for i in range(40, len(b), 97):
        b[i] ^= 0xFF
    return bytes(b)


# -- sentencepiece --------------------------------------------------------------------------------------
ENC = "tokenizer encode --model {tok}/tokenizer.model {tmp}/t.txt"
NOT_SPM = "not a sentencepiece model"
for cid, model, frag in [
    ("zip", ZIP, NOT_SPM), ("gzip", lambda p: gzip.compress(p.read_bytes()), NOT_SPM),
    ("bytes-flipped", every_97th_flipped, NOT_SPM),
    ("directory", a_directory, ("{tok}/tokenizer.model: is a directory, not a tokenizer model", "fix:")),
]:
    case(f"spm-encode-model-{cid}", {"tok/tokenizer.model": model, "t.txt": "u1 one two\n"}, ENC, frag)
case("spm-decode-model-zip", {"tok/tokenizer.model": ZIP, "ids.txt": "u1 1 2\n"},
     "tokenizer decode --model {tok}/tokenizer.model --ids {tmp}/ids.txt",
     ("{tok}/tokenizer.model: ", NOT_SPM))
case("spm-train-tokenizer-zip", {"tok/tokenizer.model": ZIP},
     "train --train-data {feats} --tokenizer {tok}/tokenizer.model --exp-dir {tmp}/e --print-config",
     ("{tok}/tokenizer.model: ", NOT_SPM, "fix: retrain it"))
case("spm-decode-exp-tokenizer-zip", {"exp/tokenizer.model": ZIP}, "decode {exp} {feats} {tmp}/dec",
     ("{exp}/tokenizer.model: ", NOT_SPM))
case("spm-transcribe-exp-tokenizer-directory", {"exp/tokenizer.model": a_directory},
     "transcribe {exp} {audio}/%s.wav" % U0, "{exp}/tokenizer.model: is a directory, not a tokenizer model")
TT = "tokenizer train --text {tmp}/t.txt --out {tmp}/tk"
for cid, text, frag in [
    ("empty-text", "", "t.txt: no transcripts to train a tokenizer on"),
    ("blank-lines", "\n\n\n", "t.txt: no transcripts to train a tokenizer on"),
    ("ids-only", "u1\nu2\n", "t.txt:1: empty transcript for 'u1'"),
]:
    case(f"spm-train-{cid}", {"t.txt": text}, TT, frag)
    case(f"spm-train-{cid}-bpe", {"t.txt": text}, TT + " --model-type bpe --vocab-size 20", frag)
ALPHABET = "u1 abcdefghij klmnopqrst uvwxyz\nu2 the quick brown fox\n"  # 26 letters, 29 pieces with specials
for mt in ("bpe", "unigram"):  # sentencepiece's "Vocabulary size is smaller than required_chars. 5 vs 29"
    case(f"spm-train-vocab-below-characters-{mt}", {"t.txt": ALPHABET},
         TT + f" --model-type {mt} --vocab-size 5",
         ("t.txt: --vocab-size 5 is smaller than the 29 pieces this text needs",
          "fix: give --vocab-size 29 or more"))

# -- soundfile: features from wav.scp --------------------------------------------------------------------
F = "features {data} {tmp}/out"
WAV2 = f"wav.scp:2: cannot read audio file {{audio}}/{U2}.wav: "
for cid, damage, frag in [
    ("directory", a_directory, ("wav.scp:2: audio file {audio}/%s.wav is not a regular file" % U2, "fix:")),
    ("zip", lambda p: ZIP, (WAV2, CORRUPT, "fix: check the file")),
    ("header-only", lambda p: p.read_bytes()[:44], ("wav.scp:2: ", "is truncated: 0 of")),
    ("header-cut", lambda p: p.read_bytes()[:30], (WAV2, CORRUPT)),
    ("fmt-chunk-flipped", flip(20, 36), (WAV2, CORRUPT)),
    ("flac-garbage", lambda p: b"fLaC" + bytes(range(256)), (WAV2, CORRUPT)),
    ("ogg-garbage", lambda p: b"OggS" + bytes(range(256)), (WAV2, CORRUPT)),
    ("sphere-garbage", lambda p: b"NIST_1A\n   1024\n" + bytes(range(256)), (WAV2, CORRUPT)),
]:
    case(f"sf-features-{cid}", {f"audio/{U2}.wav": damage}, F, frag)

# -- soundfile: transcribe (one input: its own error; several: how many failed) --------------------------
TR = "transcribe {exp} {audio}/%s.wav" % U0
BAD0 = f"cannot read audio file {{audio}}/{U0}.wav: "
for cid, damage, frag in [
    ("empty", b"", (BAD0, CORRUPT)),
    ("text", "not audio at all\n", (BAD0, CORRUPT)),
    ("zip", ZIP, (BAD0, CORRUPT)),
    ("header-only", lambda p: p.read_bytes()[:44], "is truncated: 0 of"),
    ("truncated", cut(0.5), "is truncated:"),
    ("fmt-chunk-flipped", flip(20, 36), (BAD0, CORRUPT)),
    ("flac-garbage", lambda p: b"fLaC" + bytes(range(256)), (BAD0, CORRUPT)),
    ("missing", None, "audio file not found"),
    ("directory", a_directory, ("{audio}/%s.wav: no audio files in this directory" % U0, "fix:")),
]:
    case(f"sf-transcribe-{cid}", {f"audio/{U0}.wav": damage}, TR, frag)
case("sf-transcribe-one-of-several", {f"audio/{U2}.wav": ZIP}, "transcribe {exp} {audio}",
     ("1 of 4 inputs could not be transcribed", f"{U2}.wav", CORRUPT))

# -- kaldiio: arks and CMVN stats ------------------------------------------------------------------------
D = "decode {exp} {feats} {tmp}/dec"
ARK = ("feats.scp:", "cannot read features of", "fix: recompute the features")
for cid, files in [
    ("truncated", {"feats/feats.ark": cut(0.33)}),
    ("offset-mid-record", {"feats/feats.scp": replace("feats.ark:10\n", "feats.ark:13\n")}),
    ("offset-past-end", {"feats/feats.scp": replace("feats.ark:10\n", "feats.ark:99999999\n")}),
    ("text-header", {"feats/feats.ark": lambda p: p.read_bytes()[:10] + b" [ " + p.read_bytes()[13:]}),
    ("dims-flipped", {"feats/feats.ark": flip(16, 24)}),
    ("compressed-garbage", {"feats/feats.ark": lambda p: p.read_bytes()[:12] + b"CM " + p.read_bytes()[15:]}),
    ("directory", {"feats/feats.ark": a_directory}),
]:
    case(f"kio-decode-ark-{cid}", files, D, ARK)
case("kio-forward-ark-truncated", {"feats/feats.ark": cut(0.33)}, "forward {exp} {feats} {tmp}/o.ark", ARK)
CMVN = ("cannot read CMVN stats from {feats}/cmvn_global.ark", "fix: recompute the features")
case("kio-cmvn-zip", {"feats/cmvn_global.ark": ZIP}, D, CMVN)
case("kio-cmvn-directory", {"feats/cmvn_global.ark": a_directory}, D, CMVN)
case("kio-transcribe-cmvn-garbage", {"exp/cmvn_global.ark": b"\x00B" + bytes(range(50))}, TR,
     "cannot read CMVN stats from {exp}/cmvn_global.ark")


@pytest.mark.parametrize("files,command,fragment", CASES)
def test_library_error_gives_one_line(world, tmp_path, files, command, fragment):
    check_case(world, tmp_path, files, command, fragment)
    if command.startswith("tokenizer train"):
        assert not (tmp_path / "tk").exists()  # a failed training leaves no empty OUT_DIR


def test_a_vocabulary_as_large_as_the_text_needs_trains(tmp_path):
    from tests.helpers.cli_helpers import run

    (tmp_path / "t.txt").write_text(ALPHABET)
    r = run("tokenizer", "train", "--text", tmp_path / "t.txt", "--out", tmp_path / "tk",
            "--model-type", "bpe", "--vocab-size", "29")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "tk" / "tokenizer.model").is_file()

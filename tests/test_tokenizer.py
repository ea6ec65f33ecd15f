from click.testing import CliRunner

from asrtrain.cli import cli
from asrtrain.text.tokenizer import Tokenizer


def test_train_encode_decode_roundtrip(tmp_path):
    text = tmp_path / "text"
    words = "the quick brown fox jumps over the lazy dog again and again".split()
    text.write_text("".join(f"u{i:03d} {' '.join(words[i % 5:(i % 5) + 6])}\n" for i in range(60)))
    for kind, size in (("unigram", 30), ("bpe", 30), ("char", 0)):
        out = tmp_path / kind
        size_opt = ["--vocab-size", str(size)] if size else []  # char: the text's characters decide
        r = CliRunner().invoke(cli, ["tokenizer", "train", "--text", str(text), "--out", str(out),
                                     "--model-type", kind, *size_opt])
        assert r.exit_code == 0, r.output
        tok = Tokenizer(out / "tokenizer.model")
        assert tok.sp.id_to_piece(0) == "<blank>"
        ids = tok.encode("the lazy dog")
        assert 0 not in ids and tok.decode(ids) == "the lazy dog"
    r = CliRunner().invoke(cli, ["tokenizer", "encode", "--model", str(tmp_path / "bpe" / "tokenizer.model"),
                                 "--ids", str(text)])
    assert r.exit_code == 0
    ids_file = tmp_path / "ids"
    ids_file.write_text(r.output)
    r = CliRunner().invoke(cli, ["tokenizer", "decode", "--model", str(tmp_path / "bpe" / "tokenizer.model"),
                                 "--ids", str(ids_file)])
    assert r.exit_code == 0 and r.output == text.read_text()


def test_empty_transcript_is_named(tmp_path):
    text = tmp_path / "text"
    text.write_text("u1 hello world\nu2\n")
    r = CliRunner().invoke(cli, ["tokenizer", "train", "--text", str(text), "--out", str(tmp_path / "t")])
    assert r.exit_code == 1 and f"{text}:2" in r.output and "empty transcript" in r.output


def _char_tokenizer(tmp_path) -> str:
    """A char tokenizer of a few words' letters, trained by the CLI; its tokenizer.model path."""
    text = tmp_path / "text"
    text.write_text("".join(f"u{i:03d} the lazy dog and the quick fox\n" for i in range(40)))
    r = CliRunner().invoke(cli, ["tokenizer", "train", "--text", str(text), "--out", str(tmp_path / "t"),
                                 "--model-type", "char"])
    assert r.exit_code == 0, r.output
    return str(tmp_path / "t" / "tokenizer.model")


def test_pieces_round_trip_and_an_unknown_character_is_the_unk_piece(tmp_path):
    """encode (pieces) printed an unknown character as itself, which decode then refused as a piece
    the tokenizer does not have; now it is <unk>, decoded as the word <unk>, as ids are."""
    model = _char_tokenizer(tmp_path)
    src = tmp_path / "in"
    src.write_text("a1 the dog\na2 the Mog\n")  # "M": a character the tokenizer never saw
    r = CliRunner().invoke(cli, ["tokenizer", "encode", "--model", model, str(src)])
    assert r.exit_code == 0, r.output
    assert "<unk>" in r.output.splitlines()[1] and "M" not in r.output
    pieces = tmp_path / "pieces"
    pieces.write_text(r.output)
    r = CliRunner().invoke(cli, ["tokenizer", "decode", "--model", model, str(pieces)])
    assert r.exit_code == 0, r.output
    assert r.output == "a1 the dog\na2 the <unk> og\n"


def test_encode_and_decode_read_a_pipe_on_stdin(tmp_path):
    """TEXT_FILE defaults to - (stdin); a pipe was refused as 'a FIFO, not a regular file'."""
    import subprocess
    import sys
    model = _char_tokenizer(tmp_path)
    cmd = [sys.executable, "-m", "asrtrain", "tokenizer"]
    enc = subprocess.run(cmd + ["encode", "--model", model, "--ids"], input="a1 the dog\n\na2 fox\n",
                         capture_output=True, text=True, timeout=120)
    assert enc.returncode == 0, enc.stderr
    dec = subprocess.run(cmd + ["decode", "--model", model, "--ids"], input=enc.stdout,
                         capture_output=True, text=True, timeout=120)
    assert dec.returncode == 0, dec.stderr
    assert dec.stdout == "a1 the dog\na2 fox\n"

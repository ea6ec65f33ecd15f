"""``tokenizer train --text`` and ``lm train --text`` read Kaldi ``text`` (``<utt-id> <words...>``). Plain
sentences without ids used to lose each sentence's first word, read as its id; their "ids" repeat, and a
repeated id is now refused naming the file and line."""

from tests.helpers.cli_helpers import one_error, run

PLAIN = ("set an alarm at nine\n"
         "what is the weather today\n"
         "set a timer for ten minutes\n")


def test_tokenizer_train_refuses_plain_text(tmp_path):
    (tmp_path / "plain.txt").write_text(PLAIN)
    err = one_error(run("tokenizer", "train", "--text", tmp_path / "plain.txt", "--out", tmp_path / "t",
                        "--model-type", "char"))
    assert f"{tmp_path}/plain.txt:3: duplicate utterance id 'set' (first on line 1)" in err, err
    assert "(fix: the file must be Kaldi text, '<utt-id> <words...>'" in err
    assert not (tmp_path / "t" / "tokenizer.model").exists()


def test_lm_train_refuses_plain_text(tmp_path):
    (tmp_path / "plain.txt").write_text(PLAIN)
    err = one_error(run("lm", "train", "--text", tmp_path / "plain.txt", "--out", tmp_path / "lm"))
    assert f"{tmp_path}/plain.txt:3: duplicate utterance id 'set' (first on line 1)" in err, err
    assert "Kaldi text" in err
    assert not (tmp_path / "lm" / "lm.arpa").exists()


def test_the_same_sentences_with_ids_keep_every_word(tmp_path):
    """The fix the error gives works: numbered lines train, and the first words are in the LM."""
    text = "".join(f"utt{i:08d} {line}\n" for i, line in enumerate(PLAIN.splitlines(), 1))
    (tmp_path / "text").write_text(text)
    r = run("lm", "train", "--text", tmp_path / "text", "--out", tmp_path / "lm", "--order", 2)
    assert r.exit_code == 0, r.output
    words = (tmp_path / "lm" / "words.txt").read_text().split()
    assert {"set", "what"} <= set(words)
    r = run("tokenizer", "train", "--text", tmp_path / "text", "--out", tmp_path / "t",
            "--model-type", "char")
    assert r.exit_code == 0, r.output

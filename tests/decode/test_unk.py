"""An unknown piece in a hypothesis is the word <unk> (Kaldi's convention), in text and in the ctm."""

import pytest

from asrtrain.config import TokenizerConfig
from asrtrain.decode.word_times import words_with_times
from asrtrain.text.tokenizer import Tokenizer, train_tokenizer


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    root = tmp_path_factory.mktemp("tok")
    (root / "text").write_text("u1 list them all\nu2 them all list\nu3 all the lists\n")
    return Tokenizer(train_tokenizer(root / "text", root, TokenizerConfig(model_type="char", vocab_size=30)))


def test_an_unknown_piece_decodes_to_the_word_unk_not_sentencepieces_symbol(tok):
    unk = tok.sp.unk_id()
    ids = tok.encode("list them")
    t_at = [tok.sp.id_to_piece(i) for i in ids].index("t")
    assert "\u2047" in tok.sp.decode(ids[:t_at] + [unk] + ids[t_at:])  # sentencepiece's own " ⁇ "
    # inside a word, at a word's start and alone; blanks (id 0) around it change nothing
    assert tok.decode(ids[:t_at] + [unk] + ids[t_at:]) == "lis <unk> t them"
    assert tok.decode([0, unk, 0] + ids + [unk, unk]) == "<unk> list them <unk> <unk>"
    assert tok.decode([unk]) == "<unk>"
    assert tok.decode(ids) == "list them"  # no unknown piece: sentencepiece's text, unchanged


def test_the_ctm_writes_an_unknown_piece_as_a_word_of_its_own():
    pieces = ["\u2581li", "<unk>", "st", "\u2581them", "<unk>"]
    words = words_with_times(pieces, [1, 3, 4, 8, 9], 0.03, unk_piece="<unk>")
    assert [w for w, _, _ in words] == ["li", "<unk>", "st", "them", "<unk>"]
    assert abs(words[1][1] - 0.09) < 1e-9 and abs(words[1][2] - 0.03) < 1e-9
    # without the unknown piece named, the old grouping (a word glued around it) is what one gets
    assert [w for w, _, _ in words_with_times(pieces, [1, 3, 4, 8, 9], 0.03)][0] == "li<unk>st"

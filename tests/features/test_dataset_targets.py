"""The dataset's targets: transcripts a tokenizer cannot spell, and what dropping utterances says."""

from asrtrain.config import TokenizerConfig
from asrtrain.features.dataset import AsrDataset
from asrtrain.text.tokenizer import Tokenizer, train_tokenizer
from tests.helpers.featfix import make_feat_dir


def test_transcripts_the_tokenizer_cannot_spell_are_warned_of(tmp_path, caplog):
    """A tokenizer trained on other text spells what it lacks as <unk>, silently; now the dataset names
    the text file, how many transcripts and one of them."""
    feats = make_feat_dir(tmp_path / "f", 12)
    narrow = tmp_path / "narrow_text"
    narrow.write_text("".join(f"n{i:02d} one two three\n" for i in range(20)))
    train_tokenizer(narrow, tmp_path / "tok", TokenizerConfig(model_type="char"))
    tok = Tokenizer(tmp_path / "tok" / "tokenizer.model")
    ds = AsrDataset(feats, 1, tok)
    assert ds.targets
    assert f"{feats / 'text'}: " in caplog.text and "the tokenizer has no piece for, learnt as <unk>" in caplog.text
    caplog.clear()
    train_tokenizer(feats / "text", tmp_path / "tok2", TokenizerConfig(model_type="char"))
    AsrDataset(feats, 1, Tokenizer(tmp_path / "tok2" / "tokenizer.model"))
    assert "no piece for" not in caplog.text


def test_dropped_utterances_are_named_with_a_fix(tmp_path, caplog):
    """The drop warning counted utterances and reasons only; it now names one per reason, and for
    transcripts too long for their frames the levers that help."""
    import pytest
    from asrtrain.errors import AsrError
    feats = make_feat_dir(tmp_path / "f", 12)
    train_tokenizer(feats / "text", tmp_path / "t", TokenizerConfig(model_type="char"))
    tok = Tokenizer(tmp_path / "t" / "tokenizer.model")
    with pytest.raises(AsrError, match="no usable utterances"):
        AsrDataset(feats, 8, tok)  # characters at 1 output frame in 8: every transcript too long
    assert "too short for its transcript: e.g. 'spk0-0000'" in caplog.text
    assert "a lower model.subsample, or a tokenizer with longer pieces" in caplog.text

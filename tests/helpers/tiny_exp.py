"""A tiny untrained exp dir for the transcribe tests (an attention decoder optional)."""

from dataclasses import replace

from asrtrain.config import Config, TokenizerConfig


def make_exp(root, att_weight=0.0):
    """A tiny untrained exp dir under ``root`` (per-utterance CMVN, as a speaker-CMVN model transcribes);
    with ``att_weight`` > 0 a joint CTC/attention model."""
    import torch
    from asrtrain.config.file import save_config
    from asrtrain.model.blstm import build_model
    from asrtrain.model.files import save_checked
    from asrtrain.text.tokenizer import Tokenizer, train_tokenizer

    root.mkdir(parents=True, exist_ok=True)
    (root / "text").write_text("u1 yes no\nu2 one two three\nu3 go stop\n")
    tok = Tokenizer(train_tokenizer(root / "text", root / "tok", TokenizerConfig(model_type="char", vocab_size=20)))
    cfg = Config()
    cfg = replace(cfg, features=replace(cfg.features, num_mel_bins=23, cmvn="speaker"),
                  model=replace(cfg.model, input_dim=23, num_targets=tok.vocab_size, num_layers=1, hidden=8,
                                att_weight=att_weight, att_dim=8))
    save_config(cfg, root / "config.yaml")
    (root / "tokenizer.model").write_bytes((root / "tok" / "tokenizer.model").read_bytes())
    torch.manual_seed(0)
    save_checked({"model": build_model(cfg.model).state_dict()}, root / "final.pt")
    return root

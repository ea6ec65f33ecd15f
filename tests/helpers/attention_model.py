"""A small joint CTC/attention model shared by the attention and rescoring tests."""

import torch

from asrtrain.config import ModelConfig
from asrtrain.model.blstm import build_model


def small(att_weight=0.4, **kw):
    """A 2-layer BLSTM of 8 units with an attention decoder (input dim 4, 6 targets)."""
    return ModelConfig(input_dim=4, num_targets=6, hidden=8, num_layers=2, stack=1, subsample=1, dropout=0.0,
                       att_weight=att_weight, att_dim=8, **kw)


def two_orders_model():
    """A joint model after 80 Adam steps on the CE of two utterances whose pieces run in opposite orders
    (1..5 and 5..1), in eval mode: ``(model, feats, lens, targets, tlens)``."""
    torch.manual_seed(4)
    model = build_model(small()).train()
    feats, lens = torch.randn(2, 12, 4), torch.tensor([12, 12])
    targets, tlens = torch.tensor([[1, 2, 3, 4, 5], [5, 4, 3, 2, 1]]), torch.tensor([5, 5])
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    for _ in range(80):
        _, _, ce = model(feats, lens, att=(targets, tlens))
        opt.zero_grad()
        ce.backward()
        opt.step()
    return model.eval(), feats, lens, targets, tlens

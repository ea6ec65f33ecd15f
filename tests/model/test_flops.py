"""The training FLOP count from the model's shapes, against a hand count of a tiny config."""

import pytest

from asrtrain.config import ModelConfig
from asrtrain.model.flops import flops_per_audio_second, train_flops, train_flops_per_frame


def test_tiny_blstm_matches_a_hand_count():
    # 2 layers of 3 cells over 2 stacked 4-dim frames, 5 targets. Per direction, per output frame:
    # layer 1 input 2*8*12 = 192 (forward + weight gradient: x2 = 384, no gradient of the features),
    # recurrence 2*3*12 = 72 (forward and state gradient sequential: 144; weight gradient batched: 72);
    # layer 2 input 2*6*12 = 144 (x3 = 432); head 2*6*5 = 60 (x3 = 180).
    cfg = ModelConfig(input_dim=4, num_targets=5, stack=2, subsample=2, num_layers=2, hidden=3)
    f = train_flops_per_frame(cfg)
    assert f.sequential == 2 * 2 * 144
    assert f.batched == 2 * (384 + 72) + 2 * (432 + 72) + 180
    assert train_flops(cfg, 10) == 10 * f.total
    assert flops_per_audio_second(cfg, 10.0) == pytest.approx(f.total * 50)


def test_projection_and_conv_frontend_are_counted():
    base = ModelConfig(input_dim=4, num_targets=5, stack=2, subsample=2, num_layers=1, hidden=3)
    proj = ModelConfig(**{**base.__dict__, "proj": 2})
    # with a projection to 2: recurrence 2*2*12 = 48 per direction, projection 2*3*2 = 12 (x3); head 2*4*5
    f = train_flops_per_frame(proj)
    assert f.sequential == 2 * 2 * 48
    assert f.batched == 2 * (384 + 48 + 36) + 3 * 2 * 4 * 5
    # conv: 7 bins -> F1 = 3, F2 = 1; 2 channels: conv1 2*9*2*3 per input frame x 2, conv2 2*9*2*2*1
    conv = ModelConfig(input_dim=7, num_targets=5, stack=1, subsample=2, num_layers=1, hidden=3,
                       frontend="conv", conv_channels=2)
    g = train_flops_per_frame(conv)
    lstm_in = 3 * 2 * 2 * 12  # input dim 2 channels x 1 bin, with an input gradient now
    assert g.batched == 2 * 216 + 3 * 72 + 2 * (lstm_in + 72) + 3 * 2 * 6 * 5


def test_the_published_shape_is_about_seven_gflop_per_audio_second():
    cfg = ModelConfig(input_dim=40, num_targets=500, stack=3, subsample=3, num_layers=6, hidden=512)
    assert flops_per_audio_second(cfg) == pytest.approx(6.9e9, rel=0.01)
    f = train_flops_per_frame(cfg)
    assert f.sequential / f.total == pytest.approx(0.24, abs=0.01)

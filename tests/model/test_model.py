"""The BLSTM's CPU path (padded batch, each utterance reversed within its length for the backward
direction) against torch's packed path: the same outputs on valid frames, the same gradients, and an
utterance's output independent of what it is batched with."""

import pytest
import torch
from torch import nn

from asrtrain.config import ModelConfig
from asrtrain.model.blstm import build_model
from asrtrain.model.rnn_stack import blstm_packed, blstm_padded, reverse_index


def test_reverse_index_reverses_valid_frames_and_keeps_padding():
    index = reverse_index(torch.tensor([3, 5, 1]), 5)
    assert index.tolist() == [[2, 1, 0, 3, 4], [4, 3, 2, 1, 0], [0, 1, 2, 3, 4]]
    # its own inverse
    assert torch.equal(torch.gather(index, 1, index), torch.arange(5).expand(3, 5))


@pytest.mark.parametrize("proj", [0, 6])
def test_padded_layer_equals_packed_layer_on_valid_frames_and_in_gradients(proj):
    torch.manual_seed(0)
    layer = nn.LSTM(7, 10, batch_first=True, bidirectional=True, proj_size=proj).double()
    lengths = torch.tensor([9, 4, 1, 7])
    x = torch.randn(4, 9, 7, dtype=torch.float64)
    valid = (torch.arange(9).unsqueeze(0) < lengths.unsqueeze(1)).unsqueeze(-1)
    weight = torch.randn(4, 9, 2 * (proj or 10), dtype=torch.float64) * valid  # a loss of valid frames only

    out_packed = blstm_packed(layer, x, lengths)
    out_padded = blstm_padded(layer, x, lengths)
    assert out_padded.shape == out_packed.shape
    assert torch.allclose(out_padded * valid, out_packed * valid, atol=1e-12)

    grads_packed = torch.autograd.grad((out_packed * weight).sum(), list(layer.parameters()))
    grads_padded = torch.autograd.grad((out_padded * weight).sum(), list(layer.parameters()))
    for a, b in zip(grads_packed, grads_padded):
        assert torch.allclose(a, b, atol=1e-10)


def test_model_output_does_not_depend_on_batch_mates():
    """The CPU path computes padded frames: an utterance batched with a longer one must still get the
    log-probabilities it gets alone (the padding never reaches a valid frame in either direction)."""
    torch.manual_seed(0)
    cfg = ModelConfig(input_dim=5, num_targets=6, hidden=8, num_layers=2, stack=2, subsample=2, dropout=0.0)
    model = build_model(cfg).eval()
    short, long = torch.randn(1, 7, 5), torch.randn(1, 12, 5)
    batch = torch.zeros(2, 12, 5)
    batch[0, :7], batch[1] = short[0], long[0]
    with torch.no_grad():
        alone, alone_len = model(short, torch.tensor([7]))
        together, together_len = model(batch, torch.tensor([7, 12]))
    assert together_len.tolist() == [alone_len.item(), 6]
    assert torch.allclose(together[0, :alone_len.item()], alone[0], atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_on_the_cpu_runs_where_onednn_cannot(dtype, monkeypatch):
    """A CPU without oneDNN's bf16/fp16 RNN falls back to the packed path instead of failing to build
    the primitive (fp16 on this CPU is such a case; bf16 is forced to it here)."""
    from asrtrain.model import rnn_stack
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: False, raising=False)
    torch.manual_seed(0)
    model = build_model(ModelConfig(input_dim=4, num_targets=5, hidden=6, num_layers=2, stack=1, subsample=1))
    x = torch.randn(2, 5, 4)
    with torch.autocast("cpu", dtype=dtype):
        assert not rnn_stack.padded_path_on_cpu(x) or torch.ops.mkldnn._is_mkldnn_fp16_supported()
        out, _ = model(x, torch.tensor([5, 3]))
    assert torch.isfinite(out.float()).all()


def test_intermediate_ctc_loss_mixes_the_middle_layer_in_training_only():
    """model.inter_ctc = w: training loss (1 - w) CTC(last layer) + w CTC(middle layer through the same
    head); in eval mode (the dev loss) the last layer's CTC alone."""
    import torch.nn.functional as F
    from asrtrain.features.dataset import Batch
    from asrtrain.train.loop import compute_loss

    torch.manual_seed(0)
    cfg = ModelConfig(input_dim=4, num_targets=5, hidden=6, num_layers=2, stack=1, subsample=1, dropout=0.0,
                      inter_ctc=0.3)
    model = build_model(cfg)
    feats, lens = torch.randn(2, 9, 4), torch.tensor([9, 6])
    targets, tlens = torch.tensor([[1, 2, 3], [4, 1, 0]]), torch.tensor([3, 2])
    batch = Batch(["a", "b"], feats, lens, targets, tlens)

    def ctc(lp):
        return F.ctc_loss(lp.transpose(0, 1), targets, lens, tlens, reduction="sum", zero_infinity=True)

    last, _, middle = model(feats, lens, inter=True)
    mixed, count = compute_loss(model.train(), batch, "ctc")
    assert count == 5
    assert torch.allclose(mixed, 0.7 * ctc(last) + 0.3 * ctc(middle))
    assert not torch.allclose(ctc(last), ctc(middle))
    plain, _ = compute_loss(model.eval(), batch, "ctc")
    assert torch.allclose(plain, ctc(last))


@pytest.mark.parametrize("sets", [{"inter_ctc": 1.0}, {"inter_ctc": 0.3, "num_layers": 1},
                                  {"inter_ctc": 0.3, "loss": "ce"}, {"inter_ctc": -0.1}])
def test_intermediate_ctc_refuses_what_it_cannot_do(sets):
    from asrtrain.errors import AsrError
    with pytest.raises(AsrError, match="inter_ctc"):
        ModelConfig(**{"num_layers": 2, **sets}).validate()


@pytest.mark.parametrize("stack,subsample", [(3, 3), (2, 1), (1, 2), (5, 2)])
def test_stack_frames_puts_each_kept_frames_window_side_by_side_repeating_the_last_frame(stack, subsample):
    from asrtrain.model.blstm import stack_frames
    x = torch.randn(2, 7, 3)
    lens = torch.tensor([7, 4])
    out, out_lens = stack_frames(x, lens, stack, subsample)
    assert out.shape == (2, -(-7 // subsample), 3 * stack)
    assert out_lens.tolist() == [-(-7 // subsample), -(-4 // subsample)]
    for n in range(2):
        for j in range(out.shape[1]):
            want = torch.cat([x[n, min(j * subsample + k, int(lens[n]) - 1)] for k in range(stack)])
            assert torch.equal(out[n, j], want)

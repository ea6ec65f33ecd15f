"""``model.rnn_layout``: every layout of the LSTM stack (packed per layer, packed once, padded per direction)
computes what today's does, to rounding in float64 on the CPU (outputs on valid frames, the middle layer's
states, every gradient), and in fp32 on CUDA (``gpu`` mark); the config key validates and old configs
without it load with ``auto``."""

import pytest
import torch

from asrtrain.config import ModelConfig, TrainConfig
from asrtrain.errors import AsrError
from asrtrain.model.blstm import build_model
from asrtrain.model.rnn_stack import RNN_LAYOUTS, check_rnn_bf16, resolve_layout

LAYOUTS = [name for name in RNN_LAYOUTS if name != "auto"]


def _cfg(**kw):
    base = dict(input_dim=5, num_targets=7, hidden=6, num_layers=3, stack=2, subsample=2, dropout=0.0)
    return ModelConfig(**{**base, **kw})


def _run(cfg, layout, x, lengths, weight, state, device="cpu"):
    """(log-probs, middle log-probs, out lengths, {name: grad}) of the model under ``layout``."""
    from dataclasses import replace
    model = build_model(replace(cfg, rnn_layout=layout)).to(device=device, dtype=x.dtype)
    model.load_state_dict(state)
    model.train()
    out, out_lens, middle = model(x.to(device), lengths.to(device), inter=True)
    valid = (torch.arange(out.shape[1], device=device).unsqueeze(0) < out_lens.unsqueeze(1)).unsqueeze(-1)
    w = weight.to(device) * valid  # a loss of valid frames only, as CTC's
    ((out * w).sum() + (middle * w).sum()).backward()
    grads = {k: p.grad.detach().cpu() for k, p in model.named_parameters()}
    return (out * valid).detach().cpu(), (middle * valid).detach().cpu(), out_lens.cpu(), grads


def _batch(dtype):
    torch.manual_seed(0)
    lengths = torch.tensor([11, 4, 1, 8, 11])
    x = torch.randn(5, 11, 5, dtype=dtype)
    weight = torch.randn(5, 6, 7, dtype=dtype)
    return x, lengths, weight


@pytest.mark.parametrize("proj", [0, 4])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_layout_equals_packed_per_layer_in_float64(layout, proj):
    cfg = _cfg(proj=proj)
    torch.manual_seed(1)
    state = build_model(cfg).double().state_dict()
    x, lengths, weight = _batch(torch.float64)
    ref = _run(cfg, "packed_per_layer", x, lengths, weight, state)
    got = _run(cfg, layout, x, lengths, weight, state)
    assert torch.equal(got[2], ref[2])
    torch.testing.assert_close(got[0], ref[0], rtol=0, atol=1e-12)
    torch.testing.assert_close(got[1], ref[1], rtol=0, atol=1e-12)
    assert got[3].keys() == ref[3].keys()
    for k in ref[3]:
        torch.testing.assert_close(got[3][k], ref[3][k], rtol=0, atol=1e-10, msg=k)
        assert ref[3][k].abs().max() > 0  # every parameter takes part


def test_packed_once_drops_out_on_the_packed_data_only():
    """Dropout on the packed data: in training the output changes, padded frames stay zero (nothing is
    computed there), and in eval mode it equals the other layouts."""
    cfg = _cfg(dropout=0.5, num_layers=2)
    torch.manual_seed(2)
    model = build_model(ModelConfig(**{**cfg.__dict__, "rnn_layout": "packed_once"})).double()
    x, lengths, _ = _batch(torch.float64)
    h_lens = (lengths + 1) // 2
    pad = torch.arange(6).unsqueeze(0) >= h_lens.unsqueeze(1)
    model.train()
    h_train, _, _ = model.encode(x, lengths)
    model.eval()
    with torch.no_grad():
        h_eval, _, _ = model.encode(x, lengths)
        ref = build_model(ModelConfig(**{**cfg.__dict__, "rnn_layout": "padded"})).double()
        ref.load_state_dict(model.state_dict())
        h_ref, _, _ = ref.eval().encode(x, lengths)
    assert (h_train[pad] == 0).all()
    dropped = (h_train[~pad] == 0).double().mean()
    assert 0.3 < dropped < 0.7
    torch.testing.assert_close(h_eval[~pad], h_ref[~pad], rtol=0, atol=1e-12)


def test_auto_is_todays_choice_on_the_cpu():
    x = torch.zeros(2, 3, 4)
    assert resolve_layout("auto", x) == "padded"
    for layout in LAYOUTS:
        assert resolve_layout(layout, x) == layout


def test_a_projected_stack_on_the_cpu_prints_no_torch_warning():
    """oneDNN has no projected LSTM; torch's fallback for the padded layout warns (once a process, so
    a fresh one is needed to see it), which tells a user nothing they can act on, so the stack quiets
    that one message and only it: with every warning an error, the forward passes and an unrelated
    warning still raises."""
    import subprocess
    import sys
    code = (
        "import torch, warnings\n"
        "from asrtrain.config import ModelConfig\n"
        "from asrtrain.model.blstm import build_model\n"
        "m = build_model(ModelConfig(input_dim=5, num_targets=7, hidden=6, num_layers=2, proj=3, "
        "dropout=0.0, rnn_layout='padded')).eval()\n"
        "with torch.no_grad():\n"
        "    m(torch.randn(2, 6, 5), torch.tensor([6, 4]))\n"
        "try:\n"
        "    warnings.warn('an unrelated warning', UserWarning)\n"
        "except UserWarning:\n"
        "    print('unrelated raised')\n"
    )
    out = subprocess.run([sys.executable, "-W", "error::UserWarning", "-c", code],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "unrelated raised"
    assert out.stderr == ""


def test_rnn_layout_is_validated_and_old_configs_load_with_auto():
    from asrtrain.config.file import section_from_dict
    with pytest.raises(AsrError, match="model.rnn_layout = 'packed' is not one of auto, packed_per_layer"):
        ModelConfig(rnn_layout="packed").validate()
    old = section_from_dict(ModelConfig, {"hidden": 8, "num_layers": 2})
    assert old.rnn_layout == "auto" and old.rnn_bf16 is False


def test_rnn_bf16_needs_bf16_precision():
    with pytest.raises(AsrError, match="needs train.precision = bf16"):
        check_rnn_bf16(True, "fp16", torch.device("cpu"))
    check_rnn_bf16(True, "bf16", torch.device("cpu"))  # the CPU runs LSTMs in bf16 under autocast anyway
    check_rnn_bf16(False, "fp32", torch.device("cpu"))
    assert TrainConfig().precision == "fp32"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run pytest -m gpu on a GPU machine)")
@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_layout_equals_packed_per_layer_on_cuda_in_fp32(layout):
    cfg = _cfg(proj=0, hidden=32)
    torch.manual_seed(1)
    state = {k: v.cuda() for k, v in build_model(cfg).state_dict().items()}
    x, lengths, weight = _batch(torch.float32)
    tf32 = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False  # TF32 rounds by design
    try:
        ref = _run(cfg, "packed_per_layer", x, lengths, weight, state, "cuda")
        got = _run(cfg, layout, x, lengths, weight, state, "cuda")
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.testing.assert_close(got[0], ref[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got[1], ref[1], rtol=1e-5, atol=1e-5)
    for k in ref[3]:
        torch.testing.assert_close(got[3][k], ref[3][k], rtol=1e-4, atol=1e-5 * float(ref[3][k].abs().max()),
                                   msg=k)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run pytest -m gpu on a GPU machine)")
@pytest.mark.parametrize("precision", ["fp16", "bf16", "bf16-rnn"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_half_precision_layouts_stay_near_fp32_on_cuda(layout, precision):
    """Under autocast each layout's log-probs stay within half precision's rounding of the fp32 ones;
    bf16-rnn: ``model.rnn_bf16`` (skipped, with the reason, where cuDNN refuses bf16 LSTMs)."""
    from asrtrain.model.rnn_stack import cuda_bf16_lstm_runs
    bf16 = precision == "bf16-rnn"
    if bf16 and not cuda_bf16_lstm_runs()[0]:
        pytest.skip(cuda_bf16_lstm_runs()[1])
    cfg = _cfg(proj=0, hidden=32)
    torch.manual_seed(1)
    model = build_model(ModelConfig(**{**cfg.__dict__, "rnn_layout": layout, "rnn_bf16": bf16})).cuda()
    x, lengths, _ = _batch(torch.float32)
    x, lengths = x.cuda(), lengths.cuda()
    with torch.no_grad():
        ref, out_lens = model(x, lengths)
        dtype = torch.float16 if precision == "fp16" else torch.bfloat16
        with torch.autocast("cuda", dtype=dtype):
            got, _ = model(x, lengths)
    valid = torch.arange(ref.shape[1], device="cuda").unsqueeze(0) < out_lens.unsqueeze(1)
    torch.testing.assert_close(got.float()[valid], ref[valid], rtol=0, atol=0.1)


@pytest.mark.parametrize("proj", [0, 4])
def test_the_hand_cast_calls_equal_the_module_call(proj):
    """The functional calls ``model.rnn_bf16`` makes (weights cast, torch.lstm over the packed data, or one
    direction at a time) equal nn.LSTM's own call. A float32 layer cast by hand to float64 (exact) stands in
    for the bf16 cast, which only CUDA runs."""
    import copy
    from torch.nn.utils.rnn import pack_padded_sequence
    from asrtrain.model.rnn_stack import blstm_packed_data, blstm_padded
    torch.manual_seed(3)
    layer = torch.nn.LSTM(5, 6, batch_first=True, bidirectional=True, proj_size=proj)
    wide = copy.deepcopy(layer).double()
    x, lengths, _ = _batch(torch.float64)
    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    ref = wide(packed)[0]
    got = blstm_packed_data(layer, packed, torch.float64)
    torch.testing.assert_close(got.data, ref.data, rtol=0, atol=1e-12)
    assert torch.equal(got.batch_sizes, ref.batch_sizes) and torch.equal(got.sorted_indices, ref.sorted_indices)
    got.data.sum().backward()
    assert layer.weight_hh_l0_reverse.grad is not None and layer.weight_hh_l0_reverse.grad.dtype == torch.float32
    valid = (torch.arange(11).unsqueeze(0) < lengths.unsqueeze(1)).unsqueeze(-1)
    torch.testing.assert_close(blstm_padded(layer, x, lengths, dtype=torch.float64) * valid,
                               blstm_padded(wide, x, lengths) * valid, rtol=0, atol=1e-12)

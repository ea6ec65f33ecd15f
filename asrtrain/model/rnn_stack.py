"""How the BLSTM's stack of bidirectional layers is laid out for torch's LSTM kernels (``model.rnn_layout``),
and in what dtype the LSTMs run under half precision.

Layouts, all the same computation (equal to rounding in float64, tests/model/test_blstm_layouts.py):

- ``packed_per_layer``: each layer sorts, packs and unpacks its padded input (:func:`blstm_packed`);
  today's CUDA path (cuDNN over a PackedSequence).
- ``packed_once``: the batch is sorted and packed once for the whole stack, every layer runs on the
  PackedSequence's data, dropout is applied to the packed data, and the output is unpacked once.
- ``padded``: each direction on its own over the padded batch, the backward direction over each utterance
  reversed within its length (:func:`blstm_padded`); today's CPU path (oneDNN's fused RNN). On CUDA this
  is one layer, one direction, unpacked input: the shape torch lets cuDNN run its persistent kernel for
  (fp16, sizes multiples of 128, batch limits; aten ``native/cudnn/RNN.cpp`` ``get_algo``).
- ``auto``: ``packed_per_layer`` on CUDA; ``padded`` on the CPU where oneDNN runs the dtype, else
  ``packed_per_layer``.

Shapes: the stack takes ``h`` (N, T, D) and lengths (N,); it returns (N, T, 2 x out). The padded layouts
leave garbage at padded frames (never read: CTC, CE and the attention decoder stop at the lengths); the
packed ones leave zeros there.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from typing import List, Optional, Tuple

import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from asrtrain.errors import AsrError

RNN_LAYOUTS = ("auto", "packed_per_layer", "packed_once", "padded")
#: the oldest cuDNN (``torch.backends.cudnn.version()``) we let run bf16 LSTMs; a one-off probe
#: (:func:`cuda_bf16_lstm_runs`) must also pass on the device
MIN_CUDNN_BF16_RNN = 8100


def reverse_index(lengths: torch.Tensor, t: int) -> torch.Tensor:
    """(N, T) time indices that reverse each utterance's first ``lengths[n]`` frames and leave its padding
    in place. The map is its own inverse."""
    steps = torch.arange(t, device=lengths.device).unsqueeze(0)
    last = lengths.unsqueeze(1) - 1
    return torch.where(steps <= last, last - steps, steps)


def direction_weights(layer: nn.LSTM, suffix: str, dtype: Optional[torch.dtype] = None) -> List[torch.Tensor]:
    """The flat weights of one direction of ``layer`` (``suffix`` "" or "_reverse"), cast to ``dtype``."""
    names = ["weight_ih", "weight_hh", "bias_ih", "bias_hh"] + (["weight_hr"] if layer.proj_size > 0 else [])
    weights = [getattr(layer, f"{kind}_l0{suffix}") for kind in names]
    return weights if dtype is None else [w.to(dtype) for w in weights]


def layer_weights(layer: nn.LSTM, dtype: Optional[torch.dtype] = None) -> List[torch.Tensor]:
    """Both directions' weights in nn.LSTM's order (cast to ``dtype``: a copy, not cuDNN's flat buffer)."""
    if dtype is None:
        return list(layer._flat_weights)
    return direction_weights(layer, "", dtype) + direction_weights(layer, "_reverse", dtype)


def blstm_padded(layer: nn.LSTM, x: torch.Tensor, lengths: torch.Tensor, index: Optional[torch.Tensor] = None,
                 dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """One bidirectional ``layer`` over the padded batch ``x`` (N, T, D) -> (N, T, 2 x out), equal on the
    valid frames to running it over the packed batch (tested).

    Why: on the CPU torch runs an LSTM over a PackedSequence with its native time loop, but a padded
    batch through oneDNN's fused RNN, 2.3-2.6x faster for the recipes' layers (``scripts/bench_rnn.py``).
    Padding is harmless in the forward direction (it comes after the valid frames); the backward direction
    runs forward over each utterance reversed within its length (padding left at the end), and its output
    is reversed back. Outputs at padded frames are garbage and never read: CTC and CE stop at ``lengths``,
    and the next layer's directions see them only after each utterance's valid frames.
    ``lengths`` (N,) on the device of ``x``; ``index`` (N, T) is :func:`reverse_index` of them (computed
    here if not given, once per stack by :func:`run_stack`); ``dtype`` casts the weights."""
    n, t, _ = x.shape
    if index is None:
        index = reverse_index(lengths, t)
    index = index.unsqueeze(-1)
    outputs = []
    for suffix in ("", "_reverse"):
        h0 = x.new_zeros(1, n, layer.proj_size or layer.hidden_size)
        c0 = x.new_zeros(1, n, layer.hidden_size)
        inp = torch.gather(x, 1, index.expand(-1, -1, x.shape[2])) if suffix else x
        out, _, _ = torch.lstm(inp, (h0, c0), direction_weights(layer, suffix, dtype), True, 1, 0.0,
                               layer.training, False, True)
        if suffix:
            out = torch.gather(out, 1, index.expand(-1, -1, out.shape[2]))
        outputs.append(out)
    return torch.cat(outputs, dim=-1)


def blstm_packed(layer: nn.LSTM, x: torch.Tensor, cpu_lengths: torch.Tensor,
                 dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """One bidirectional ``layer`` over ``x`` (N, T, D) packed by ``cpu_lengths``: cuDNN's path."""
    packed = pack_padded_sequence(x, cpu_lengths, batch_first=True, enforce_sorted=False)
    out = blstm_packed_data(layer, packed, dtype)
    return pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])[0]


def blstm_packed_data(layer: nn.LSTM, packed: PackedSequence, dtype: Optional[torch.dtype] = None
                      ) -> PackedSequence:
    """One bidirectional ``layer`` over an already packed batch -> the packed output (same batch sizes).
    The module itself runs it (its flat cuDNN buffer, its hooks) unless ``dtype`` differs from its weights'."""
    if dtype is None or dtype == layer.weight_ih_l0.dtype:
        return layer(packed)[0]
    n = int(packed.batch_sizes[0])
    data = packed.data
    h0 = data.new_zeros(2, n, layer.proj_size or layer.hidden_size)
    c0 = data.new_zeros(2, n, layer.hidden_size)
    out, _, _ = torch.lstm(data, packed.batch_sizes, (h0, c0), layer_weights(layer, dtype), True, 1, 0.0,
                           layer.training, True)
    return PackedSequence(out, packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices)


def resolve_layout(layout: str, h: torch.Tensor) -> str:
    """The layout ``model.rnn_layout`` means for ``h``: ``auto`` is today's choice per device; ``padded``
    on a CPU whose oneDNN cannot run the dtype falls back to ``packed_per_layer`` (it cannot build its
    primitive there)."""
    if layout == "auto":
        return "packed_per_layer" if h.is_cuda else ("padded" if padded_path_on_cpu(h) else "packed_per_layer")
    if layout == "padded" and not h.is_cuda and not padded_path_on_cpu(h):
        return "packed_per_layer"
    return layout


def rnn_cast(h: torch.Tensor, bf16: bool) -> Optional[torch.dtype]:
    """The dtype the LSTMs run in cast by hand outside autocast, or None (autocast's, or ``h``'s).

    Under a bf16 autocast on CUDA the LSTMs run outside autocast (:func:`rnn_outside_autocast`): in fp32,
    or with ``bf16`` (``model.rnn_bf16``) in bf16 where the installed cuDNN takes it
    (:func:`cuda_bf16_lstm_runs`; refused at setup otherwise, :func:`check_rnn_bf16`)."""
    if not rnn_outside_autocast(h):
        return None
    return torch.bfloat16 if bf16 else torch.float32


def run_stack(layers, dropout: nn.Module, h: torch.Tensor, lengths: torch.Tensor, layout: str = "auto",
              middle_at: Optional[int] = None, bf16: bool = False) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """Every layer of ``layers`` then ``dropout``, over ``h`` (N, T, D) of ``lengths`` (N,) -> the last
    states (N, T, 2 x out) and, with ``middle_at``, the input of layer ``middle_at`` (else None)."""
    layout = resolve_layout(layout, h)
    dtype = rnn_cast(h, bf16)
    cpu_lengths = lengths.cpu()
    hand = dtype is not None
    if h.is_cuda and (layout == "padded" or dtype == torch.bfloat16):
        _quiet(WEIGHT_COPY_WARNING)
    if not h.is_cuda and layout == "padded" and any(layer.proj_size for layer in layers):
        _quiet(NO_ONEDNN_PROJ_WARNING)
    with torch.autocast("cuda", enabled=False) if hand else contextlib.nullcontext():
        if hand:
            h = h.to(dtype)
        middle = None
        if layout == "packed_once":
            packed = pack_padded_sequence(h, cpu_lengths, batch_first=True, enforce_sorted=False)
            for i, layer in enumerate(layers):
                if i == middle_at:
                    middle = pad_packed_sequence(packed, batch_first=True, total_length=h.shape[1])[0]
                packed = blstm_packed_data(layer, packed, dtype)
                packed = PackedSequence(dropout(packed.data), packed.batch_sizes, packed.sorted_indices,
                                        packed.unsorted_indices)
            h = pad_packed_sequence(packed, batch_first=True, total_length=h.shape[1])[0]
        else:
            index = reverse_index(lengths.to(h.device), h.shape[1]) if layout == "padded" else None
            for i, layer in enumerate(layers):
                if i == middle_at:
                    middle = h
                if layout == "padded":
                    h = blstm_padded(layer, h, lengths, index, dtype)
                else:
                    h = blstm_packed(layer, h, cpu_lengths, dtype)
                h = dropout(h)
    return h, middle


#: torch warns on every call where one direction's weights (``padded``) or weights cast by hand
#: (``model.rnn_bf16``) are not cuDNN's flat buffer: it copies them into one, a copy the profile times
WEIGHT_COPY_WARNING = "RNN module weights are not part of single contiguous"
#: oneDNN has no projected LSTM, so torch runs ``padded`` projected layers (``model.proj``) on the CPU with
#: its own kernel and warns once. Nothing for the user to do: that is still ~2.9x faster than
#: ``packed_per_layer`` (4x320, proj 160, 16 utterances of 150-300 frames, forward+backward, 2-core CPU)
NO_ONEDNN_PROJ_WARNING = "LSTM with projections is not supported with oneDNN"


def _quiet(message: str) -> None:
    """Ignore torch's warning that starts with ``message`` (a known, measured fallback that the user can do
    nothing about), and only that message. Checked on every call rather than installed once: a
    ``warnings.catch_warnings`` block (pytest wraps every test in one) drops filters added inside it."""
    for action, pattern, *_ in warnings.filters:
        if action == "ignore" and pattern is not None and pattern.pattern == message:
            return
    warnings.filterwarnings("ignore", message=message)


def padded_path_on_cpu(x: torch.Tensor) -> bool:
    """Whether a CPU layer may take :func:`blstm_padded`: oneDNN's RNN runs fp32 everywhere, bf16 and
    fp16 only where the CPU has them (otherwise it cannot build its primitive); those fall back to the
    packed path, torch's native loop, as before."""
    dtype = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else x.dtype
    if dtype == torch.bfloat16:
        return torch.ops.mkldnn._is_mkldnn_bf16_supported() and _onednn_lstm_runs(dtype)
    if dtype == torch.float16:
        return torch.ops.mkldnn._is_mkldnn_fp16_supported() and _onednn_lstm_runs(dtype)
    return True


def _tiny_lstm(device: str, dtype: Optional[torch.dtype]) -> torch.Tensor:
    """A one-cell LSTM step forward and backward as the model makes it (weights that need gradients)."""
    x = torch.zeros(1, 2, 4, device=device, dtype=dtype)
    h = torch.zeros(1, 1, 3, device=device, dtype=dtype)
    w = [torch.zeros(s, device=device, requires_grad=True) for s in ((12, 4), (12, 3), (12,), (12,))]
    out = torch.lstm(x, (h, h), [p.to(dtype) if dtype else p for p in w], True, 1, 0.0, True, False, True)[0]
    out.float().sum().backward()
    return out


@functools.lru_cache(maxsize=None)
def _onednn_lstm_runs(dtype: torch.dtype) -> bool:
    """Whether oneDNN can build its LSTM primitive in ``dtype`` on this CPU: a CPU with AVX512-FP16 makes
    ``_is_mkldnn_fp16_supported()`` true, yet oneDNN may still refuse the fp16 LSTM ("could not create a
    primitive descriptor"), so one tiny forward is tried as the model makes it (fp32 tensors under
    autocast, weights that need gradients), once per process and dtype."""
    try:
        with torch.autocast("cpu", dtype=dtype):
            _tiny_lstm("cpu", None)
    except RuntimeError:
        return False
    return True


@functools.lru_cache(maxsize=None)
def cuda_bf16_lstm_runs() -> Tuple[bool, str]:
    """(whether cuDNN runs bf16 LSTMs here, why not). Checked at run time: the installed cuDNN's version
    against :data:`MIN_CUDNN_BF16_RNN`, native bf16 on the GPU, then one tiny bf16 forward and backward
    whose output must come back bf16."""
    if not torch.cuda.is_available():
        return False, "CUDA is not available"
    version = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    if version is None:
        return False, "cuDNN is not available"
    if version < MIN_CUDNN_BF16_RNN:
        return False, f"cuDNN {version} is older than {MIN_CUDNN_BF16_RNN}"
    if not torch.cuda.is_bf16_supported(including_emulation=False):
        return False, f"{torch.cuda.get_device_name()} has no native bf16"
    try:
        out = _tiny_lstm("cuda", torch.bfloat16)
    except RuntimeError as e:
        return False, f"cuDNN {version} refused a bf16 LSTM ({str(e).splitlines()[0][:120]})"
    if out.dtype != torch.bfloat16:
        return False, f"cuDNN {version} returned {out.dtype} for a bf16 LSTM"
    return True, ""


def check_rnn_bf16(bf16: bool, precision: str, device: torch.device) -> None:
    """Refuse ``model.rnn_bf16`` where it cannot do what it says: it needs ``train.precision=bf16``, and on
    CUDA a cuDNN that runs bf16 LSTMs (:func:`cuda_bf16_lstm_runs`). On the CPU autocast already runs the
    LSTMs in bf16 (oneDNN's or torch's loop), so there it changes nothing."""
    if not bf16:
        return
    if precision != "bf16":
        raise AsrError(f"model.rnn_bf16 = true needs train.precision = bf16 (it is {precision})",
                       fix="set train.precision=bf16, or model.rnn_bf16=false")
    if device.type == "cuda":
        ok, why = cuda_bf16_lstm_runs()
        if not ok:
            raise AsrError(f"model.rnn_bf16 = true but bf16 LSTMs cannot run here: {why}",
                           fix="set model.rnn_bf16=false (the LSTMs then run in fp32 under bf16)")


def rnn_outside_autocast(x: torch.Tensor) -> bool:
    """True under a bf16 autocast on CUDA: there the LSTMs must run outside autocast (fp32, or bf16 cast by
    hand with ``model.rnn_bf16``).

    torch's autocast wrapper for cuDNN RNNs (aten/src/ATen/cudnn/AutocastRNN.cpp) casts input and weights
    to fp16 whatever dtype autocast was asked for, so under bf16 the LSTMs would run in fp16 with no
    gradient scaler (bf16 gets none) and small gradients would underflow unseen. fp16 keeps autocast's
    fp16 LSTMs: its scaler protects them. On the CPU autocast runs the LSTMs in the asked dtype."""
    return (x.is_cuda and torch.is_autocast_enabled("cuda")
            and torch.get_autocast_dtype("cuda") == torch.bfloat16)

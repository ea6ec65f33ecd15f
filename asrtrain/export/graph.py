"""The acoustic model as an exportable graph, and the check that a written graph computes what torch does.

The graph: ``feats`` float32 (B, T, D), CMVN'd features (anything past each utterance's length), and
``lengths`` int64 (B,) -> ``log_probs`` float32 (B, T', V) and ``out_lengths`` int64 (B,), with
T' = ceil(T / subsample); B and T are dynamic. Frames of ``log_probs`` past ``out_lengths[b]`` are
garbage: read each utterance's first ``out_lengths[b]`` frames.

Why the ``padded`` RNN layout (:mod:`asrtrain.model.rnn_stack`): it is plain tensor ops, one
``torch.lstm`` per direction over the padded batch with the backward direction run over each utterance
reversed within its own length (an index gather), which the tracer and ONNX's LSTM op take with dynamic
shapes; the packed layouts carry a PackedSequence, which neither exports. Without that reversal ONNX's
bidirectional LSTM would start the backward direction at the end of the padding (torch's exporter warns
of exactly this), and an utterance's log-probs would depend on the longest one in its batch. The check
(:func:`check`) runs every utterance alone through the eager model and all of them as one padded batch
through the exported graph, so it tests that as well as the export.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import warnings
from pathlib import Path
from typing import Callable, Iterator, List, Sequence, Tuple

import numpy as np
import torch
from torch import nn

from asrtrain.errors import AsrError
from asrtrain.export.arrays import padded_batch

TOLERANCE = 1e-4  # max abs difference of log-probs allowed between the written graph and eager torch
INPUTS = ("feats", "lengths")
OUTPUTS = ("log_probs", "out_lengths")
DYNAMIC_AXES = {"feats": {0: "batch", 1: "frames"}, "lengths": {0: "batch"},
                "log_probs": {0: "batch", 1: "out_frames"}, "out_lengths": {0: "batch"}}
OPSET = 17
TRACE_LENGTHS = (40, 23)  # the example batch the graph is traced with
CHECK_LENGTHS = (97, 50, 13, 1)  # the batch it is checked on: other lengths than traced, unequal, one frame

# what torch's TorchScript-based exporter and tracer always say, for this graph harmlessly
_KNOWN_WARNINGS = ("You are using the legacy TorchScript-based ONNX export", "The feature will be removed",
                   "Exporting a model to ONNX with a batch_size other than 1")


class AcousticGraph(nn.Module):
    """The BLSTM (front-end, LSTM stack in the ``padded`` layout, CTC head) as one traceable forward."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = copy.deepcopy(model).cpu().float().eval()
        self.model.cfg = dataclasses.replace(model.cfg, rnn_layout="padded")

    def forward(self, feats: torch.Tensor, lengths: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """``feats`` (B, T, D), ``lengths`` (B,) -> log-probs (B, T', V), out lengths (B,)."""
        h, out_lengths, _ = self.model.encode(feats, lengths)
        return self.model.log_probs(h), out_lengths


def check_features(dim: int, lengths: Sequence[int], seed: int = 0) -> List[np.ndarray]:
    """CMVN-like features (standard normal) of the given lengths: float32 [T, D] each."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((t, dim)).astype(np.float32) for t in lengths]


def alone(model: nn.Module, feats: Sequence[np.ndarray]) -> List[np.ndarray]:
    """The eager model over each utterance on its own (a batch of one): log-probs [T', V] each."""
    out = []
    model = model.cpu().float().eval()
    with torch.no_grad():
        for f in feats:
            lp, lens = model(torch.from_numpy(f).unsqueeze(0), torch.tensor([f.shape[0]]))[:2]
            out.append(lp[0, : int(lens[0])].numpy())
    return out


def check(run: Callable[[np.ndarray, np.ndarray], Tuple[np.ndarray, np.ndarray]], model: nn.Module,
          what: Path, lengths: Sequence[int] = CHECK_LENGTHS) -> float:
    """Run ``run`` (padded feats, lengths -> log-probs, out lengths) on one batch of unequal ``lengths``
    and compare each utterance's log-probs with the eager model's over it alone; returns the max abs
    difference, or refuses with one line when it exceeds :data:`TOLERANCE` or a length differs."""
    feats = check_features(model.cfg.input_dim, lengths)
    want = alone(model, feats)
    lp, out_lengths = run(*padded_batch(feats))
    worst = 0.0
    for i, w in enumerate(want):
        if int(out_lengths[i]) != w.shape[0]:
            raise AsrError(f"the exported graph gives utterance {i} {int(out_lengths[i])} output frames, torch "
                           f"{w.shape[0]}", what, fix="report this as a bug; the export is not usable")
        worst = max(worst, float(np.abs(np.asarray(lp[i, : w.shape[0]]) - w).max()))
    if not worst <= TOLERANCE:
        raise AsrError(f"the exported graph's log-probs differ from torch's by {worst:.3g} (more than "
                       f"{TOLERANCE:g}) on a batch of lengths {list(lengths)}", what,
                       fix="report this as a bug; the export is not usable")
    return worst


def _example(model: nn.Module) -> Tuple[torch.Tensor, torch.Tensor]:
    x, lens = padded_batch(check_features(model.cfg.input_dim, TRACE_LENGTHS, seed=1))
    return torch.from_numpy(x), torch.from_numpy(lens)


@contextlib.contextmanager
def _known_warnings_silenced() -> Iterator[None]:
    """Drop the exporter's and tracer's known messages inside the block (nothing else)."""
    with warnings.catch_warnings():
        for msg in _KNOWN_WARNINGS:
            warnings.filterwarnings("ignore", message=msg)
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        yield


def check_onnx_supported(cfg) -> None:
    """Refuse what ONNX's LSTM op cannot express: a projection (``model.proj``)."""
    if cfg.proj > 0:
        raise AsrError(f"ONNX's LSTM op has no projection; this model has model.proj = {cfg.proj}",
                       fix="export it with --format torchscript")


def export_onnx(model: nn.Module, path: Path, threads: int = 1) -> float:
    """Write the graph of ``model`` to ``path`` (ONNX, opset :data:`OPSET`, dynamic batch and time) and
    check it with onnxruntime; returns the max abs log-prob difference from torch."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise AsrError("export --format onnx checks the graph with onnxruntime, which is not installed",
                       fix="pip install 'asrtrain[onnx]' (onnx, onnxruntime), or export with --format torchscript"
                       ) from None
    check_onnx_supported(model.cfg)
    graph = AcousticGraph(model)
    try:
        with torch.no_grad(), _known_warnings_silenced():
            torch.onnx.export(graph, _example(model), str(path), input_names=list(INPUTS),
                              output_names=list(OUTPUTS), dynamic_axes=DYNAMIC_AXES, opset_version=OPSET,
                              dynamo=False)
    except (RuntimeError, torch.onnx.errors.OnnxExporterError) as err:
        raise AsrError(f"torch could not export the model to ONNX ({str(err).splitlines()[0][:200]})",
                       fix="export it with --format torchscript") from None
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    return check(lambda x, lens: session.run(list(OUTPUTS), {"feats": x, "lengths": lens}), model, path)


def export_torchscript(model: nn.Module, path: Path) -> float:
    """Trace the graph of ``model``, save it to ``path`` (``torch.jit.save``), load it back and check it;
    returns the max abs log-prob difference from torch."""
    graph = AcousticGraph(model)
    with torch.no_grad(), _known_warnings_silenced():
        traced = torch.jit.trace(graph, _example(model), check_trace=False)
    torch.jit.save(traced, str(path))
    loaded = torch.jit.load(str(path), map_location="cpu")

    def run(x: np.ndarray, lens: np.ndarray):
        with torch.no_grad():
            lp, out = loaded(torch.from_numpy(x), torch.from_numpy(lens))
        return lp.numpy(), out.numpy()

    return check(run, model, path)

"""``asrtrain transcribe MODEL AUDIO...``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Tuple

import click


@click.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.argument("audio", nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(["text", "json", "ctm"]), default="text", show_default=True)
@click.option("--out", type=click.Path(path_type=Path), help="Write here (atomically) instead of stdout.")
@click.option("--lm", type=click.Path(path_type=Path), help="Word LM (ARPA): decode's lexicon search.")
@click.option("--params", type=click.Path(path_type=Path), help="tune-lm's best.yaml (with --lm).")
@click.option("--cmvn-stats", type=click.Path(path_type=Path),
              help="Training set's cmvn_global.ark, for a global-CMVN model (default: MODEL/cmvn_global.ark).")
@click.option("--utt2spk", type=click.Path(path_type=Path),
              help="utt -> speaker table: a per-speaker-CMVN model uses each speaker's stats over all of its "
                   "files (default: each file's own).")
@click.option("--channel", type=int, help="Take this channel (0-based) instead of mixing them.")
@click.option("--max-segment", type=float, default=30.0, show_default=True, help="Longest segment, seconds.")
@click.option("--batch-size", type=int, default=16, show_default=True,
              help="Segments (of all files, sorted by length) run through the model together.")
@click.option("--batch-frames", type=int,
              help="Most padded feature frames in a batch (default: the model's decode.batch_frames).")
@click.option("--engine", type=click.Choice(["torch", "onnx"]), default="torch", show_default=True,
              help="onnx: MODEL is a dir written by asrtrain export --format onnx, run with onnxruntime and "
                   "kaldi-native-fbank, no torch (no resampling: audio must be at the model's rate).")
@click.option("--device", default="cpu", show_default=True,
              help="cpu | auto | cuda | cuda:N (torch engine only).")
@click.option("--threads", type=int, default=1, show_default=True, help="CPU threads (0: every core).")
def transcribe(model: Path, audio: Tuple[str, ...], fmt: str, out: Optional[Path], lm: Optional[Path],
               params: Optional[Path], cmvn_stats: Optional[Path], utt2spk: Optional[Path], channel: Optional[int], max_segment: float,
               batch_size: int, batch_frames: Optional[int], engine: str, device: str, threads: int) -> None:
    """Transcribe AUDIO (files, directories, a wav.scp, or - for paths on stdin) with MODEL (an exp dir, a
    pack, or with --engine onnx an ONNX export)."""
    from asrtrain.transcribe.audio_in import check_channel

    check_channel(channel, "--channel")
    if engine == "onnx":
        _onnx(model, list(audio), fmt, out, lm, params, cmvn_stats, utt2spk, channel, max_segment, device,
              threads, batch_size, batch_frames)
        return
    from asrtrain.decode.options import torch_threads
    from asrtrain.device import check_device_spec
    from asrtrain.transcribe.model import Transcriber
    from asrtrain.transcribe.run import transcribe_inputs

    check_device_spec(device, "--device")
    with torch_threads(threads):
        tr = Transcriber.load(model, lm=lm, device=device, cmvn_stats=cmvn_stats, params=params,
                              max_segment_s=max_segment)
        transcribe_inputs(tr, list(audio), fmt, out, channel, click.echo, utt2spk, batch_size, batch_frames)


def _onnx(model, audio, fmt, out, lm, params, cmvn_stats, utt2spk, channel, max_segment, device, threads,
          batch_size, batch_frames) -> None:
    """--engine onnx: the export's own CMVN stats, onnxruntime on the CPU, torch never imported."""
    from asrtrain.errors import AsrError
    from asrtrain.transcribe.onnx_engine import OnnxTranscriber
    from asrtrain.transcribe.run import transcribe_inputs

    if cmvn_stats is not None or device != "cpu":
        raise AsrError("--cmvn-stats and --device are for the torch engine",
                       fix="drop them: an ONNX export holds its CMVN stats and runs on the CPU")
    tr = OnnxTranscriber.load(model, lm=lm, params=params, max_segment_s=max_segment, threads=threads)
    transcribe_inputs(tr, audio, fmt, out, channel, click.echo, utt2spk, batch_size, batch_frames)

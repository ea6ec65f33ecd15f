"""A convolutional front-end for the BLSTM (``model.frontend: conv``), in place of frame stacking.

Two 3x3 convolutions with ReLU over the (time, frequency) plane of the filterbank, the second striding
time by ``model.subsample`` and both striding frequency by 2: the VGG-like subsampling front-ends of
ESPnet's ``vggblstm`` encoders and its ``Conv2dSubsampling``, here without a linear layer after it (the
first LSTM layer is one). Where stacking hands the LSTM ``subsample`` frames side by side, the convolutions
learn local time-frequency patterns shared across the spectrum, such as the onsets and formant moves that
tell the E-set letters (B, D, E, P, T, V) apart.

Shapes: ``(N, T, D)`` features and lengths ``(N,)`` -> ``(N, ceil(T / subsample), C x F2)`` and lengths
``ceil(lengths / subsample)``, the same lengths as :func:`asrtrain.model.blstm.stack_frames`, with
``F1 = (D - 3) // 2 + 1`` and ``F2 = (F1 - 3) // 2 + 1`` (19 for 80 bins). Time is padded by one frame on
each side, frequency not at all.

An utterance's outputs do not depend on its batch mates: the frames past its length are zeroed before each
convolution, which is what the convolution's own zero padding gives an utterance alone (tested).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from asrtrain.errors import AsrError
from asrtrain.model.masks import valid_frames


def conv_out_bins(input_dim: int) -> int:
    """Frequency bins left after the two stride-2, kernel-3 convolutions (< 1 when ``input_dim`` < 7)."""
    return ((input_dim - 3) // 2 + 1 - 3) // 2 + 1


class ConvFrontend(nn.Module):
    def __init__(self, input_dim: int, channels: int, subsample: int):
        super().__init__()
        bins = conv_out_bins(input_dim)
        if bins < 1:
            raise AsrError(f"model.frontend conv needs at least 7 feature bins (the data has {input_dim})",
                           fix="use model.frontend=stack for features this narrow")
        self.subsample = subsample
        self.conv1 = nn.Conv2d(1, channels, 3, stride=(1, 2), padding=(1, 0))
        self.conv2 = nn.Conv2d(channels, channels, 3, stride=(subsample, 2), padding=(1, 0))
        self.out_dim = channels * bins
        for conv in (self.conv1, self.conv2):  # He init: unit-scale outputs for CMVN inputs (rms 1.02)
            nn.init.kaiming_normal_(conv.weight, nonlinearity="relu")
            nn.init.zeros_(conv.bias)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor):
        """``x`` (N, T, D), ``lengths`` (N,) -> (N, T', C x F2), lengths (N,); T' = ceil(T / subsample)."""
        n, t, _ = x.shape
        valid = valid_frames(lengths, t, x.device)  # (N, T)
        h = x.masked_fill(~valid.unsqueeze(-1), 0.0).unsqueeze(1)  # (N, 1, T, D)
        h = F.relu(self.conv1(h))  # (N, C, T, F1)
        h = h.masked_fill(~valid[:, None, :, None], 0.0)
        h = F.relu(self.conv2(h))  # (N, C, T', F2)
        h = h.permute(0, 2, 1, 3).reshape(n, h.shape[2], -1)
        out_lengths = torch.div(lengths + self.subsample - 1, self.subsample, rounding_mode="floor")
        return h.contiguous(), out_lengths

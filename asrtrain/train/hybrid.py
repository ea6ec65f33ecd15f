"""Hybrid (HMM-state) interop with Kaldi: frame targets from ali-to-pdf archives, and priors.

``--alignments`` takes what kaldiio reads: an ``.scp`` or ``.ark`` path of int32 vectors, one label per
10 ms frame (``ali-to-pdf final.mdl ark:"gunzip -c ali.*.gz|" ark,scp:pdf.ark,pdf.scp``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict

import numpy as np

from asrtrain.errors import AsrError


def read_alignments(spec: str) -> Dict[str, np.ndarray]:
    """{utt: int64 labels} from a Kaldi ark or scp of int vectors."""
    import kaldiio

    path = Path(str(spec).split(":", 1)[-1]) if str(spec).startswith(("ark:", "scp:")) else Path(spec)
    if not path.is_file():
        raise AsrError("alignment archive not found", path, fix="point --alignments at ali-to-pdf output")
    try:
        reader = kaldiio.load_scp(str(path)) if path.suffix == ".scp" else kaldiio.load_ark(str(path))
        out = {utt: np.asarray(v, dtype=np.int64).reshape(-1) for utt, v in dict(reader).items()}
    except Exception as err:
        raise AsrError(f"cannot read Kaldi alignments: {err}", path,
                       fix="write them with ali-to-pdf ... ark,scp:pdf.ark,pdf.scp") from None
    if not out:
        raise AsrError("no alignments in archive", path)
    for utt, v in out.items():
        if v.size and v.min() < 0:
            raise AsrError(f"negative label in alignment of '{utt}'", path)
    return out


def targets_in(alignments: Dict[str, np.ndarray]) -> int:
    """Number of output classes: the largest pdf id in the alignments plus one."""
    return int(max(int(v.max()) for v in alignments.values() if v.size)) + 1

"""Write small NIST SPHERE files for tests: 16-bit PCM or 8-bit µ-law, one or more channels.

A SPHERE file is a 1024-byte ASCII header (``NIST_1A``, the header size, ``name -type value`` fields,
``end_head``) followed by the raw samples, interleaved by channel. Switchboard and Hub5 audio is 8 kHz
two-channel µ-law, usually shorten-compressed; ``coding="shorten"`` writes such a header (over bytes
that are not real shorten data) so readers can be tested for the refusal path.

Copy freely: other fixture writers (e.g. a miniature LDC Switchboard layout) build on this.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Optional, Union

import numpy as np

_BIAS = 0x84
_CLIP = 32635


def ulaw_encode(samples: np.ndarray) -> np.ndarray:
    """G.711 µ-law encode int16 samples -> uint8 codes (bit-inverted, as in telephony and SPHERE)."""
    x = np.asarray(samples, dtype=np.int32)
    sign = np.where(x < 0, 0x80, 0x00)
    mag = np.minimum(np.abs(x), _CLIP) + _BIAS
    exponent = np.floor(np.log2(mag)).astype(np.int32) - 7  # mag >= 0x84 so exponent >= 0
    exponent = np.clip(exponent, 0, 7)
    mantissa = (mag >> (exponent + 3)) & 0x0F
    code = ~(sign | (exponent << 4) | mantissa) & 0xFF
    return code.astype(np.uint8)


def ulaw_decode(codes: np.ndarray) -> np.ndarray:
    """G.711 µ-law decode uint8 codes -> int16 samples (the exact inverse table of the encoder)."""
    u = ~np.asarray(codes, dtype=np.int32) & 0xFF
    sign = u & 0x80
    exponent = (u >> 4) & 0x07
    mantissa = u & 0x0F
    mag = (((mantissa << 3) + _BIAS) << exponent) - _BIAS
    return np.where(sign != 0, -mag, mag).astype(np.int16)


def sphere_header(fields: Dict[str, Union[int, str]], size: int = 1024) -> bytes:
    """Render a SPHERE header: ints as ``-i``, strings as ``-sN``; padded with spaces to ``size``."""
    lines = ["NIST_1A", f"{size:7d}"]
    for name, value in fields.items():
        if isinstance(value, int):
            lines.append(f"{name} -i {value}")
        else:
            lines.append(f"{name} -s{len(value)} {value}")
    lines.append("end_head")
    text = ("\n".join(lines) + "\n").encode("ascii")
    if len(text) > size:
        raise ValueError("SPHERE header fields do not fit in the header")
    return text + b" " * (size - len(text))


def write_sphere(path: Union[str, Path], samples: np.ndarray, rate: int = 8000, coding: str = "pcm",
                 byte_format: str = "01", extra: Optional[Dict[str, Union[int, str]]] = None) -> Path:
    """Write ``samples`` (int16, shape [n] or [n, channels]) as a SPHERE file.

    Args:
        coding: ``pcm`` (16-bit), ``ulaw`` (8-bit G.711) or ``shorten`` (a shorten-compressed µ-law header
            over the plain µ-law bytes; real readers must refuse it).
        byte_format: ``01`` little-endian or ``10`` big-endian (PCM only).
        extra: further header fields (e.g. ``{"conversation_id": "2001"}``).
    """
    data = np.asarray(samples)
    if data.ndim == 1:
        data = data[:, None]
    n, channels = data.shape
    fields: Dict[str, Union[int, str]] = {
        "sample_count": int(n), "channel_count": int(channels), "sample_rate": int(rate)}
    if coding == "pcm":
        fields.update({"sample_n_bytes": 2, "sample_byte_format": byte_format, "sample_coding": "pcm"})
        dtype = "<i2" if byte_format == "01" else ">i2"
        body = data.astype(dtype).tobytes()  # C order = interleaved channels
    elif coding in ("ulaw", "shorten"):
        fields.update({"sample_n_bytes": 1, "sample_byte_format": "1",
                       "sample_coding": "ulaw" if coding == "ulaw" else "ulaw,embedded-shorten-v2.00"})
        body = ulaw_encode(data).tobytes()
    else:
        raise ValueError(f"unknown coding {coding!r}")
    fields.update(extra or {})
    path = Path(path)
    path.write_bytes(sphere_header(fields) + body)
    return path


def tone(seconds: float, rate: int, freq: float = 440.0, amplitude: int = 8000, seed: int = 0) -> np.ndarray:
    """A deterministic int16 test signal [n]: a sine plus a little noise (so fbank bins are not -inf)."""
    n = int(round(seconds * rate))
    t = np.arange(n) / rate
    rng = np.random.default_rng(seed)
    x = amplitude * np.sin(2 * np.pi * freq * t) + rng.normal(0, 200, n)
    return np.clip(np.round(x), -32768, 32767).astype(np.int16)


def make_data_dir(root: Union[str, Path], n_utts: int = 4, rate: int = 16000, seconds: float = 0.6,
                  speakers: int = 2, audio_format: str = "wav") -> Path:
    """A tiny valid Kaldi data dir ``root/data`` with ``n_utts`` audio files under ``root/audio``.

    Utterance ids are ``spk<s>-utt<i>`` (speaker-prefixed, as Kaldi likes); ``audio_format`` is ``wav``,
    ``flac`` or ``sph`` (16-bit PCM SPHERE).
    """
    import soundfile as sf
    root = Path(root)
    (root / "audio").mkdir(parents=True, exist_ok=True)
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    words = ["one", "two", "three", "four", "five", "six"]
    rows = []
    for i in range(n_utts):
        spk = f"spk{i % speakers}"
        utt = f"{spk}-utt{i}"
        path = root / "audio" / f"{utt}.{audio_format}"
        x = tone(seconds + 0.1 * i, rate, freq=300 + 100 * i, seed=i)
        if audio_format == "sph":
            write_sphere(path, x, rate=rate)
        else:
            sf.write(str(path), x, rate, subtype="PCM_16")
        rows.append((utt, spk, str(path), " ".join(words[(i + k) % len(words)] for k in range(3))))
    rows.sort()
    (data / "wav.scp").write_text("".join(f"{u} {p}\n" for u, _, p, _ in rows))
    (data / "text").write_text("".join(f"{u} {t}\n" for u, _, _, t in rows))
    (data / "utt2spk").write_text("".join(f"{u} {s}\n" for u, s, _, _ in rows))
    spk2utt: Dict[str, list] = {}
    for u, s, _, _ in rows:
        spk2utt.setdefault(s, []).append(u)
    (data / "spk2utt").write_text("".join(f"{s} {' '.join(us)}\n" for s, us in sorted(spk2utt.items())))
    return data

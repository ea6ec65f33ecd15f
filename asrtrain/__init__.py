"""asrtrain: Kaldi-style speech recognition training in Python.

The library comes first; :mod:`asrtrain.cli` is a thin click layer over it.
"""

__version__ = "0.1.0"


def __getattr__(name):
    """``asrtrain.Transcriber`` loads lazily, so ``import asrtrain`` stays cheap (no torch)."""
    if name == "Transcriber":
        from asrtrain.transcribe.model import Transcriber
        return Transcriber
    raise AttributeError(f"module 'asrtrain' has no attribute {name!r}")

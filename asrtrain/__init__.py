"""asrtrain: Kaldi-style speech recognition training in Python.

The library comes first; :mod:`asrtrain.cli` is a thin click layer over it.
"""

__version__ = "0.1.0"

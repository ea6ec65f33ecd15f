"""The embedded synthetic corpus: espeak-ng speech from a fixed grammar (see :mod:`.prepare`)."""

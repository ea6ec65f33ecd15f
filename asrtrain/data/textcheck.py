"""What Kaldi's ``validate_data_dir.sh`` and ``validate_text.pl`` refuse in a ``text`` line.

- Whitespace other than space and tab (validate_text.pl: CR, and any other Unicode whitespace such as
  the no-break space U+00A0). Python's ``str.split()`` would silently split on them, so a transcript
  ``hello\\u00a0world`` would become two words here and one word in Kaldi. We also refuse the invisible
  zero-width space/joiner and byte-order mark, which are not whitespace but look like it.
- The symbols ``<s>``, ``</s>`` (the LM's sentence boundaries) and ``#0`` (validate_data_dir.sh); we refuse
  every ``#<digits>`` token, the disambiguation symbols of a Kaldi lang dir.
- Non-UTF-8 bytes are refused when the file is read (:func:`asrtrain.data.table.iter_lines`).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Optional

RESERVED = ("<s>", "</s>")
DISAMBIG = re.compile(r"#\d+")
INVISIBLE = {"\u200b": "zero-width space", "\u200c": "zero-width non-joiner", "\u200d": "zero-width joiner",
             "\u2060": "word joiner", "\ufeff": "byte-order mark"}


def text_line_problem(line: str) -> Optional[str]:
    """The reason a ``text`` line (``<utt-id> <words...>``, newline stripped) is refused, or None."""
    for i, ch in enumerate(line):
        if (ch.isspace() and ch not in " \t") or ch in INVISIBLE:
            name = INVISIBLE.get(ch) or unicodedata.name(ch, "") or "control character"
            return (f"character {i + 1} is U+{ord(ch):04X} ({name.lower()}), not a space or tab "
                    f"(Kaldi's validate_text.pl refuses it)")
    for word in line.split()[1:]:
        if word in RESERVED or DISAMBIG.fullmatch(word):
            return (f"the transcript holds '{word}', reserved for the LM's sentence boundaries and "
                    f"disambiguation symbols (validate_data_dir.sh refuses <s>, </s> and #0)")
    return None

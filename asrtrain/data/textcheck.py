"""What Kaldi's ``validate_data_dir.sh`` and ``validate_text.pl`` refuse in a ``text`` line.

- Whitespace other than space and tab (validate_text.pl: CR, and any other Unicode whitespace such as
  the no-break space U+00A0). Python's ``str.split()`` would silently split on them, so a transcript
  ``hello\\u00a0world`` would become two words here and one word in Kaldi. We also refuse the invisible
  zero-width space/joiner and byte-order mark, which are not whitespace but look like it.
- The symbols ``<s>``, ``</s>`` (the LM's sentence boundaries) and ``#0`` (validate_data_dir.sh); we refuse
  every ``#<digits>`` token, the disambiguation symbols of a Kaldi lang dir.
- Non-UTF-8 bytes are refused when the file is read (:func:`asrtrain.data.table.iter_lines`).
- A repeated utterance id (:func:`repeated_id`): the readers of ``tokenizer train --text`` and
  ``lm train --text`` take the first word of a line as its id, so a file of plain sentences would lose
  every sentence's first word; their ids repeat (``the``, ``what``), which is how such a file is told apart.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Dict, Optional

RESERVED = ("<s>", "</s>", "<eps>")  # <eps>: id 0 of Kaldi's words.txt, the empty symbol
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
            return (f"the transcript holds '{word}', reserved for the LM's sentence boundaries, epsilon and "
                    f"disambiguation symbols (validate_data_dir.sh refuses <s>, </s> and #0; <eps> is id 0 "
                    f"of Kaldi's words.txt)")
    return None


#: The fix for a text file that is not ``<utt-id> <words...>``.
PLAIN_TEXT_FIX = ("the file must be Kaldi text, '<utt-id> <words...>'; give plain sentences ids first, e.g. "
                  "awk '{printf \"utt%08d %s\\n\", NR, $0}' plain.txt > text")


def repeated_id(seen: Dict[str, int], key: str, no: int) -> Optional[str]:
    """Why line ``no``, whose id is ``key``, is refused when an earlier line had that id (``seen`` maps
    id -> first line and is updated), or None."""
    first = seen.setdefault(key, no)
    if first == no:
        return None
    return (f"duplicate utterance id '{key}' (first on line {first}): the first word of each line is read "
            "as its id, not as a word")

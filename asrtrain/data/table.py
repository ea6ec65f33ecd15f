"""Kaldi table files: one record per line, first field the key, sorted as ``LC_ALL=C sort`` sorts.

``LC_ALL=C`` sorts by bytes; for UTF-8 text that is the same order as Python's code-point order, so
``sorted(keys)`` is the Kaldi order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Mapping, Tuple, Union

from asrtrain.errors import AsrError
from asrtrain.atomic import atomic_open
from asrtrain.limits import check_line_length, check_regular_file


#: The UTF-8 byte-order mark some editors write at the start of a file. Kaldi's tools would read it as part
#: of the first key; ``strip_bom`` readers drop it, and ``asrtrain data validate`` names it.
BOM = b"\xef\xbb\xbf"


def iter_lines(path: Union[str, Path], strip_bom: bool = False) -> Iterator[Tuple[int, str]]:
    """Yield ``(line_no, line)`` of a UTF-8 text file, stripped of the newline; blank lines skipped.

    ``strip_bom``: drop a byte-order mark at the start of the file (the data-dir readers do; validate
    names it). Raises AsrError naming the line on invalid UTF-8.
    """
    path = Path(path)
    check_regular_file(path, "table")
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise AsrError("file not found", path) from None
    if strip_bom and raw.startswith(BOM):
        raw = raw[len(BOM):]
    for no, line in enumerate(raw.split(b"\n"), 1):
        check_line_length(line, path, no)
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as err:
            raise AsrError(f"not valid UTF-8 (byte {err.start + 1} of the line)", path, no,
                           fix="re-encode the file as UTF-8, e.g. iconv -f latin1 -t utf-8") from None
        text = text.rstrip("\r")
        if text.strip():
            yield no, text


def read_table(path: Union[str, Path], min_fields: int = 2, allow_dups: bool = False
               ) -> Dict[str, str]:
    """Read ``<key> <rest>`` lines into an insertion-ordered dict. Duplicate keys are errors."""
    out: Dict[str, str] = {}
    for no, line in iter_lines(path):
        parts = line.split(maxsplit=1)
        if len(parts) < min_fields and min_fields > 1:
            raise AsrError(f"expected a key and a value, got {line!r}", path, no,
                           fix="remove the line or give it a value")
        key = parts[0]
        if key in out and not allow_dups:
            raise AsrError(f"duplicate id '{key}'", path, no,
                           fix=f"keep one line per id (for a data dir, asrtrain data fix {Path(path).parent} "
                               "keeps the first)")
        out[key] = parts[1].strip() if len(parts) > 1 else ""
    return out


def read_table_lines(path: Union[str, Path], strip_bom: bool = False) -> List[Tuple[int, str, str]]:
    """Read ``(line_no, key, rest)`` keeping duplicates and order (for validation); ``strip_bom`` as
    :func:`iter_lines`."""
    rows = []
    for no, line in iter_lines(path, strip_bom):
        parts = line.split(maxsplit=1)
        rows.append((no, parts[0], parts[1].strip() if len(parts) > 1 else ""))
    return rows


def write_table(path: Union[str, Path], table: Union[Mapping[str, str], Iterable[Tuple[str, str]]],
                sort: bool = True) -> None:
    """Write ``<key> <value>`` lines atomically, sorted by key unless ``sort=False``."""
    items = list(table.items()) if isinstance(table, Mapping) else list(table)
    if sort:
        items.sort(key=lambda kv: kv[0])
    with atomic_open(Path(path)) as fh:
        for key, value in items:
            fh.write(f"{key} {value}\n" if value != "" else f"{key}\n")


def spk2utt_from_utt2spk(utt2spk: Mapping[str, str]) -> Dict[str, str]:
    spk: Dict[str, List[str]] = {}
    for utt in sorted(utt2spk):
        spk.setdefault(utt2spk[utt], []).append(utt)
    return {s: " ".join(u) for s, u in sorted(spk.items())}

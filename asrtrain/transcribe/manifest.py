"""``MANIFEST.sha256`` of a pack (``asrtrain pack``) or an export (``asrtrain export``): every file's sha256,
in ``sha256sum`` format, written by :func:`write_manifest` and checked by :func:`verify`, the one reader the
torch engine, the onnx engine, ``pack`` and ``export`` share. Imports no torch.

What the reader takes (what ``sha256sum -c --strict`` takes, and lines of blanks, which it calls
improperly formatted):

- ``<64 hex digits>  <name>`` (or ``<hex> *<name>``, sha256sum's binary marker), one file a line, the
  name a file of the directory itself (no ``/``, no ``..``), each name once;
- empty lines and lines of blanks: skipped (sha256sum skips empty lines).

Anything else (a line of one word, a bad hash, bytes that are not UTF-8) is refused in one line naming
``MANIFEST.sha256:LINE``. A file asrtrain reads (:data:`CHECKED`) that is in the directory but not in the
manifest is refused too (an ``lm.arpa`` or ``final.pt`` dropped into a pack would be loaded unchecked).

A directory that is a pack or an export (:func:`kind`: it holds a file only they hold) but has no manifest
is refused: deleting the manifest must not switch the check off. An exp dir (training output:
``final.pt``, ``checkpoints/``) has none and is not checked.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Dict, Optional

from asrtrain.errors import AsrError

MANIFEST = "MANIFEST.sha256"
#: Files only a pack holds (training writes neither), and files only an export holds.
PACK_MARKS = ("model.safetensors", "MODEL.md")
EXPORT_MARKS = ("meta.json", "model.onnx", "model.ts")
#: Every file a loader of a pack or an export reads: present, it must be in the manifest.
CHECKED = ("config.yaml", "tokenizer.model", "model.safetensors", "final.pt", "cmvn_global.ark", "lm.arpa",
           "params.yaml", "data.json", "model.onnx", "model.ts", "fbank.json", "cmvn.json", "tokens.txt",
           "meta.json")
_LINE = re.compile(r"([0-9a-fA-F]{64}) [ *](.+)")


def kind(model_dir: Path) -> Optional[str]:
    """``"export"``, ``"pack"``, or None (an exp dir, or anything else) by the files ``model_dir`` holds."""
    model_dir = Path(model_dir)
    if any((model_dir / n).is_file() for n in EXPORT_MARKS):
        return "export"
    if any((model_dir / n).is_file() for n in PACK_MARKS):
        return "pack"
    return None


def _fix(what: Optional[str]) -> str:
    if what == "export":
        return "re-copy the export, or export the model again (asrtrain export MODEL OUT)"
    return "re-copy the pack, or pack the model again (asrtrain pack EXP OUT)"


def sha256_of(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def write_manifest(model_dir: Path) -> None:
    """``MANIFEST.sha256``: the sha256 of every file in ``model_dir`` (what :func:`verify` checks)."""
    files = sorted(p for p in Path(model_dir).iterdir() if p.is_file() and p.name != MANIFEST)
    (Path(model_dir) / MANIFEST).write_text("".join(f"{sha256_of(p)}  {p.name}\n" for p in files))


def read_manifest(model_dir: Path) -> Dict[str, tuple]:
    """``{file name: (sha256, line number)}`` of ``model_dir``'s manifest; one-line errors for a line
    that is not ``<sha256>  <name>``."""
    manifest = Path(model_dir) / MANIFEST
    fix = _fix(kind(model_dir))
    try:
        text = manifest.read_bytes().decode("utf-8")
    except OSError as err:
        raise AsrError(f"cannot read: {err.strerror}", manifest, fix=fix) from None
    except UnicodeDecodeError as err:
        line = manifest.read_bytes()[: err.start].count(b"\n") + 1
        raise AsrError("bytes that are not UTF-8: not a manifest line", manifest, line, fix=fix) from None
    out: Dict[str, tuple] = {}
    for no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue  # sha256sum skips empty lines too
        m = _LINE.fullmatch(line.rstrip())
        if m is None:
            shown = line if len(line) <= 40 else line[:40] + "..."
            raise AsrError(f"not a manifest line ('<sha256>  <file name>'): {shown!r}", manifest, no, fix=fix)
        want, name = m.group(1).lower(), m.group(2)
        if "/" in name or "\\" in name or name in (".", "..", MANIFEST):
            raise AsrError(f"'{name}' is not a file of this directory", manifest, no, fix=fix)
        if name in out:
            raise AsrError(f"'{name}' is listed twice (also line {out[name][1]})", manifest, no, fix=fix)
        out[name] = (want, no)
    return out


def verify(model_dir: Path) -> None:
    """Check a pack's or an export's files against its manifest; an exp dir (no manifest, and no file
    only a pack or an export holds) is not checked. Every refusal is one line with the fix."""
    model_dir = Path(model_dir)
    manifest = model_dir / MANIFEST
    what = kind(model_dir)
    if not manifest.is_file():
        if what is None:
            return
        raise AsrError(f"no {MANIFEST}: this is {'an export' if what == 'export' else 'a pack'}, and without "
                       "its manifest a changed file would go unnoticed", model_dir, fix=_fix(what))
    listed = read_manifest(model_dir)
    since = "it was exported" if what == "export" else "packing"
    for name, (want, no) in listed.items():
        path = model_dir / name
        if not path.is_file() or sha256_of(path) != want:
            raise AsrError(f"{name} is missing or changed since {since}", manifest, no, fix=_fix(what))
    extra = [n for n in CHECKED if n not in listed and (model_dir / n).is_file()]
    if extra:
        raise AsrError(f"{extra[0]} is not in the manifest: it was added after {since}", model_dir / extra[0],
                       fix=f"remove it, or {_fix(what)}")

"""YAML as our configs need it: PyYAML's safe loader, refusing a key given twice in one mapping, and
refusing anchors and aliases.

PyYAML keeps the last of two equal keys silently; a config with ``lr: 0.1`` twice is a mistake we name.
A config has no use for anchors (``&a``) and aliases (``*a``), and a few lines of nested aliases (a
"billion laughs" file) expand to more objects than memory holds: both are refused where they are composed,
before anything is built, naming the line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Tuple

import yaml

from asrtrain.errors import AsrError


class _StrictLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses a key given twice in one mapping (PyYAML keeps the last silently) and
    any anchor or alias."""

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise yaml.composer.ComposerError(
                None, None, f"YAML anchors and aliases are not accepted in a config ("
                f"{'*' if isinstance(event, yaml.AliasEvent) else '&'}{event.anchor})", event.start_mark)
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        seen = {}
        if isinstance(node, yaml.MappingNode):
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    hash(key)
                except TypeError:
                    continue  # reported by PyYAML itself
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key '{key}' (first on line {seen[key] + 1})",
                        key_node.start_mark)
                seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep)


def strict_yaml_load(text: str) -> Any:
    """``yaml.safe_load`` that refuses duplicate keys."""
    return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 (a SafeLoader subclass)


def read_yaml_mapping(path: Path) -> Dict[str, Any]:
    """A YAML file's top-level mapping; every failure (missing, not UTF-8, invalid, duplicate keys, not a
    mapping) is an AsrError naming the file and line."""
    loaded, lines = read_yaml(path)
    if not isinstance(loaded, dict) or not loaded:
        raise AsrError("not a YAML mapping of config sections" + ("" if loaded else " (empty)"), path, 1,
                       fix="restore the file, or start a new --exp-dir")
    for name, body in loaded.items():
        if not isinstance(body, dict):
            raise AsrError(f"section '{name}' is not a mapping", path, lines.get(str(name)),
                           fix="restore the file, or start a new --exp-dir")
    return loaded


def key_lines(text: str) -> Dict[str, int]:
    """Map dotted keys of a YAML document to 1-based line numbers (for error messages)."""
    out: Dict[str, int] = {}

    def walk(node, prefix):
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                name = f"{prefix}.{k.value}" if prefix else str(k.value)
                out[name] = k.start_mark.line + 1
                walk(v, name)

    try:
        walk(yaml.compose(text, Loader=_StrictLoader), "")  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError:
        pass
    return out


def parse_override(text: str) -> Tuple[str, Any]:
    """``"train.lr=0.2"`` -> ``("train.lr", 0.2)``; the value is parsed as YAML."""
    if "=" not in text:
        raise AsrError(f"override {text!r} is not of the form section.key=value",
                       fix="write e.g. --set train.lr=0.2")
    key, value = text.split("=", 1)
    try:
        parsed = strict_yaml_load(value) if value != "" else ""
    except (yaml.YAMLError, ValueError, OverflowError, RecursionError):
        parsed = value
    return key.strip(), parsed


def read_yaml(path: Path) -> Tuple[Dict[str, Any], Dict[str, int]]:
    spath = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise AsrError("config file not found", spath, fix="check the config path") from None
    except UnicodeDecodeError:
        raise AsrError("config file is not UTF-8", spath, fix="re-encode it as UTF-8") from None
    except OSError as err:
        raise AsrError(f"cannot read config file: {err.strerror}", spath,
                       fix="check the config path") from None
    try:
        loaded = strict_yaml_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        raise AsrError(f"invalid YAML: {getattr(err, 'problem', None) or err}", spath,
                       None if mark is None else mark.line + 1, fix="correct the YAML") from None
    except (ValueError, OverflowError, RecursionError) as err:  # e.g. a timestamp PyYAML cannot build
        raise AsrError(f"invalid YAML value: {err}", spath, fix="correct the YAML") from None
    if loaded is None:
        loaded = {}
    return loaded, key_lines(text)

"""Reading and writing a :class:`~asrtrain.config.Config`: YAML files, dotted ``--set section.key=value``
overrides, and the resolved config saved next to the results.

Unknown keys and wrong types are errors that name the YAML file and line; each file is checked on its own
before the next is merged in. The sections themselves (their fields, defaults and range checks) live in
:mod:`asrtrain.config`, which does not import this module.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Tuple

import yaml

from asrtrain.config import Config
from asrtrain.errors import AsrError
from asrtrain.config.yamlio import parse_override, read_yaml


#: str keys whose value may be a number of steps or a word (``dist.period``: 4 or adaptive).
NUMBER_OR_WORD = ("dist.period",)


def coerce_value(value: Any, typ: Any, where: str, path: Optional[str], line: Optional[int]) -> Any:
    """Check ``value`` against a field type (bool, int, float, str), converting int -> float."""
    if typ is bool:
        if isinstance(value, bool):
            return value
    elif typ is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif typ is float:
        number = None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number = float(value)
        elif isinstance(value, str):  # YAML 1.1 reads "2e-3" (no dot) as a string
            try:
                number = float(value)
            except ValueError:
                pass
        if number is not None and not math.isnan(number):
            return number
    elif typ is str:
        if isinstance(value, str):
            return value
        if where in NUMBER_OR_WORD and isinstance(value, int) and not isinstance(value, bool):
            return str(value)  # YAML's `period: 4`, as the command line's --period 4
    else:
        return value
    name = typ.__name__
    raise AsrError(f"{where} must be {name}, got {value!r}", path, line,
                   fix=f"give {where} {'an' if name[0] in 'aeiou' else 'a'} {name} value")


def _build(cls, data: Any, prefix: str, path: Optional[str], lines: Dict[str, int]):
    if not isinstance(data, dict):
        raise AsrError(f"section '{prefix or 'top level'}' must be a mapping", path, lines.get(prefix))
    hints = typing.get_type_hints(cls)
    known = {f.name for f in fields(cls)}
    kwargs = {}
    for key, value in data.items():
        where = f"{prefix}.{key}" if prefix else str(key)
        if key not in known:
            raise AsrError(f"unknown config key '{where}'", path, lines.get(where),
                           fix=f"valid keys here are: {', '.join(sorted(known))}")
        typ = hints[key]
        if is_dataclass(typ):
            kwargs[key] = _build(typ, value if value is not None else {}, where, path, lines)
        else:
            kwargs[key] = coerce_value(value, typ, where, path, lines.get(where))
    return cls(**kwargs)


def field_type(cls, dotted: str):
    """The declared type of ``section.key`` in ``cls`` (None when there is no such field)."""
    for part in dotted.split("."):
        if not is_dataclass(cls):
            return None
        hints = typing.get_type_hints(cls)
        if part not in hints:
            return None
        cls = hints[part]
    return cls


def override_item(item: str) -> Tuple[str, Any]:
    """A ``--set section.key=value`` as :func:`load_config` applies it: the value parsed as YAML, except
    for a str field, whose text is kept."""
    key, value = parse_override(item)
    if field_type(Config, key) is str:  # keep "1:4" a string (YAML 1.1 would read 64)
        value = item.split("=", 1)[1]
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]  # --set "dist.slowdown='1:4'" is the same as dist.slowdown=1:4
    return key, value


def load_config(path: Optional[Path] = None, overrides: Iterable[str] = (),
                base: Optional[Dict[str, Any]] = None, extra: Iterable[Path] = ()) -> Config:
    """Load a Config from YAML files (``path``, then each of ``extra`` on top), then apply ``overrides``
    like ``train.lr=0.2``. Each file is checked on its own first, so errors name the right file/line."""
    data: Dict[str, Any] = {}
    lines: Dict[str, int] = {}
    spath = None
    if base:
        data = _deep_merge(data, base)
    for p in [q for q in [path, *extra] if q is not None]:
        loaded, lines = read_yaml(p)
        spath = str(p)
        try:  # key, type and value errors point into this file
            _build(Config, loaded, "", spath, lines).validate()
        except AsrError as err:
            if err.path is None:
                key = getattr(err, "key", None)
                raise AsrError(err.message, spath, lines.get(key), err.fix) from None
            raise
        data = _deep_merge(data, loaded)
    for item in overrides:
        key, value = override_item(item)
        node = data
        parts = key.split(".")
        for part in parts[:-1]:
            if node.get(part) is None:
                node[part] = {}
            node = node[part]
            if not isinstance(node, dict):
                raise AsrError(f"override {item!r}: '{part}' is not a section")
        node[parts[-1]] = value
    # The files were checked above, so what fails now comes from an override (--set).
    return _build(Config, data, "", None, {}).validate()


def _deep_merge(a: Dict[str, Any], b: Dict[str, Any]) -> Dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def to_dict(cfg: Any) -> Dict[str, Any]:
    return dataclasses.asdict(cfg)


def save_config(cfg: Config, path: Path) -> None:
    """Write the resolved config, every default included, atomically."""
    from asrtrain.atomic import atomic_write_text
    atomic_write_text(Path(path), yaml.safe_dump(to_dict(cfg), sort_keys=False))


def section_from_dict(cls, data: Dict[str, Any], path: Optional[str] = None):
    """Build one section (e.g. FeatureConfig) from a plain dict, with the same checks."""
    obj = _build(cls, data, "", path, {})
    if hasattr(obj, "validate"):
        obj.validate()
    return obj


def load_section(cls, path: Optional[Path], overrides: Iterable[str] = (), section: str = ""):
    """Load one section from a YAML file holding just that section's keys, then ``overrides``
    (``key=value``; with ``section``, ``section.key=value`` too, the spelling ``train --set`` uses)."""
    data: Dict[str, Any] = {}
    lines: Dict[str, int] = {}
    spath = None
    if path is not None:
        spath = str(path)
        data, lines = read_yaml(path)
        if not isinstance(data, dict):
            raise AsrError("expected a mapping of option: value", spath, 1,
                           fix=f"write one '{fields(cls)[0].name}: ...' line per option")
    set_keys = set()
    for item in overrides:
        key, value = _section_override(cls, item, section)
        data[key] = value
        set_keys.add(key)
    obj = _build(cls, data, "", spath, lines)
    if hasattr(obj, "validate"):
        try:
            obj.validate()
        except AsrError as err:  # a range error names the file and line the value came from
            short = str(getattr(err, "key", "")).split(".", 1)[-1]
            if err.path is None and spath is not None and short in data and short not in set_keys:
                raise AsrError(err.message, spath, lines.get(short), err.fix) from None
            raise
    return obj


#: FeatureConfig keys that say how input audio was admitted, not what the features are: an exp dir from
#: before resampling became opt-in (``resample: true``) decodes features computed since.
NOT_FEATURE_DEFINING = frozenset({"resample"})


def feature_differences(got: Any, want: Any) -> List[str]:
    """``"key: got vs want"`` for each feature-defining key where two FeatureConfigs differ (empty when
    the features are the same kind of features); what ``train --dev-data`` and ``decode`` check."""
    a, b = to_dict(got), to_dict(want)
    return [f"{k}: {a.get(k)} vs {b[k]}" for k in b if k not in NOT_FEATURE_DEFINING and a.get(k) != b[k]]


def _section_override(cls, item: str, section: str) -> Tuple[str, Any]:
    """One ``--set`` of :func:`load_section`: ``key=value`` or ``section.key=value``, as (key, value)."""
    numeric = [f for f in fields(cls) if type(f.default) in (int, float)] or list(fields(cls))
    prefix = section + "." if section else ""
    example = f"--set {prefix}{numeric[0].name}={numeric[0].default}"
    if "=" not in item:
        raise AsrError(f"override {item!r} is not of the form {prefix}key=value", fix=f"write e.g. {example}")
    key, value = parse_override(item)
    if section and key.startswith(prefix):
        key = key[len(prefix):]
    elif "." in key:
        raise AsrError(f"override {item!r}: only the {section or 'section'} keys can be set here",
                       fix=f"write e.g. {example}")
    return key, value


__all__ = ["NOT_FEATURE_DEFINING", "coerce_value", "feature_differences", "field_type", "load_config",
           "load_section", "override_item", "save_config", "section_from_dict", "to_dict"]

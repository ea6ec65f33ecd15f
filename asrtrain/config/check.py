"""Settings a command would ignore are errors, not silent no-ops.

``asrtrain train --set features.num_mel_bins=40`` used to train on whatever the feature dir held: the
features section of a training run is what the features were computed with (its ``features.yaml``). Now
every ``features.*`` key given to ``train`` (in a YAML file or with ``--set``) must equal the feature dir's
value, ``model.input_dim``/``model.num_targets`` must equal what the data gives, and ``--set tokenizer.*``
(the tokenizer is ``--tokenizer FILE``, trained by ``asrtrain tokenizer train``) is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterable, Optional, Tuple

from asrtrain.config import Config
from asrtrain.config.file import coerce_value, field_type
from asrtrain.config.yamlio import parse_override, read_yaml
from asrtrain.errors import AsrError


def given_settings(path: Optional[Path], overrides: Iterable[str], extra: Iterable[Path] = ()
                   ) -> Dict[str, Tuple[Any, Optional[str], Optional[int], bool]]:
    """``section.key`` -> (value, file, line, from --set) for every key the user gave (the last wins)."""
    out: Dict[str, Tuple[Any, Optional[str], Optional[int], bool]] = {}
    for p in [q for q in [path, *extra] if q is not None]:
        loaded, lines = read_yaml(p)
        for section, body in (loaded.items() if isinstance(loaded, dict) else ()):
            for key, value in (body.items() if isinstance(body, dict) else ()):
                name = f"{section}.{key}"
                out[name] = (value, str(p), lines.get(name), False)
    for item in overrides:
        key, value = parse_override(item)
        if field_type(Config, key) is str:
            value = item.split("=", 1)[1].strip("'\"")
        out[key] = (value, None, None, True)
    return out


def check_train_settings(path: Optional[Path], overrides: Iterable[str], extra: Iterable[Path],
                         cfg: Config, train_dir: Path) -> None:
    """Refuse keys ``train`` would ignore (see the module doc); ``cfg`` is the resolved config."""
    for name, (value, file, line, from_set) in given_settings(path, overrides, extra).items():
        section, _, key = name.partition(".")
        typ = field_type(Config, name)
        if typ is None:
            continue  # unknown keys were refused by load_config
        value = coerce_value(value, typ, name, file, line)
        where = f"--set {name}={value}" if from_set else f"{name}: {value}"
        if section == "features" and getattr(cfg.features, key) != value:
            raise AsrError(f"{where} is ignored: training uses the features of {train_dir}, computed with "
                           f"{name} = {getattr(cfg.features, key)!r} (its features.yaml)", file, line,
                           fix=f"recompute the features with --set {key}={value}, or drop {name}")
        if name in ("model.input_dim", "model.num_targets") and value and getattr(cfg.model, key) != value:
            raise AsrError(f"{where} is ignored: the data gives {name} = {getattr(cfg.model, key)}",
                           file, line,
                           fix=f"drop {name} (it is derived from the features and the tokenizer)")
        if section == "tokenizer" and from_set:
            raise AsrError(f"{where} is not used by train: the tokenizer is the --tokenizer model",
                           fix="train a tokenizer with asrtrain tokenizer train --vocab-size/--model-type, "
                               "then pass it with --tokenizer")

"""Settings a command would ignore are errors, not silent no-ops.

``asrtrain train --set features.num_mel_bins=40`` used to train on whatever the feature dir held: the
features section of a training run is what the features were computed with (its ``features.yaml``). Now
every ``features.*`` key given to ``train`` (in a YAML file or with ``--set``) must equal the feature dir's
value, ``model.input_dim``/``model.num_targets`` must equal what the data gives, and ``--set tokenizer.*``
(the tokenizer is ``--tokenizer FILE``, trained by ``asrtrain tokenizer train``) is refused.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Dict, Iterable, Optional, Tuple

from asrtrain.config import Config
from asrtrain.config.file import coerce_value, field_type
from asrtrain.config.yamlio import parse_override, read_yaml
from asrtrain.errors import AsrError

log = logging.getLogger(__name__)

#: Keys only some strategies read: key -> the strategies that use it.
STRATEGY_KEYS = {"dist.period": ("periodic",), "dist.period_max": ("periodic",),
                 "dist.period_tolerance": ("periodic",), "dist.averaging": ("adpsgd", "h-adpsgd"),
                 "dist.delay_by_one": ("adpsgd", "h-adpsgd")}


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
        _check_applies(name, value, where, from_set, file, line, cfg)
        if section == "tokenizer" and from_set:
            raise AsrError(f"{where} is not used by train: the tokenizer is the --tokenizer model",
                           fix="train a tokenizer with asrtrain tokenizer train --vocab-size/--model-type, "
                               "then pass it with --tokenizer")


def _check_applies(name: str, value: Any, where: str, from_set: bool, file: Optional[str], line: Optional[int],
                   cfg: Config) -> None:
    """A key the chosen strategy (or a run without --dp) never reads: an error when given on the command
    line, a warning when it comes from a config file (a shared config may carry keys for other runs)."""
    section, _, key = name.partition(".")
    if getattr(getattr(Config(), section), key, None) == value:
        return  # the default given explicitly (e.g. --no-delay-by-one) changes nothing
    users = STRATEGY_KEYS.get(name)
    if users is not None and cfg.dist.strategy not in users:
        message = (f"{where} is ignored: --strategy {cfg.dist.strategy} does not use it (only "
                   f"{' and '.join(users)} do{'es' if len(users) == 1 else ''})")
        fix = f"drop {name}, or pass --strategy {users[0]}"
    elif name.startswith("dp.") and name != "dp.enabled" and not cfg.dp.enabled:
        message, fix = f"{where} is ignored: differential privacy is off", f"pass --dp as well, or drop {name}"
    else:
        return
    if from_set:
        raise AsrError(message, fix=fix)
    log.warning("%s:%s: %s", file, line, message.replace("is ignored", "is ignored (it is in a config file)"))

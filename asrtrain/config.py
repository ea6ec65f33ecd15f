"""Typed, frozen configuration loaded from YAML with dotted ``--set section.key=value`` overrides.

Every section is a frozen dataclass. Unknown keys and wrong types are errors that name the YAML file
and line. The resolved config (every default written out) is saved next to the results with
:func:`save_config`, and later stages read it back with :func:`load_config`.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any, Dict, Iterable, Optional, Tuple

import yaml

from asrtrain.errors import AsrError


@dataclass(frozen=True)
class FeatureConfig:
    """Kaldi fbank options (Kaldi's own names) plus the CMVN kind."""
    kind: str = "fbank"
    sample_rate: int = 16000
    num_mel_bins: int = 80
    frame_length: float = 25.0  # ms
    frame_shift: float = 10.0  # ms
    dither: float = 0.0
    preemphasis_coefficient: float = 0.97
    remove_dc_offset: bool = True
    window_type: str = "povey"
    round_to_power_of_two: bool = True
    low_freq: float = 20.0
    high_freq: float = 0.0
    use_energy: bool = False
    use_log_fbank: bool = True
    snip_edges: bool = True
    cmvn: str = "global"  # global | speaker | none
    cmvn_norm_vars: bool = True
    resample: bool = True  # resample audio whose rate differs; False makes a mismatch an error

    def validate(self) -> None:
        _choice("features.kind", self.kind, ("fbank",))
        _choice("features.cmvn", self.cmvn, ("global", "speaker", "none"))
        _choice("features.window_type", self.window_type,
                ("povey", "hamming", "hanning", "rectangular", "blackman"))


@dataclass(frozen=True)
class TokenizerConfig:
    model_type: str = "unigram"  # bpe | unigram | char | word
    vocab_size: int = 300
    character_coverage: float = 1.0

    def validate(self) -> None:
        _choice("tokenizer.model_type", self.model_type, ("bpe", "unigram", "char", "word"))


@dataclass(frozen=True)
class ModelConfig:
    """BLSTM acoustic model. ``input_dim`` and ``num_targets`` are filled from the data (0 = derive)."""
    input_dim: int = 0
    num_targets: int = 0
    stack: int = 3  # frames stacked
    subsample: int = 3  # output frame rate divisor
    num_layers: int = 4
    hidden: int = 320  # cells per direction
    proj: int = 0  # projection size per direction (0 = none)
    dropout: float = 0.1
    loss: str = "ctc"  # ctc | ce

    def validate(self) -> None:
        _choice("model.loss", self.loss, ("ctc", "ce"))
        if self.subsample < 1 or self.stack < 1 or self.num_layers < 1 or self.hidden < 1:
            raise AsrError("model.stack, model.subsample, model.num_layers and model.hidden must be >= 1")


@dataclass(frozen=True)
class SpecAugConfig:
    enabled: bool = False
    freq_masks: int = 2
    freq_width: int = 15
    time_masks: int = 2
    time_width: float = 0.05  # fraction of the utterance


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 10
    optimizer: str = "adam"  # adam | sgd
    lr: float = 1e-3
    momentum: float = 0.9
    weight_decay: float = 0.0
    warmup_steps: int = 200
    anneal: str = "exp"  # exp | cosine | none: after warmup
    anneal_factor: float = 0.5  # exp: lr multiplied by this every anneal_every_steps
    anneal_every_steps: int = 1000
    min_lr: float = 1e-5
    grad_clip: float = 5.0
    max_frames: int = 20000  # frames (before subsampling) per batch, per learner
    max_utts: int = 256
    bucket_width: int = 100  # input frames per length bucket
    sortagrad: bool = False  # first epoch in order of length, shortest first (Deep Speech 2)
    seed: int = 1
    checkpoint_every_steps: int = 0  # 0 = only at the end of each epoch
    keep_checkpoints: int = 5
    average_last: int = 3
    log_every_steps: int = 50
    threads: int = 0  # torch intra-op threads per learner; 0 = cores / learners
    balance: str = "static"  # static: equal share of batches per learner | dynamic: claimed one by one
    device: str = "auto"  # auto (cuda:LOCAL_RANK if CUDA is available, else cpu) | cpu | cuda | cuda:N
    precision: str = "fp32"  # fp32 | bf16 | fp16 (autocast; fp16 with a gradient scaler)
    max_bad_steps: int = 20  # consecutive steps with a non-finite loss or gradient that stop training

    def validate(self) -> None:
        from asrtrain.device import PRECISIONS, check_device_spec

        _choice("train.optimizer", self.optimizer, ("adam", "sgd"))
        check_device_spec(self.device)
        _choice("train.precision", self.precision, PRECISIONS)
        _choice("train.anneal", self.anneal, ("exp", "cosine", "none"))
        if self.epochs < 1 or self.max_frames < 1:
            raise AsrError("train.epochs and train.max_frames must be >= 1")
        _choice("train.balance", self.balance, ("static", "dynamic"))
        if self.balance == "dynamic" and self.checkpoint_every_steps > 0:
            raise AsrError("train.balance=dynamic cannot checkpoint mid-epoch (learners' positions differ)",
                           fix="set train.checkpoint_every_steps=0 or train.balance=static")


@dataclass(frozen=True)
class DistConfig:
    strategy: str = "single"  # single | ssgd | adpsgd | h-adpsgd
    learners: int = 1
    learners_per_node: int = 0  # h-adpsgd group size; 0 = all local learners
    averaging: str = "fixed"  # fixed | random
    delay_by_one: bool = False
    backend: str = "auto"  # auto | gloo | nccl
    timeout_s: float = 60.0
    slowdown: str = ""  # testing/benchmarks: "rank:factor,..." injects a delay proportional to compute
    # periodic: average every `period` local steps, or "adaptive" (see asrtrain/distributed/periodic.py)
    period: str = "1"
    period_max: int = 64  # adaptive: longest period
    period_tolerance: float = 1.0  # adaptive: allowed divergence, x the one measured over the first period

    def validate(self) -> None:
        _choice("dist.strategy", self.strategy, ("single", "ssgd", "adpsgd", "h-adpsgd", "periodic"))
        if self.period != "adaptive" and not (self.period.isdigit() and int(self.period) >= 1):
            raise AsrError(f"dist.period = {self.period!r} is neither a number of steps >= 1 nor 'adaptive'",
                           fix="write e.g. --period 4 or --period adaptive")
        if self.period_max < 1 or self.period_tolerance <= 0:
            raise AsrError("dist.period_max must be >= 1 and dist.period_tolerance > 0")
        _choice("dist.averaging", self.averaging, ("fixed", "random"))
        _choice("dist.backend", self.backend, ("auto", "gloo", "nccl"))


@dataclass(frozen=True)
class DPConfig:
    """Differentially private training (asrtrain/distributed/dp.py): per-example clipping to ``clip`` and
    Gaussian noise N(0, (noise_multiplier * clip)^2) on each learner's summed gradient. Give either
    ``noise_multiplier`` or a target ``epsilon`` (sigma is then computed for the run's steps)."""
    enabled: bool = False
    clip: float = 1.0  # per-example L2 norm bound C
    noise_multiplier: float = 0.0  # sigma; 0 = derive it from epsilon
    epsilon: float = 0.0  # target epsilon per learner for the whole run; 0 = use noise_multiplier
    delta: float = 1e-5  # must be < 1 / (utterances per learner)

    def validate(self) -> None:
        if not self.enabled:
            return
        if self.clip <= 0:
            raise AsrError(f"dp.clip = {self.clip}: without per-example clipping DP gives no guarantee",
                           fix="set dp.clip to a positive norm bound, e.g. 1.0")
        if not 0 < self.delta < 1:
            raise AsrError(f"dp.delta = {self.delta} must be in (0, 1/utterances)", fix="e.g. dp.delta=1e-5")
        if (self.noise_multiplier > 0) == (self.epsilon > 0):
            raise AsrError("dp needs exactly one of dp.noise_multiplier > 0 and dp.epsilon > 0",
                           fix="give a target --set dp.epsilon=8 or a --set dp.noise_multiplier=1.0")


@dataclass(frozen=True)
class DecodeConfig:
    method: str = "greedy"  # greedy | beam | lexicon (vocabulary-constrained, word LM with --lm)
    beam_size: int = 8
    batch_frames: int = 40000
    lm_weight: float = 1.0  # lexicon search: weight of ln p_LM(word | history)
    word_bonus: float = 4.0  # lexicon search: added per word (balances the LM's per-word cost)

    def validate(self) -> None:
        _choice("decode.method", self.method, ("greedy", "beam", "lexicon"))


@dataclass(frozen=True)
class Config:
    features: FeatureConfig = field(default_factory=FeatureConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    specaug: SpecAugConfig = field(default_factory=SpecAugConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    dist: DistConfig = field(default_factory=DistConfig)
    dp: DPConfig = field(default_factory=DPConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)

    def validate(self) -> "Config":
        for f in fields(self):
            section = getattr(self, f.name)
            if hasattr(section, "validate"):
                section.validate()
        if self.dp.enabled and self.train.balance == "dynamic":
            raise AsrError("dp.enabled with train.balance=dynamic: learners would share batches, and a fast one "
                           "would take more steps than its privacy budget was computed for",
                           fix="set train.balance=static (each learner keeps its own data)")
        return self


def _choice(name: str, value: str, allowed: Iterable[str]) -> None:
    allowed = tuple(allowed)
    if value not in allowed:
        err = AsrError(f"{name} = {value!r} is not one of {', '.join(allowed)}")
        err.key = name
        raise err


# ---------------------------------------------------------------------------------------------------------
# Loading

def _coerce(value: Any, typ: Any, where: str, path: Optional[str], line: Optional[int]) -> Any:
    """Check ``value`` against a field type (bool, int, float, str), converting int -> float."""
    if typ is bool:
        if isinstance(value, bool):
            return value
    elif typ is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif typ is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # YAML 1.1 reads "2e-3" (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
    elif typ is str:
        if isinstance(value, str):
            return value
    else:
        return value
    raise AsrError(f"{where} must be {typ.__name__}, got {value!r}", path, line,
                   fix=f"give {where} a {typ.__name__} value")


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
            kwargs[key] = _coerce(value, typ, where, path, lines.get(where))
    return cls(**kwargs)


def _key_lines(text: str) -> Dict[str, int]:
    """Map dotted keys of a YAML document to 1-based line numbers (for error messages)."""
    out: Dict[str, int] = {}

    def walk(node, prefix):
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                name = f"{prefix}.{k.value}" if prefix else str(k.value)
                out[name] = k.start_mark.line + 1
                walk(v, name)

    try:
        walk(yaml.compose(text), "")
    except yaml.YAMLError:
        pass
    return out


def _field_type(cls, dotted: str):
    """The declared type of ``section.key`` in ``cls`` (None when there is no such field)."""
    for part in dotted.split("."):
        if not is_dataclass(cls):
            return None
        hints = typing.get_type_hints(cls)
        if part not in hints:
            return None
        cls = hints[part]
    return cls


def parse_override(text: str) -> Tuple[str, Any]:
    """``"train.lr=0.2"`` -> ``("train.lr", 0.2)``; the value is parsed as YAML."""
    if "=" not in text:
        raise AsrError(f"override {text!r} is not of the form section.key=value",
                       fix="write e.g. --set train.lr=0.2")
    key, value = text.split("=", 1)
    try:
        parsed = yaml.safe_load(value) if value != "" else ""
    except yaml.YAMLError:
        parsed = value
    return key.strip(), parsed


def _read_yaml(path: Path) -> Tuple[Dict[str, Any], Dict[str, int]]:
    spath = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise AsrError("config file not found", spath, fix="check the config path") from None
    except UnicodeDecodeError:
        raise AsrError("config file is not UTF-8", spath) from None
    try:
        loaded = yaml.safe_load(text) or {}
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        raise AsrError(f"invalid YAML: {getattr(err, 'problem', err)}", spath,
                       None if mark is None else mark.line + 1) from None
    return loaded, _key_lines(text)


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
        loaded, lines = _read_yaml(p)
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
        key, value = parse_override(item)
        if _field_type(Config, key) is str:  # keep "1:4" a string (YAML 1.1 would read 64)
            value = item.split("=", 1)[1]
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]  # --set "dist.slowdown='1:4'" is the same as dist.slowdown=1:4
        node = data
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
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
    from asrtrain.io import atomic_write_text
    atomic_write_text(Path(path), yaml.safe_dump(to_dict(cfg), sort_keys=False))


def section_from_dict(cls, data: Dict[str, Any], path: Optional[str] = None):
    """Build one section (e.g. FeatureConfig) from a plain dict, with the same checks."""
    obj = _build(cls, data, "", path, {})
    if hasattr(obj, "validate"):
        obj.validate()
    return obj


def load_section(cls, path: Optional[Path], overrides: Iterable[str] = ()):
    """Load one section from a YAML file holding just that section's keys."""
    data: Dict[str, Any] = {}
    lines: Dict[str, int] = {}
    spath = None
    if path is not None:
        spath = str(path)
        data, lines = _read_yaml(path)
    for item in overrides:
        key, value = parse_override(item)
        data[key] = value
    obj = _build(cls, data, "", spath, lines)
    if hasattr(obj, "validate"):
        obj.validate()
    return obj


__all__ = ["Config", "FeatureConfig", "TokenizerConfig", "ModelConfig", "SpecAugConfig", "TrainConfig",
           "DistConfig", "DPConfig", "DecodeConfig", "load_config", "load_section", "save_config",
           "section_from_dict", "replace", "to_dict"]

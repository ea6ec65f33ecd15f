"""The typed, frozen configuration: one dataclass per section, with its defaults and range checks.

Every section is a frozen dataclass whose ``validate`` refuses out-of-range values (the error carries the
key, so the loader can name the YAML line it came from). Loading from YAML with dotted
``--set section.key=value`` overrides, and saving the resolved config, is :mod:`asrtrain.config.file`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Iterable, Optional

from asrtrain.errors import AsrError
from asrtrain.limits import (MAX_BATCH_FRAMES, MAX_BATCH_UTTS, MAX_BEAM, MAX_CONV_CHANNELS, MAX_HIDDEN, MAX_LAYERS,
                             MAX_PARAMS, MAX_STACK, MAX_THREADS, MAX_VOCAB, estimated_params)


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
    # A recording whose rate differs from sample_rate is an error, as in Kaldi's compute-fbank-feats
    # (which refuses both directions without --allow-downsample / --allow-upsample). true resamples it,
    # either way: upsampling leaves the band above the old Nyquist frequency empty, so ask for it knowingly.
    resample: bool = False

    def validate(self) -> None:
        _choice("features.kind", self.kind, ("fbank",))
        _choice("features.cmvn", self.cmvn, ("global", "speaker", "none"))
        _choice("features.window_type", self.window_type,
                ("povey", "hamming", "hanning", "rectangular", "blackman"))
        _range("features.sample_rate", self.sample_rate, lo=1, fix="give the audio's rate in Hz, e.g. 16000")
        _range("features.frame_length", self.frame_length, lo=0, lo_open=True,
               fix="give milliseconds, e.g. 25")
        _range("features.frame_shift", self.frame_shift, lo=0, lo_open=True, fix="give milliseconds, e.g. 10")
        _range("features.dither", self.dither, lo=0)
        _range("features.preemphasis_coefficient", self.preemphasis_coefficient, lo=0, hi=1)
        nyquist = self.sample_rate / 2
        _range("features.low_freq", self.low_freq, lo=0, hi=nyquist, hi_open=True)
        high = self.high_freq if self.high_freq > 0 else nyquist + self.high_freq
        _range("features.high_freq", self.high_freq, lo=-nyquist, hi=nyquist,
               fix="0 means the Nyquist frequency, a negative value is an offset below it")
        if not high > self.low_freq:
            _fail("features.high_freq", f"features.high_freq = {self.high_freq} puts the top of the mel "
                  f"bank at {high} Hz, not above features.low_freq = {self.low_freq} Hz",
                  "raise high_freq (0 = Nyquist) or lower low_freq")
        window = int(self.sample_rate * self.frame_length / 1000)
        if window < 2:
            _fail("features.frame_length", f"features.frame_length = {self.frame_length} ms is {window} "
                  f"samples at {self.sample_rate} Hz", "give a frame of at least 2 samples, e.g. 25 ms")
        shift = int(self.sample_rate * self.frame_shift / 1000)
        if shift < 1:
            _fail("features.frame_shift", f"features.frame_shift = {self.frame_shift} ms is shorter than one "
                  f"sample at {self.sample_rate} Hz", "give milliseconds, e.g. 10")
        fft_bins = (1 << (window - 1).bit_length() if self.round_to_power_of_two else window) // 2
        _range("features.num_mel_bins", self.num_mel_bins, lo=3, hi=fft_bins,
               fix=f"Kaldi needs 3 .. {fft_bins} bins for a {self.frame_length} ms frame at "
                   f"{self.sample_rate} Hz")


@dataclass(frozen=True)
class TokenizerConfig:
    model_type: str = "unigram"  # bpe | unigram | char | word
    vocab_size: int = 300
    character_coverage: float = 1.0

    def validate(self) -> None:
        _choice("tokenizer.model_type", self.model_type, ("bpe", "unigram", "char", "word"))
        _range("tokenizer.vocab_size", self.vocab_size, lo=2, hi=MAX_VOCAB,
               fix=f"give 2 .. {MAX_VOCAB} pieces, e.g. 300")
        _range("tokenizer.character_coverage", self.character_coverage, lo=0, hi=1, lo_open=True)


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
    # Weight of an intermediate CTC loss on the middle layer's output through the same head (InterCTC,
    # Lee & Watanabe 2021): loss = (1 - w) CTC(last) + w CTC(middle). Training only; 0 = off.
    inter_ctc: float = 0.0
    # Weight of an attention decoder's CE (joint CTC/attention training, Kim et al. 2017; asrtrain/model/
    # attention.py): loss = (1 - w) CTC + w CE. Training only, decoding uses the CTC branch; 0 = off.
    att_weight: float = 0.0
    att_dim: int = 320  # the attention decoder's LSTM cells and attention size
    # What turns feature frames into the first LSTM layer's input: "stack" (model.stack frames side by side,
    # every model.subsample-th kept) or "conv" (two 3x3 convolutions of model.conv_channels channels, the
    # second striding time by model.subsample; asrtrain/model/frontend.py). conv needs model.stack 1.
    frontend: str = "stack"
    conv_channels: int = 32
    # How the LSTM stack is laid out for torch's kernels (asrtrain/model/rnn_stack.py), the same computation
    # in each: auto (packed_per_layer on CUDA, padded on the CPU) | packed_per_layer (sort, pack and unpack
    # in every layer) | packed_once (pack once for the stack, dropout on the packed data) | padded (one
    # direction at a time over the padded batch, reversed within each length: oneDNN's fused RNN on the
    # CPU, and on CUDA the shape cuDNN's persistent fp16 kernel needs). Not a model property: a checkpoint
    # trained with one layout loads and runs with any other.
    rnn_layout: str = "auto"
    # Under train.precision=bf16 on CUDA the LSTMs run outside autocast in fp32 (autocast would run them in
    # fp16, unscaled); true casts them to bf16 by hand instead, where the installed cuDNN takes bf16 LSTMs
    # (checked at run time: its version and a tiny bf16 LSTM; refused with the reason otherwise).
    rnn_bf16: bool = False

    def validate(self) -> None:
        _choice("model.loss", self.loss, ("ctc", "ce"))
        _range("model.inter_ctc", self.inter_ctc, lo=0, hi=1)
        _range("model.att_weight", self.att_weight, lo=0, hi=1)
        if self.att_weight > 0 and (self.loss != "ctc" or self.att_weight >= 1 or self.att_dim < 1):
            raise AsrError(f"model.att_weight = {self.att_weight} needs model.loss ctc, a weight below 1 and "
                           f"model.att_dim >= 1 (it is {self.att_dim})")
        if self.inter_ctc > 0 and (self.loss != "ctc" or self.num_layers < 2 or self.inter_ctc >= 1):
            raise AsrError(f"model.inter_ctc = {self.inter_ctc} needs model.loss ctc, at least 2 layers and "
                           "a weight below 1")
        _choice("model.frontend", self.frontend, ("stack", "conv"))
        from asrtrain.model.rnn_stack import RNN_LAYOUTS
        _choice("model.rnn_layout", self.rnn_layout, RNN_LAYOUTS)
        if self.frontend == "conv" and (self.stack != 1 or self.conv_channels < 1):
            raise AsrError(f"model.frontend conv subsamples by model.subsample itself: it needs "
                           f"model.stack 1 (it is {self.stack}) and model.conv_channels >= 1 "
                           f"(it is {self.conv_channels})")
        for name, hi, example in (("stack", MAX_STACK, 3), ("subsample", MAX_STACK, 3),
                                  ("num_layers", MAX_LAYERS, 4), ("hidden", MAX_HIDDEN, 320),
                                  ("att_dim", MAX_HIDDEN, 320), ("conv_channels", MAX_CONV_CHANNELS, 32)):
            _range(f"model.{name}", getattr(self, name), lo=1, hi=hi,
                   fix=f"give 1 .. {hi}, e.g. model.{name}={example}")
        _range("model.proj", self.proj, lo=0, hi=MAX_HIDDEN, fix=f"0 means no projection; at most {MAX_HIDDEN}")
        _range("model.input_dim", self.input_dim, lo=0, hi=MAX_HIDDEN, fix="0 derives it from the features")
        _range("model.num_targets", self.num_targets, lo=0, hi=MAX_VOCAB, fix="0 derives it from the tokenizer")
        params = estimated_params(self.input_dim, self.num_targets, self.stack, self.num_layers, self.hidden,
                                  self.proj, self.att_dim if self.att_weight > 0 else 0)
        if params > MAX_PARAMS:
            _fail("model.hidden", f"model.hidden = {self.hidden} with model.num_layers = {self.num_layers} "
                  f"(model.proj = {self.proj}, model.stack = {self.stack}) is about {params:,} parameters, "
                  f"more than the {MAX_PARAMS:,} accepted", "lower model.hidden or model.num_layers")
        _range("model.dropout", self.dropout, lo=0, hi=1, hi_open=True,
               fix="give the probability of zeroing a unit, e.g. 0.1 (0 = off)")


@dataclass(frozen=True)
class SpecAugConfig:
    enabled: bool = False
    freq_masks: int = 2
    freq_width: int = 15
    time_masks: int = 2
    time_width: float = 0.05  # fraction of the utterance
    # Frequency warping (VTLP-like, on the filterbank axis): each utterance's bins are stretched by a
    # factor drawn uniformly from [1 - w, 1 + w], the ends kept fixed (Kaldi's piecewise-linear warp).
    # Applied before the masks; 0 = off, and then the masks are drawn exactly as without the option.
    freq_warp: float = 0.0

    def validate(self) -> None:
        for name in ("freq_masks", "freq_width", "time_masks"):
            _range(f"specaug.{name}", getattr(self, name), lo=0)
        _range("specaug.time_width", self.time_width, lo=0, hi=1)
        _range("specaug.freq_warp", self.freq_warp, lo=0, hi=0.5, hi_open=True, fix="e.g. specaug.freq_warp=0.1")


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
        for name in ("epochs", "max_frames"):
            if getattr(self, name) < 1:
                _fail(f"train.{name}", f"train.epochs and train.max_frames must be >= 1 "
                      f"(train.{name} = {getattr(self, name)})")
        _range("train.lr", self.lr, lo=0, fix="give the peak learning rate, e.g. 1e-3")
        _range("train.min_lr", self.min_lr, lo=0, fix="give the schedule's floor, e.g. 1e-5 (0 = none)")
        if self.min_lr > self.lr:  # the floor would lift the rate above its own peak after warm-up
            _fail("train.min_lr", f"train.min_lr = {self.min_lr:g} is above train.lr = {self.lr:g}: after "
                  "warm-up the schedule would raise the rate to its floor",
                  "set train.min_lr <= train.lr (train.min_lr=0: no floor)")
        _range("train.anneal_factor", self.anneal_factor, lo=0, hi=1, lo_open=True,
               fix="give the factor the rate is multiplied by every anneal_every_steps, e.g. 0.5")
        _range("train.anneal_every_steps", self.anneal_every_steps, lo=1)
        _range("train.momentum", self.momentum, lo=0, hi=1, hi_open=True, fix="e.g. train.momentum=0.9")
        _range("train.weight_decay", self.weight_decay, lo=0, fix="e.g. 0 (off) or 1e-4")
        _range("train.warmup_steps", self.warmup_steps, lo=0, fix="0 means no warm-up")
        _range("train.grad_clip", self.grad_clip, lo=0, fix="give a gradient norm bound, e.g. 5 (0 = off)")
        _range("train.max_frames", self.max_frames, hi=MAX_BATCH_FRAMES,
               fix=f"give the frames per batch, at most {MAX_BATCH_FRAMES}, e.g. 20000")
        _range("train.max_utts", self.max_utts, lo=1, hi=MAX_BATCH_UTTS,
               fix="give the most utterances per batch, e.g. 256")
        _range("train.bucket_width", self.bucket_width, lo=1)
        _range("train.threads", self.threads, lo=0, hi=MAX_THREADS,
               fix="0 means the cores shared among the learners")
        _range("train.checkpoint_every_steps", self.checkpoint_every_steps, lo=0,
               fix="0 means only at the end of each epoch")
        _range("train.keep_checkpoints", self.keep_checkpoints, lo=1)
        _range("train.average_last", self.average_last, lo=1, fix="1 means no averaging")
        _range("train.log_every_steps", self.log_every_steps, lo=1)
        _range("train.max_bad_steps", self.max_bad_steps, lo=1)
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
    hang_timeout_s: float = 900.0  # name a learner whose main thread makes no progress this long (0 = off)
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
        _range("dist.timeout_s", self.timeout_s, lo=0, lo_open=True, fix="give seconds, e.g. 60")
        _range("dist.hang_timeout_s", self.hang_timeout_s, lo=0, fix="give seconds, e.g. 900 (0 turns it off)")
        _range("dist.learners", self.learners, lo=1)
        _range("dist.learners_per_node", self.learners_per_node, lo=0)


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
    # train.balance=dynamic (ADPSGD): each learner trains on its own shard and may take up to this many
    # times its equal share of steps in an epoch; sigma is computed for that many, so a fast learner
    # never spends more than the target epsilon (a slow one spends less)
    max_step_share: float = 2.0

    def validate(self) -> None:
        for name in ("clip", "noise_multiplier", "epsilon", "delta", "max_step_share"):  # with --dp or not
            _range(f"dp.{name}", getattr(self, name), fix=f"give a finite dp.{name} (see docs: a clip or noise "
                   "of inf would skip or drown every step)")
        if not self.enabled:
            return
        if self.clip <= 0:
            raise AsrError(f"dp.clip = {self.clip}: without per-example clipping DP gives no guarantee",
                           fix="set dp.clip to a positive norm bound, e.g. 1.0")
        if not 0 < self.delta < 1:
            raise AsrError(f"dp.delta = {self.delta} must be in (0, 1/utterances)", fix="e.g. dp.delta=1e-5")
        if not self.max_step_share >= 1.0:
            raise AsrError(f"dp.max_step_share = {self.max_step_share}: a learner must be allowed at least its "
                           "equal share of steps", fix="set dp.max_step_share to 1 or more (default 2)")
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
    engine: str = "ours"  # lexicon search: ours (Python) | flashlight (C++, torchaudio + flashlight-text)

    def validate(self) -> None:
        _choice("decode.method", self.method, ("greedy", "beam", "lexicon"))
        _choice("decode.engine", self.engine, ("ours", "flashlight"))
        _range("decode.beam_size", self.beam_size, lo=1, hi=MAX_BEAM, fix=f"give 1 .. {MAX_BEAM}, e.g. 8")
        _range("decode.batch_frames", self.batch_frames, lo=1, hi=MAX_BATCH_FRAMES,
               fix=f"give 1 .. {MAX_BATCH_FRAMES}, e.g. 40000")
        _range("decode.lm_weight", self.lm_weight, fix="give a finite weight, e.g. 1.0")
        _range("decode.word_bonus", self.word_bonus, fix="give a finite bonus, e.g. 4.0")


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
        return self


def _choice(name: str, value: str, allowed: Iterable[str]) -> None:
    allowed = tuple(allowed)
    if value not in allowed:
        err = AsrError(f"{name} = {value!r} is not one of {', '.join(allowed)}")
        err.key = name
        raise err


def _fail(name: str, message: str, fix: Optional[str] = None) -> None:
    err = AsrError(message, fix=fix)
    err.key = name  # load_config maps it to the YAML line
    raise err


def _range(name: str, value, lo=None, hi=None, lo_open: bool = False, hi_open: bool = False,
           fix: Optional[str] = None) -> None:
    """Refuse ``value`` outside [lo, hi] (open ends where asked); NaN and infinities are always outside."""
    ok = math.isfinite(value) and (lo is None or (value > lo if lo_open else value >= lo)) and \
        (hi is None or (value < hi if hi_open else value <= hi))
    if not ok:
        bounds = " and ".join(b for b in (
            None if lo is None else f"{'>' if lo_open else '>='} {lo:g}",
            None if hi is None else f"{'<' if hi_open else '<='} {hi:g}") if b)
        what = (f"a finite number {bounds}" if bounds else "a finite number") if not math.isfinite(value) \
            else bounds
        _fail(name, f"{name} = {value!r} must be {what}", fix or f"set {name} within range")


__all__ = ["Config", "FeatureConfig", "TokenizerConfig", "ModelConfig", "SpecAugConfig", "TrainConfig",
           "DistConfig", "DPConfig", "DecodeConfig", "replace"]

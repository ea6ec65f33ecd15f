"""``asrtrain pack EXP OUT``: a self-contained model dir that transcribes with no exp, feature or data dir.

Layout (the exp dir's names, so :class:`asrtrain.transcribe.model.Transcriber` loads either):
``config.yaml``, ``tokenizer.model``, ``model.safetensors`` (the weights as CPU tensors in safetensors,
which loads without running code; :func:`asrtrain.decode.run.load_model` reads it where an exp dir has
``final.pt``; its metadata holds the config stamp and :func:`training_record`), ``data.json`` (what
training recorded of its data), ``cmvn_global.ark`` (global-CMVN models), ``lm.arpa`` and ``params.yaml``
when given (or carried from a pack being re-packed), ``MODEL.md`` (a card: :func:`card`) and
``MANIFEST.sha256`` (every file's sha256: :mod:`asrtrain.transcribe.manifest`).
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Dict, Optional

from asrtrain.errors import AsrError
from asrtrain.transcribe.manifest import MANIFEST, verify, write_manifest  # noqa: F401 - part of this API

log = logging.getLogger("asrtrain.pack")


def pack(exp: Path, out: Path, lm: Optional[Path] = None, params: Optional[Path] = None,
         checkpoint: Optional[Path] = None) -> Path:
    """Write the pack of ``exp`` (an exp dir, or a pack) into ``out`` (a staging dir moved into place: a
    failed pack leaves nothing).

    A pack as ``exp`` is checked against its manifest first (a changed file is refused, not re-packed under
    a fresh manifest), and its ``lm.arpa`` and ``params.yaml`` are carried across. ``lm`` replaces its LM,
    and then its params.yaml too (they were tuned for the old LM) unless ``params`` is given; ``params``
    alone replaces its params.yaml and keeps its LM."""
    from asrtrain import __version__
    from asrtrain.atomic import staging_dir, swap_dir
    from asrtrain.decode.run import check_ctc, load_model
    from asrtrain.model.files import SAFETENSORS, save_safetensors
    from asrtrain.model.stamp import STAMP_KEY, config_stamp
    from asrtrain.text.tokenizer import Tokenizer
    from asrtrain.train.data_record import DATA_RECORD
    from asrtrain.transcribe.manifest import kind
    from asrtrain.transcribe.model import check_params_have_lm, lexicon_for

    exp, out = Path(exp), Path(out)
    if out.exists():
        raise AsrError("exists already", out, fix="give a new directory, or remove it")
    source = kind(exp)
    if source == "pack":
        verify(exp)
    lm_from = params_from = None
    if lm is not None:
        lm_from = f"--lm {Path(lm).name}"
        if params is None and source == "pack" and (exp / "params.yaml").is_file():
            log.info("%s: its params.yaml is not carried: it was tuned for its own LM, not --lm %s (give "
                     "--params to ship tune-lm's weights for the new one)", exp, lm)
    elif source == "pack" and (exp / "lm.arpa").is_file():
        lm, lm_from = exp / "lm.arpa", f"the pack {exp.name}"
        if params is None and (exp / "params.yaml").is_file():
            params, params_from = exp / "params.yaml", f"the pack {exp.name}"
    if params is not None and params_from is None:
        params_from = f"--params {Path(params).name}"
    check_params_have_lm(lm, params)
    weights = _weights_file(exp, checkpoint)
    cfg, model = load_model(exp, checkpoint, "cpu")
    check_ctc(cfg, exp, "a pack is for transcribe, which decodes CTC models only")
    # the readers transcribe uses, on the files packed: a pack that would not load is not written
    lexicon_for(cfg, model, Tokenizer(exp / "tokenizer.model"), exp, lm, params)
    record = training_record(weights)
    stage = staging_dir(out)
    try:
        shutil.copy(exp / "config.yaml", stage / "config.yaml")
        shutil.copy(exp / "tokenizer.model", stage / "tokenizer.model")
        save_safetensors(model.state_dict(), stage / SAFETENSORS,
                         {"format": "pt", "asrtrain": __version__, STAMP_KEY: json.dumps(config_stamp(cfg)),
                          **{k: str(v) for k, v in record.items()}})
        if cfg.features.cmvn == "global":
            if not (exp / "cmvn_global.ark").is_file():
                raise AsrError("a global-CMVN model needs its training stats in the exp dir",
                               exp / "cmvn_global.ark", fix="copy TRAIN_FEATS/cmvn_global.ark into the exp dir")
            shutil.copy(exp / "cmvn_global.ark", stage / "cmvn_global.ark")
        if (exp / DATA_RECORD).is_file():
            shutil.copy(exp / DATA_RECORD, stage / DATA_RECORD)
        if lm is not None:
            shutil.copy(lm, stage / "lm.arpa")
        if params is not None:
            shutil.copy(params, stage / "params.yaml")
        if checkpoint is not None:
            where = f"--checkpoint {weights.name}, as model.safetensors"
        elif weights.name == SAFETENSORS:
            where = f"the pack {exp.name}'s model.safetensors (checked against its {MANIFEST})"
        else:
            where = f"the exp dir's {weights.name}, as model.safetensors"
        (stage / "MODEL.md").write_text(card(exp, cfg, __version__, where, record,
                                             {"lm.arpa": lm_from, "params.yaml": params_from}))
        write_manifest(stage)
        swap_dir(stage, out)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return out


def _weights_file(exp: Path, checkpoint: Optional[Path]) -> Path:
    """The model file :func:`asrtrain.decode.run.load_model` reads: ``checkpoint``, else ``final.pt``,
    else a pack's ``model.safetensors``."""
    from asrtrain.model.files import SAFETENSORS

    if checkpoint is not None:
        return Path(checkpoint)
    return exp / "final.pt" if (exp / "final.pt").is_file() or not (exp / SAFETENSORS).is_file() else exp / SAFETENSORS


def training_record(weights: Path) -> Dict[str, int]:
    """What the model file records of its training: ``epochs`` (epochs trained: ``final.pt`` and
    ``average``'s files since they record it, a training checkpoint's ``epoch``, a pack's metadata) and
    ``averaged`` (epoch checkpoints averaged into it); ``{}`` for a file that records neither."""
    from asrtrain.model.files import SAFETENSORS, load_checked, safetensors_metadata

    if weights.name == SAFETENSORS:
        found = safetensors_metadata(weights)
    else:
        payload = load_checked(weights)
        found = payload if isinstance(payload, dict) else {}
        if "epochs" not in found and "avg_model" in found and found.get("batch_index") == 0:
            found = {**found, "epochs": found["epoch"]}  # a training checkpoint: epochs done when written
    out = {}
    for key in ("epochs", "averaged"):
        try:
            value = int(found[key])
        except (KeyError, TypeError, ValueError):
            continue
        if value >= 1:
            out[key] = value
    return out


def card(exp: Path, cfg, version: str, weights: str, record: Dict[str, int],
         extras: Optional[Dict[str, Optional[str]]] = None) -> str:
    """MODEL.md: what the model is, from the exp dir or pack (config, ``data.json`` that training writes,
    the model file's ``record`` of its training, scoring files found under it, or a pack's own card's
    scores) and where its weights (``weights``) and ``extras`` (file name -> where it came from) came from."""
    from asrtrain.train.data_record import read_data_record

    f, m = cfg.features, cfg.model
    att = f", attention decoder (att_weight {m.att_weight:g})" if m.att_weight > 0 else ""
    if "epochs" in record:
        trained = f"{record['epochs']} epochs"
    else:
        trained = (f"train.epochs {cfg.train.epochs} in its config (the model file does not record how many "
                   "epochs ran)")
    if record.get("averaged", 0) > 1:
        trained += f", the average of the last {record['averaged']} epoch checkpoint(s)"
    lines = [f"# asrtrain model packed from {exp.name}", "",
             f"- asrtrain {version}; weights: {weights}",
             f"- model: BLSTM {m.num_layers}x{m.hidden}, subsample {m.subsample}, {m.num_targets} targets, "
             f"loss {m.loss}{att}",
             f"- features: fbank {f.num_mel_bins} bins at {f.sample_rate} Hz, CMVN {f.cmvn}",
             f"- training: {trained}"]
    lines += [f"- {name}: from {came}" for name, came in (extras or {}).items() if came]
    record = read_data_record(exp)
    if record is None:
        lines.append("- training data: not recorded (the exp dir predates data.json)")
    for split in ("train", "dev"):
        if record is not None and isinstance(record.get(split), dict):
            lines.append(f"- {split} data: {_data_line(record[split])}")
    lines.append("")
    scores = sorted(exp.glob("decode_*/scoring/*")) + sorted(exp.glob("decode_*/scoring*"))
    wer = [(p, ln) for p in scores if p.is_file() for ln in p.read_text(errors="replace").splitlines()
           if "%WER" in ln or "%CER" in ln][:16]
    carried = _card_scores(exp / "MODEL.md") if not wer and (exp / "MODEL.md").is_file() else []
    if wer:
        lines += ["## Scores (from the exp dir's scoring files)", ""]
        lines += [f"- {p.relative_to(exp).parts[0]}: {ln.strip()}" for p, ln in wer]
    elif carried:
        lines += [f"## Scores (from the card of the pack {exp.name})", ""] + carried
    else:
        lines.append("No scoring files were found in the exp dir.")
    return "\n".join(lines) + "\n"


def _card_scores(path: Path) -> list:
    """The score lines of a pack's MODEL.md (its ``## Scores`` section)."""
    text = path.read_text(errors="replace").splitlines()
    heads = [i for i, ln in enumerate(text) if ln.startswith("## Scores")]
    if not heads:
        return []
    return [ln for ln in text[heads[0] + 1:] if ln.startswith("- ")][:16]


def _data_line(d: dict) -> str:
    """``name``: N utterances, H hours (minutes below 0.1 h) (data.json's entry of one feature dir)."""
    hours = d.get("hours")
    if not isinstance(hours, (int, float)):
        size = "hours not recorded"
    else:
        size = f"{hours:.2f} hours" if hours >= 0.1 else f"{hours * 60:.1f} minutes"
    return f"{d.get('name')}: {d.get('utterances')} utterances, {size}"

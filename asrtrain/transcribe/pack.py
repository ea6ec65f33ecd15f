"""``asrtrain pack EXP OUT``: a self-contained model dir that transcribes with no exp, feature or data dir.

Layout (the exp dir's names, so :class:`asrtrain.transcribe.model.Transcriber` loads either):
``config.yaml``, ``tokenizer.model``, ``model.safetensors`` (the weights as CPU tensors in safetensors,
which loads without running code; :func:`asrtrain.decode.run.load_model` reads it where an exp dir has
``final.pt``), ``data.json`` (what training recorded of its data), ``cmvn_global.ark`` (global-CMVN
models), ``lm.arpa`` and ``params.yaml`` when given, ``MODEL.md`` (a card: :func:`card`) and
``MANIFEST.sha256`` (every file's sha256: :mod:`asrtrain.transcribe.manifest`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Optional

from asrtrain.errors import AsrError
from asrtrain.transcribe.manifest import MANIFEST, verify, write_manifest  # noqa: F401 - part of this API


def pack(exp: Path, out: Path, lm: Optional[Path] = None, params: Optional[Path] = None,
         checkpoint: Optional[Path] = None) -> Path:
    """Write the pack into ``out`` (a staging dir moved into place: a failed pack leaves nothing)."""
    from asrtrain import __version__
    from asrtrain.decode.run import load_model
    from asrtrain.atomic import staging_dir, swap_dir
    from asrtrain.model.files import SAFETENSORS, save_safetensors
    from asrtrain.model.stamp import STAMP_KEY, config_stamp
    from asrtrain.train.data_record import DATA_RECORD

    from asrtrain.text.tokenizer import Tokenizer
    from asrtrain.transcribe.model import check_params_have_lm, lexicon_for

    exp, out = Path(exp), Path(out)
    if out.exists():
        raise AsrError("exists already", out, fix="give a new directory, or remove it")
    check_params_have_lm(lm, params)
    cfg, model = load_model(exp, checkpoint, "cpu")
    # the readers transcribe uses, on the files given: a pack that would not load is not written
    lexicon_for(cfg, model, Tokenizer(exp / "tokenizer.model"), exp, lm, params)
    stage = staging_dir(out)
    try:
        shutil.copy(exp / "config.yaml", stage / "config.yaml")
        shutil.copy(exp / "tokenizer.model", stage / "tokenizer.model")
        save_safetensors(model.state_dict(), stage / SAFETENSORS,
                         {"format": "pt", "asrtrain": __version__, STAMP_KEY: json.dumps(config_stamp(cfg))})
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
        (stage / "MODEL.md").write_text(card(exp, cfg, __version__, checkpoint))
        write_manifest(stage)
        swap_dir(stage, out)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return out


def card(exp: Path, cfg, version: str, checkpoint: Optional[Path]) -> str:
    """MODEL.md: what the model is, from the exp dir (config, ``data.json`` that training writes,
    scoring files found under it)."""
    from asrtrain.train.data_record import read_data_record

    f, m = cfg.features, cfg.model
    att = f", attention decoder (att_weight {m.att_weight:g})" if m.att_weight > 0 else ""
    lines = [f"# asrtrain model packed from {exp.name}", "",
             f"- asrtrain {version}; weights: the exp dir's {Path(checkpoint or 'final.pt').name}, as "
             "model.safetensors",
             f"- model: BLSTM {m.num_layers}x{m.hidden}, subsample {m.subsample}, {m.num_targets} targets, "
             f"loss {m.loss}{att}",
             f"- features: fbank {f.num_mel_bins} bins at {f.sample_rate} Hz, CMVN {f.cmvn}",
             f"- training: {cfg.train.epochs} epochs"]
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
    if wer:
        lines += ["## Scores (from the exp dir's scoring files)", ""]
        lines += [f"- {p.relative_to(exp).parts[0]}: {ln.strip()}" for p, ln in wer]
    else:
        lines.append("No scoring files were found in the exp dir.")
    return "\n".join(lines) + "\n"


def _data_line(d: dict) -> str:
    """``name``: N utterances, H hours (minutes below 0.1 h) (data.json's entry of one feature dir)."""
    hours = d.get("hours")
    if not isinstance(hours, (int, float)):
        size = "hours not recorded"
    else:
        size = f"{hours:.2f} hours" if hours >= 0.1 else f"{hours * 60:.1f} minutes"
    return f"{d.get('name')}: {d.get('utterances')} utterances, {size}"

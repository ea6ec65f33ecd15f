"""``asrtrain pack EXP OUT``: a self-contained model dir that transcribes with no exp, feature or data dir.

Layout (the exp dir's names, so :class:`asrtrain.transcribe.model.Transcriber` loads either):
``config.yaml``, ``tokenizer.model``, ``final.pt`` (our checksummed ``weights_only`` file, tensors on the
CPU), ``cmvn_global.ark`` (global-CMVN models), ``lm.arpa`` and ``params.yaml`` when given, ``MODEL.md``
(a card) and ``MANIFEST.sha256`` (every file's sha256, verified by :func:`verify`).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Optional

from asrtrain.errors import AsrError

MANIFEST = "MANIFEST.sha256"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pack(exp: Path, out: Path, lm: Optional[Path] = None, params: Optional[Path] = None,
         checkpoint: Optional[Path] = None) -> Path:
    """Write the pack into ``out`` (a staging dir moved into place: a failed pack leaves nothing)."""
    from asrtrain import __version__
    from asrtrain.decode.run import load_model
    from asrtrain.atomic import staging_dir, swap_dir
    from asrtrain.model.files import save_checked

    exp, out = Path(exp), Path(out)
    if out.exists():
        raise AsrError("exists already", out, fix="give a new directory, or remove it")
    cfg, model = load_model(exp, checkpoint, "cpu")
    stage = staging_dir(out)
    try:
        shutil.copy(exp / "config.yaml", stage / "config.yaml")
        shutil.copy(exp / "tokenizer.model", stage / "tokenizer.model")
        save_checked({"model": {k: v.cpu() for k, v in model.state_dict().items()}}, stage / "final.pt")
        if cfg.features.cmvn == "global":
            if not (exp / "cmvn_global.ark").is_file():
                raise AsrError("a global-CMVN model needs its training stats in the exp dir",
                               exp / "cmvn_global.ark", fix="copy TRAIN_FEATS/cmvn_global.ark into the exp dir")
            shutil.copy(exp / "cmvn_global.ark", stage / "cmvn_global.ark")
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


def write_manifest(model_dir: Path) -> None:
    """``MANIFEST.sha256``: the sha256 of every file in ``model_dir`` (what :func:`verify` checks)."""
    files = sorted(p for p in Path(model_dir).iterdir() if p.is_file() and p.name != MANIFEST)
    (Path(model_dir) / MANIFEST).write_text("".join(f"{_sha(p)}  {p.name}\n" for p in files))


def card(exp: Path, cfg, version: str, checkpoint: Optional[Path]) -> str:
    """MODEL.md: what the model is, from the exp dir (config, scoring files found under it)."""
    f, m = cfg.features, cfg.model
    lines = [f"# asrtrain model packed from {exp.name}", "",
             f"- asrtrain {version}; weights: {Path(checkpoint).name if checkpoint else 'final.pt'}",
             f"- model: BLSTM {m.num_layers}x{m.hidden}, subsample {m.subsample}, {m.num_targets} targets, "
             f"loss {m.loss}",
             f"- features: fbank {f.num_mel_bins} bins at {f.sample_rate} Hz, CMVN {f.cmvn}",
             f"- training: {cfg.train.epochs} epochs", ""]
    scores = sorted(exp.glob("decode_*/scoring/*")) + sorted(exp.glob("decode_*/scoring*"))
    wer = [(p, ln) for p in scores if p.is_file() for ln in p.read_text(errors="replace").splitlines()
           if "%WER" in ln][:8]
    if wer:
        lines += ["## Scores (from the exp dir's scoring files)", ""]
        lines += [f"- {p.parent.parent.name}: {ln.strip()}" for p, ln in wer]
    else:
        lines.append("No scoring files were found in the exp dir.")
    return "\n".join(lines) + "\n"


def verify(model_dir: Path) -> None:
    """Check a pack's files against its manifest (no-op for an exp dir, which has none)."""
    model_dir = Path(model_dir)
    manifest = model_dir / MANIFEST
    if not manifest.is_file():
        return
    for no, line in enumerate(manifest.read_text().splitlines(), 1):
        want, name = line.split(None, 1)
        path = model_dir / name.strip()
        if not path.is_file() or _sha(path) != want:
            raise AsrError(f"{name.strip()} is missing or changed since packing", manifest, no,
                           fix="re-copy the packed model")

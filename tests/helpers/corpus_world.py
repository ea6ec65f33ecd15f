"""The clean inputs the bad-input corpus damages: a data dir with audio, a feature dir, a tokenizer, a
word LM, a trained (tiny) exp dir and Hub5 stm/ctm files; and how a case copies and damages them."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable, Dict, Union

import numpy as np
import soundfile as sf

from tests.helpers.cli_helpers import one_error, run
from tests.helpers.featfix import make_feat_dir
from tests.helpers.sphere_fixture import make_data_dir

UTTS = ["spk0-utt0", "spk0-utt2", "spk1-utt1", "spk1-utt3"]  # make_data_dir's ids, sorted
TINY = ["model.num_layers=1", "model.hidden=8", "model.subsample=2", "train.max_frames=1500",
        "train.warmup_steps=2", "train.epochs=1", "train.log_every_steps=50"]
STM = ("sw_4390 A sw_4390-A 0.00 2.00 <O,en,M> hello world\n"
       "sw_4390 B sw_4390-B 1.00 3.00 <O,en,F> good morning\n")
CTM = ("sw_4390 A 0.10 0.40 hello 1.0\nsw_4390 A 0.60 0.50 world 1.0\n"
       "sw_4390 B 1.20 0.30 good 1.0\nsw_4390 B 1.70 0.60 morning 1.0\n")
SEGMENTS = "sw_4390-A-0000 sw_4390-A 0.00 2.00\nsw_4390-B-0000 sw_4390-B 1.00 3.00\n"
R2FC = "sw_4390-A sw_4390 A\nsw_4390-B sw_4390 B\n"
HYP_TEXT = "sw_4390-A-0000 hello world\nsw_4390-B-0000 good morning\n"

Content = Union[None, str, bytes, Callable]


def build_world(root: Path) -> Dict[str, Path]:
    """Make every clean input once (a few seconds: one tiny training epoch)."""
    world = {"data": make_data_dir(root / "d", n_utts=4, speakers=2), "audio": root / "d" / "audio"}
    world["feats"] = make_feat_dir(root / "feats", 24, dim=13)
    r = run("tokenizer", "train", "--text", world["feats"] / "text", "--out", root / "tok", "--model-type", "word",
            "--vocab-size", "30")
    assert r.exit_code == 0, r.output
    world["tok"] = root / "tok"
    r = run("lm", "train", "--text", world["feats"] / "text", "--out", root / "lm")
    assert r.exit_code == 0, r.output
    world["lm"] = root / "lm"
    args = ["train", "--train-data", world["feats"], "--tokenizer", root / "tok" / "tokenizer.model",
            "--exp-dir", root / "exp"]
    for s in TINY:
        args += ["--set", s]
    r = run(*args)
    assert r.exit_code == 0, r.output
    world["exp"] = root / "exp"
    hub = root / "hub5"
    hub.mkdir()
    for name, text in (("ref.stm", STM), ("hyp.ctm", CTM), ("segments", SEGMENTS), ("r2fc", R2FC),
                       ("hyp.txt", HYP_TEXT)):
        (hub / name).write_text(text)
    world["hub5"] = hub
    return world


def materialize(world: Dict[str, Path], tmp: Path, files: Dict[str, Content], command: str = ""
                ) -> Dict[str, Path]:
    """Copy the world dirs the case uses (named in ``command`` or ``files``) into ``tmp`` (paths inside
    scp files follow the copies), then apply ``files``: None deletes, str/bytes replace, a callable maps
    the file's Path to new content (or writes it, returning None)."""
    used = {n for n in world if "{%s}" % n in command or any(k.startswith(n + "/") for k in files)}
    if "data" in used:
        used.add("audio")
    dirs = {name: (tmp / name if name in used else src) for name, src in world.items()}
    dirs["tmp"] = tmp
    for name in used:
        shutil.copytree(world[name], tmp / name)
    for name in used:  # wav.scp and scp files name absolute paths: point them at the copies
        for scp in ("wav.scp", "feats.scp", "cmvn.scp"):
            p = tmp / name / scp
            if p.exists():
                text = p.read_text()
                for other in used:
                    text = text.replace(f"{world[other]}/", f"{tmp / other}/")
                p.write_text(text)
    for rel, content in files.items():
        path = tmp / rel
        if content is None:
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
            continue
        if callable(content):
            content = content(path)
            if content is None:
                continue  # the callable wrote the file itself
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            content = content.encode("utf-8")
        path.write_bytes(content)
    return dirs


# ---------------------------------------------------------------------------------------------------------
# Damage helpers: each returns a callable for ``files``

def line(n: int, new: str) -> Callable:
    """Replace line ``n`` (1-based) of a text file; ``{key}`` in ``new`` is that line's first field."""
    def apply(path: Path) -> str:
        lines = path.read_text(encoding="utf-8").splitlines()
        lines[n - 1] = new.format(key=lines[n - 1].split()[0])
        return "".join(ln + "\n" for ln in lines)
    return apply


def append(new: str) -> Callable:
    return lambda path: path.read_text(encoding="utf-8") + new


def prepend(new: Union[str, bytes]) -> Callable:
    def apply(path: Path) -> bytes:
        head = new.encode("utf-8") if isinstance(new, str) else new
        return head + path.read_bytes()
    return apply


def cut(fraction: float) -> Callable:
    """Keep the first ``fraction`` of a file's bytes."""
    return lambda path: path.read_bytes()[: int(len(path.read_bytes()) * fraction)]


def swap_lines(a: int, b: int) -> Callable:
    def apply(path: Path) -> str:
        lines = path.read_text(encoding="utf-8").splitlines()
        lines[a - 1], lines[b - 1] = lines[b - 1], lines[a - 1]
        return "".join(ln + "\n" for ln in lines)
    return apply


def dup_line(n: int) -> Callable:
    def apply(path: Path) -> str:
        lines = path.read_text(encoding="utf-8").splitlines()
        lines.insert(n, lines[n - 1])
        return "".join(ln + "\n" for ln in lines)
    return apply


def float_audio(value: float, at: int = 100, rate: int = 16000) -> Callable:
    """Rewrite an audio file as float32 wav with ``value`` at sample ``at``."""
    def apply(path: Path) -> None:
        x = (0.2 * np.sin(np.arange(int(0.7 * rate)) * 0.05)).astype(np.float32)
        x[at] = value
        sf.write(str(path), x, rate, subtype="FLOAT")
    return apply


def audio_at(rate: int, seconds: float = 0.7) -> Callable:
    def apply(path: Path) -> None:
        x = (3000 * np.sin(np.arange(int(seconds * rate)) * 0.05)).astype(np.int16)
        sf.write(str(path), x, rate, subtype="PCM_16")
    return apply


def replace(old: str, new: str) -> Callable:
    return lambda path: path.read_bytes().replace(old.encode("utf-8"), new.encode("utf-8")
                                                  if isinstance(new, str) else new)


def segments_for_data(times: str = None, rec: str = None) -> Callable:
    """A segments file for the data dir (utterance = recording); line 2 with ``times`` / ``rec`` if given."""
    def apply(path: Path) -> str:
        rows = [f"{u} {u} 0.0 0.5" for u in UTTS]
        rows[1] = f"{UTTS[1]} {rec or UTTS[1]} {times or '0.0 0.5'}"
        return "".join(r + "\n" for r in rows)
    return apply


def nan_stats(path: Path) -> None:
    """CMVN stats [2, D+1] of NaN."""
    import kaldiio
    kaldiio.save_mat(str(path), np.full((2, 14), np.nan))


def huge_stats(value: float, row: int = 0) -> Callable:
    """CMVN stats whose sums in ``row`` are ``value`` (finite in float64, beyond float32), count 100."""
    def apply(path: Path) -> None:
        import kaldiio
        stats = np.array(kaldiio.load_mat(str(path)), dtype=np.float64)
        stats[row, :-1] = value
        stats[0, -1] = 100.0
        kaldiio.save_mat(str(path), stats)
    return apply


def _nan_first_float(state) -> None:
    import torch
    name = next(n for n, t in state.items() if torch.is_tensor(t) and t.is_floating_point())
    state[name] = torch.full_like(state[name], float("nan"))


def nan_model(path: Path) -> None:
    """final.pt with its first floating tensor NaN (checksum rewritten, as a run that diverged writes it)."""
    from asrtrain.model.files import load_checked, save_checked
    payload = load_checked(path)
    _nan_first_float(payload["model"])
    save_checked(payload, path)


def nan_checkpoints(path: Path) -> None:
    """Every epoch checkpoint under the checkpoints dir ``path`` with a NaN tensor in its avg_model."""
    from asrtrain.model.files import load_checked, save_checked
    for p in sorted(path.glob("epoch*.pt")):
        payload = load_checked(p)
        _nan_first_float(payload["avg_model"])
        save_checked(payload, p)


def check_case(world: Dict[str, Path], tmp: Path, files: Dict[str, Content], command: str, fragment) -> str:
    """Run one bad-input corpus case on a copy of ``world``: exactly one ``asrtrain: error:`` line holding
    ``fragment`` (a str or a tuple of them, with ``{tmp}``-style names of the copies). Returns the line."""
    dirs = materialize(world, tmp, files, command)
    args = [a.format(**dirs) for a in command.split()]
    err = one_error(run(*args))
    for frag in fragment if isinstance(fragment, tuple) else (fragment,):
        assert frag.format(**dirs) in err, err
    return err

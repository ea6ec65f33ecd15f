"""CMU AN4 (Census, ``an4_sphere``) into Kaldi data dirs ``train``, ``dev`` and ``test``.

Expected layout (CMU's tarball, unpacked)::

    AN4_DIR/etc/an4_train.transcription   <s> YES </s> (an251-fash-b)
    AN4_DIR/etc/an4_test.transcription    NO (an416-fjlp-b)
    AN4_DIR/wav/an4_clstk/<spk>/<name>.sph        (training audio, 16 kHz 16-bit PCM SPHERE)
    AN4_DIR/wav/an4test_clstk/<spk>/<name>.sph    (test audio)

Splits, as ESPnet's egs2/an4 does them:
- ``train``: the training transcription minus ``dev``;
- ``dev``: the first ``dev_utts`` (100) training utterances in sorted id order (ESPnet's ``train_dev``,
  ``subset_data_dir.sh --first``);
- ``test``: every test utterance that has a transcript (CMU's full copy: 130; some copies lack speaker
  fcaw's 13, giving 117). Audio without a transcript is counted and logged, never scored.

Ids are speaker first (``an251-fash-b`` -> ``fash-an251-b``), so sorting by utterance and by speaker agree,
as Kaldi's validate_data_dir.sh wants. The transcripts' ``<s>``/``</s>`` are dropped; words stay upper case.
``wav.scp`` names the SPHERE files by absolute path (soundfile reads SPHERE PCM); ``utt2dur`` comes from the
headers and ``spk2gender`` from the speaker id's first letter (f/m), as Kaldi's an4 recipes write it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union

from asrtrain.data.audio import audio_duration
from asrtrain.data.datadir import DataDir, write_datadir
from asrtrain.data.table import iter_lines
from asrtrain.errors import AsrError
from asrtrain.atomic import atomic_write_text

log = logging.getLogger(__name__)
PathLike = Union[str, Path]

#: (transcription file, audio subdirectory) of each CMU list.
LISTS = {"train": ("an4_train.transcription", "an4_clstk"), "test": ("an4_test.transcription", "an4test_clstk")}
_LINE = re.compile(r"^(?P<words>.*?)\s*\((?P<name>[^()\s]+)\)\s*$")
_SKIP = {"<s>", "</s>", "<sil>"}


def utt_id(name: str) -> Tuple[str, str]:
    """``an251-fash-b`` -> (``fash-an251-b``, ``fash``): speaker first, so ids sort by speaker."""
    parts = name.split("-")
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"expected an AN4 file name '<prompt>-<speaker>-<mic>', got '{name}'")
    return f"{parts[1]}-{parts[0]}-{parts[2]}", parts[1]


def read_transcription(path: Path) -> Dict[str, str]:
    """CMU's ``WORDS (name)`` lines -> {AN4 file name: words}; blank lines are skipped."""
    out: Dict[str, str] = {}
    for no, line in iter_lines(path):
        if not line.strip():
            continue
        m = _LINE.match(line)
        if not m:
            raise AsrError(f"expected 'WORDS (file-name)', got {line.strip()!r}", path, no,
                           fix="give CMU's an4_sphere etc/ directory unchanged")
        words = [w for w in m.group("words").split() if w.lower() not in _SKIP]
        name = m.group("name")
        if name in out:
            raise AsrError(f"utterance '{name}' is transcribed twice", path, no, fix="remove one of the lines")
        if not words:
            raise AsrError(f"utterance '{name}' has an empty transcript", path, no, fix="remove the line")
        out[name] = " ".join(words)
    return out


def find_audio(wav_dir: Path) -> Dict[str, Path]:
    """{AN4 file name: .sph path} under ``wav_dir`` (one level of speaker dirs)."""
    return {p.stem: p.resolve() for p in sorted(wav_dir.glob("*/*.sph"))}


def check_layout(an4_dir: Path) -> None:
    for split, (trans, wav) in LISTS.items():
        for need in (an4_dir / "etc" / trans, an4_dir / "wav" / wav):
            if not need.exists():
                raise AsrError(f"not a CMU AN4 directory: {need} is missing", an4_dir,
                               fix="give the an4 directory unpacked from CMU's an4_sphere.tar.gz "
                                   "(holding etc/ and wav/)")


def inputs_digest(an4_dir: Path) -> str:
    """A sha256 over what the data dirs are made from: the transcription files' bytes and every audio
    file's name, size and modification time (an edited transcript or a replaced file changes it)."""
    h = hashlib.sha256()
    for split, (trans, wav) in sorted(LISTS.items()):
        h.update(f"{split}\0".encode())
        h.update((an4_dir / "etc" / trans).read_bytes())
        for p in sorted((an4_dir / "wav" / wav).rglob("*")):
            st = p.stat()
            h.update(f"{p.relative_to(an4_dir)}\0{st.st_size}\0{st.st_mtime_ns}\0".encode("utf-8", "replace"))
    return h.hexdigest()


def _marker_params(marker: Path) -> Optional[dict]:
    """The parameters an earlier run recorded in its marker, or None (no marker, or not ours)."""
    try:
        return json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def build_split(an4_dir: Path, split: str) -> DataDir:
    """One CMU list as an in-memory data dir (every transcribed utterance that has audio)."""
    trans_name, wav_name = LISTS[split]
    trans_path = an4_dir / "etc" / trans_name
    trans = read_transcription(trans_path)
    audio = find_audio(an4_dir / "wav" / wav_name)
    missing = sorted(set(trans) - set(audio))
    if missing:
        raise AsrError(f"{len(missing)} transcribed {split} utterance(s) have no audio under "
                       f"{an4_dir / 'wav' / wav_name}, e.g. '{missing[0]}'", trans_path,
                       fix="unpack the complete an4_sphere tarball")
    untranscribed = sorted(set(audio) - set(trans))
    if untranscribed:
        log.warning("an4 %s: %d audio file(s) have no transcript and are left out (e.g. %s)", split,
                    len(untranscribed), untranscribed[0])
    utt2spk, wav, text, dur = {}, {}, {}, {}
    for name, words in trans.items():
        try:
            utt, spk = utt_id(name)
        except ValueError as err:
            raise AsrError(str(err), trans_path, fix="give CMU's an4_sphere etc/ directory unchanged") from None
        seconds = audio_duration(str(audio[name]))
        if seconds is None:
            raise AsrError(f"cannot read the header of {audio[name]}", trans_path,
                           fix="check the file (it should be 16-bit PCM SPHERE)")
        utt2spk[utt], wav[utt], text[utt], dur[utt] = spk, str(audio[name]), words, f"{seconds:.4f}"
    genders = {spk: spk[0] for spk in utt2spk.values() if spk[:1] in ("f", "m")}
    extra = {"utt2dur": dur}
    if len(genders) == len(set(utt2spk.values())):
        extra["spk2gender"] = genders
    return DataDir(utt2spk=utt2spk, wav_scp=wav, text=text, extra=extra)


def prepare_an4(an4_dir: PathLike, out_dir: PathLike, *, dev_utts: int = 100,
                force: bool = False) -> Dict[str, Path]:
    """Prepare AN4 into ``out_dir/{train,dev,test}`` (see the module doc); returns {split: path}.

    Each dir is validated (audio included) before the marker ``out_dir/.an4.done`` is written;
    a second call with the same inputs does nothing unless ``force``.
    """
    from asrtrain.data.validate import validate
    an4_dir, out_dir = Path(an4_dir), Path(out_dir)
    if dev_utts < 0:
        raise AsrError(f"--dev-utts must be >= 0, got {dev_utts}")
    check_layout(an4_dir)
    dirs = {s: out_dir / s for s in ("train", "dev", "test")}
    marker = out_dir / ".an4.done"
    params = {"an4_dir": str(an4_dir.resolve()), "dev_utts": dev_utts, "inputs": inputs_digest(an4_dir)}
    if not force and _marker_params(marker) == params \
            and all((d / "text").is_file() for d in dirs.values()):
        log.info("an4: %s is already prepared from these inputs (remove %s to redo)", out_dir, marker)
        return dirs
    marker.unlink(missing_ok=True)
    full = build_split(an4_dir, "train")
    if dev_utts >= len(full.utt2spk):
        raise AsrError(f"--dev-utts {dev_utts} leaves no training data ({len(full.utt2spk)} utterances)",
                       fix="use fewer dev utterances")
    dev: List[str] = full.utts[:dev_utts]
    parts = {"train": full.subset(sorted(set(full.utts) - set(dev))), "dev": full.subset(dev),
             "test": build_split(an4_dir, "test")}
    for split, data in parts.items():
        write_datadir(data, dirs[split])
        validate(dirs[split], audio=True)
        hours = sum(float(d) for d in data.extra["utt2dur"].values()) / 3600
        log.info("an4 %s: %d utterances, %d speakers, %d words, %.2f h", split, len(data.utt2spk),
                 len(set(data.utt2spk.values())), sum(len(t.split()) for t in data.text.values()), hours)
    atomic_write_text(marker, json.dumps(params))
    return dirs


def summary(dirs: Dict[str, Path]) -> List[str]:
    """One line per split: utterances, speakers, words, hours (read back from the written dirs)."""
    from asrtrain.data.table import read_table
    lines = []
    for split, d in dirs.items():
        text = read_table(d / "text", min_fields=1)
        spk = set(read_table(d / "utt2spk").values())
        hours = sum(float(v) for v in read_table(d / "utt2dur").values()) / 3600
        lines.append(f"{split}: {len(text)} utterances, {len(spk)} speakers, "
                     f"{sum(len(t.split()) for t in text.values())} words, {hours:.2f} h ({d})")
    return lines

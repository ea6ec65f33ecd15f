"""Fisher English (LDC2004S13 + LDC2005S13 audio, LDC2004T19 + LDC2005T19 transcripts) into a Kaldi data
dir, as Kaldi's egs/fisher_swbd/s5/local/fisher_data_prep.sh does it; combined with Switchboard it gives the
~2,000-hour training set.

- Recordings ``fe_03_00001-A`` / ``-B`` (side A = first channel of ``fe_03_00001.sph``).
- Utterances ``fe_03_00001-A-000098-000345``: transcript times times 100, truncated (Perl's ``%06d``).
- Lines holding ``((`` (uncertain transcription) are dropped, as are lines without words; ``[laugh]``
  becomes ``[laughter]`` and ``[sigh]``, ``[cough]``, ``[mn]``, ``[breath]``, ``[lipsmack]`` become
  ``[noise]``.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence

from asrtrain.corpora.ldc import Utterance, find_sph, with_audio, write_data_dir
from asrtrain.corpora.swbd import NOISE_TOKENS
from asrtrain.data.table import read_table, spk2utt_from_utt2spk, write_table
from asrtrain.errors import AsrError

log = logging.getLogger(__name__)

# The directories of the four LDC releases; part 2 audio is also distributed as fisher_eng_tr_sp_dN.
SUBDIRS = ([f"fe_03_p1_sph{i}" for i in range(1, 8)] + [f"fe_03_p2_sph{i}" for i in range(1, 8)]
           + ["fe_03_p1_tran", "fe_03_p2_tran"])
_LINE = re.compile(r"([0-9.]+)\s+([0-9.]+) ([AB]):\s*(\S.+\S|\S)\s*$")
_NOISES = (("[laugh]", "[laughter]"), ("[sigh]", "[noise]"), ("[cough]", "[noise]"), ("[mn]", "[noise]"),
           ("[breath]", "[noise]"), ("[lipsmack]", "[noise]"))


def find_fisher_subdirs(fisher_dirs: Sequence[Path]) -> Dict[str, Path]:
    """Each of ``SUBDIRS`` in one of ``fisher_dirs``, or an error listing the ones not found."""
    found: Dict[str, Path] = {}
    for sub in SUBDIRS:
        for d in fisher_dirs:
            for name in (sub, sub.replace("fe_03_p2_sph", "fisher_eng_tr_sp_d")):
                if sub not in found and (d / name).is_dir():
                    found[sub] = d / name
    missing = [s for s in SUBDIRS if s not in found]
    if missing:
        raise AsrError(f"Fisher directories not found: {', '.join(missing)} (looked in "
                       f"{', '.join(str(d) for d in fisher_dirs)}); expected fe_03_p1_sph1 .. fe_03_p1_sph7 "
                       "(LDC2004S13), fe_03_p2_sph1 .. fe_03_p2_sph7 or fisher_eng_tr_sp_d1 .. _d7 "
                       "(LDC2005S13), fe_03_p1_tran/data/trans (LDC2004T19), fe_03_p2_tran/data/trans "
                       "(LDC2005T19)",
                       fix="give the directories of all four releases, or one holding them all")
    return found


def normalize_fisher(words: str, keep_noise: bool = True) -> str:
    """Kaldi's sed mapping of Fisher's noise marks; optionally delete the noise tokens."""
    for old, new in _NOISES:
        words = words.replace(old, new)
    if not keep_noise:
        words = " ".join(w for w in words.split() if w not in NOISE_TOKENS)
    return words


def read_fisher_transcripts(files: Iterable[Path], keep_noise: bool = True) -> List[Utterance]:
    """Transcript files (``# fe_03_00001.sph`` then ``7.38 8.78 A: an- so the topic is``) -> segments."""
    out: Dict[str, Utterance] = {}
    n_lines = uncertain = empty = dups = 0
    for path in files:
        call = path.name[:-4]
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        m = re.search(r"# (.+)\.sph", lines[0]) if lines else None
        if m is None or m.group(1) != call:
            raise AsrError(f"first line should be '# {call}.sph', got {lines[0] if lines else ''!r}", path, 1,
                           fix="use the transcript files of LDC2004T19/LDC2005T19 unchanged")
        for no, line in enumerate(lines[1:], 2):
            m = _LINE.search(line)
            if m is None:
                continue
            n_lines += 1
            start, end = f"{int(float(m.group(1)) * 100.0):06d}", f"{int(float(m.group(2)) * 100.0):06d}"
            if len(end) > 6:
                raise AsrError(f"time too long ({m.group(2)} s)", path, no)
            words = m.group(4)
            if "((" in words:
                uncertain += 1
                continue
            text = normalize_fisher(words, keep_noise)
            if not text.split():
                empty += 1
                continue
            reco = f"{call}-{m.group(3)}"
            utt = f"{reco}-{start}-{end}"
            if utt in out:
                dups += 1
                continue
            out[utt] = Utterance(utt, reco, "%.2f" % (0.01 * int(start)), "%.2f" % (0.01 * int(end)),
                               " ".join(text.split()))
    log.info("fisher: %d transcript lines, %d kept; %d uncertain '((' lines, %d without words, "
             "%d duplicate ids", n_lines, len(out), uncertain, empty, dups)
    return [out[k] for k in sorted(out)]


def combine_data_dirs(dirs: Sequence[Path], out: Path) -> Path:
    """Kaldi's utils/combine_data.sh for dirs with segments: the union, sorted; a shared id is an error."""
    files = ("text", "segments", "utt2spk", "wav.scp", "reco2file_and_channel")
    tables: Dict[str, Dict[str, str]] = {f: {} for f in files}
    for d in dirs:
        for f in files:
            for key, value in read_table(Path(d) / f).items():
                if tables[f].get(key, value) != value:
                    raise AsrError(f"'{key}' differs between the data dirs being combined", Path(d) / f)
                tables[f][key] = value
    for f in files:
        write_table(out / f, tables[f])
    write_table(out / "spk2utt", spk2utt_from_utt2spk(tables["utt2spk"]))
    log.info("combined %s into %s: %d utterances", ", ".join(str(d) for d in dirs), out,
             len(tables["text"]))
    return out


def prepare_fisher(fisher_dirs: Sequence, out_dir, *, sph2pipe: Optional[str] = None, keep_noise: bool = True,
                   combine_with=None, combined_dir=None) -> Path:
    """Prepare Fisher English into the data dir ``out_dir`` (e.g. ``data/train_fisher``).

    Args:
        fisher_dirs: the LDC2004S13, LDC2005S13, LDC2004T19 and LDC2005T19 directories (or one holding the
            contents of all of them).
        out_dir: the data dir to write.
        sph2pipe: the sph2pipe program, needed only for shorten-compressed audio.
        keep_noise: keep [noise] and [laughter] as words (Kaldi), or delete them.
        combine_with: a data dir (e.g. ``data/train_nodup``) to combine with; the union goes to
            ``combined_dir`` (e.g. ``data/train_nodup_fisher``).
    """
    fisher_dirs = [Path(d) for d in ([fisher_dirs] if isinstance(fisher_dirs, (str, Path)) else fisher_dirs)]
    for d in fisher_dirs:
        if not d.is_dir():
            raise AsrError("Fisher directory not found", d, fix="give the unpacked LDC release directories")
    subdirs = find_fisher_subdirs(fisher_dirs)
    for t in ("fe_03_p1_tran", "fe_03_p2_tran"):
        if not (subdirs[t] / "data").is_dir():
            raise AsrError(f"expected the transcripts in {subdirs[t]}/data/trans/NNN/fe_03_NNNNN.txt",
                           subdirs[t], fix="give the unpacked LDC2004T19 / LDC2005T19 directories")
    trans = sorted(p for t in ("fe_03_p1_tran", "fe_03_p2_tran") for p in (subdirs[t] / "data").rglob("*")
                   if p.suffix.lower() == ".txt")
    sph: Dict[str, Path] = {}
    for sub in SUBDIRS[:14]:
        sph.update(find_sph(subdirs[sub]))
    for what, n in (("transcript", len(trans)), (".sph", len(sph))):
        if n != 11699:
            log.warning("fisher: expected 11699 %s files (both parts), found %d", what, n)
    segments = read_fisher_transcripts(trans, keep_noise)
    segments, wav, reco2fc = with_audio(segments, sph, sph2pipe, "fisher")
    if not segments:
        raise AsrError("no Fisher utterance has both a transcript and audio", fisher_dirs[0])
    out_dir = Path(out_dir)
    write_data_dir(out_dir, segments, wav, reco2fc)
    log.info("fisher: wrote %s (%d utterances, %d sides)", out_dir, len(segments), len(wav))
    if combine_with is not None:
        if combined_dir is None:
            raise AsrError("combine_with needs combined_dir (where the union goes)")
        combine_data_dirs([Path(combine_with), out_dir], Path(combined_dir))
    return out_dir


__all__ = ["prepare_fisher", "combine_data_dirs", "normalize_fisher", "find_fisher_subdirs", "SUBDIRS"]

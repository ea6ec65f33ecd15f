"""Hub5-2000 (LDC2002S09 audio + LDC2002T43 references) into a Kaldi data dir, as Kaldi's
egs/swbd/s5c/local/eval2000_data_prep.sh does it.

- Recordings ``en_4156-A`` / ``sw_4390-B`` from ``english/*.sph`` (side A = first channel).
- Segments from ``english/hub5e_00.pem``; utterance ids ``en_4156-A_030185-030248`` use the pem times times
  100, *truncated* (awk's ``%06d``), and the segment times are then widened by 0.1 s on each side without
  making neighbours overlap (Kaldi's local/extend_segments.pl), printed with two decimals.
- ``text`` is the stm's words as they are (fields 7 on); segments marked IGNORE_TIME_SEGMENT_IN_SCORING are
  left out of the data dir. The text is not used for scoring: ``stm`` and ``glm`` are, copied into the
  data dir (the stm with Kaldi's fixes: the first ``((`` of a line becomes ``(`` and asides are removed).
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from asrtrain.corpora.ldc import Utterance, find_sph, wav_scp_entries, write_data_dir
from asrtrain.errors import AsrError
from asrtrain.atomic import atomic_open, atomic_write_text

log = logging.getLogger(__name__)

PEM = "hub5e_00.pem"
STM = "hub5e00.english.000405.stm"
GLM = "en20000405_hub5.glm"


def find_hub5_audio(audio_dir: Path) -> Path:
    """The ``english`` directory of LDC2002S09 (holding ``*.sph`` and ``hub5e_00.pem``), or an error."""
    for cand in (audio_dir / "english", audio_dir / "hub5e_00" / "english"):
        if (cand / PEM).is_file():
            return cand
    raise AsrError(f"not an LDC2002S09 directory: expected {audio_dir}/english/{PEM} and "
                   f"{audio_dir}/english/{{en,sw}}_NNNN.sph (or the same under {audio_dir}/hub5e_00/)",
                   audio_dir, fix="give the hub5e_00 directory of LDC2002S09")


def find_hub5_reference(text_dir: Path) -> Path:
    """The ``reference`` directory of LDC2002T43 (holding the stm and the glm), or an error."""
    for cand in (text_dir / "reference", text_dir / "2000_hub5_eng_eval_tr" / "reference"):
        if (cand / STM).is_file() and (cand / GLM).is_file():
            return cand
    raise AsrError(f"not an LDC2002T43 directory: expected {text_dir}/reference/{STM} and "
                   f"{text_dir}/reference/{GLM} (or the same under {text_dir}/2000_hub5_eng_eval_tr/)",
                   text_dir, fix="give the LDC2002T43 directory")


def _utt(fields: List[str], path: Path, no: int) -> Tuple[str, str]:
    """``en_4156 A ... 301.85 302.48`` -> ``("en_4156-A_030185-030248", "en_4156-A")``."""
    if len(fields) < 5:
        raise AsrError(f"expected '<file> <channel> <speaker> <start> <end> ...', got {' '.join(fields)!r}",
                       path, no)
    spk = f"{fields[0]}-{fields[1]}"
    try:
        # awk's printf %06d truncates toward zero: 301.85 * 100 = 30184.999... would give 030184
        return f"{spk}_{int(float(fields[3]) * 100):06d}-{int(float(fields[4]) * 100):06d}", spk
    except ValueError:
        raise AsrError(f"bad times {fields[3]!r} {fields[4]!r}", path, no) from None


def extend_segments(rows: List[Tuple[str, str, float, float]], extend: float
                    ) -> List[Tuple[str, str, float, float]]:
    """Kaldi's local/extend_segments.pl: widen each segment by ``extend`` seconds on both sides.

    Per recording, in order of start time: the first start and the last end move by ``extend`` (not below
    0); between neighbours each side moves by at most half the gap, and neighbours that already overlap are
    left alone. The order of ``rows`` is kept.
    """
    rows = [list(r) for r in rows]
    by_reco: Dict[str, List[int]] = {}
    for i, r in enumerate(rows):
        by_reco.setdefault(r[1], []).append(i)
    for reco, idx in by_reco.items():
        idx = sorted(idx, key=lambda i: rows[i][2])
        rows[idx[0]][2] = max(rows[idx[0]][2] - extend, 0.0)
        rows[idx[-1]][3] = rows[idx[-1]][3] + extend
        for a, b in zip(idx, idx[1:]):
            end, start = rows[a][3], rows[b][2]
            if end > start:
                log.warning("eval2000: segments %s and %s already overlap; leaving their times",
                            rows[a][0], rows[b][0])
                continue
            step = min(extend, 0.5 * (start - end))
            rows[a][3] = end + step
            rows[b][2] = start - step
    return [tuple(r) for r in rows]


def read_pem(pem: Path) -> List[Utterance]:
    """Segments of the pem, sorted unique, extended by 0.1 s (text left empty)."""
    lines = set()
    for no, line in enumerate(pem.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if ";;" in line or not line.split():
            continue
        fields = line.split()
        uid, spk = _utt(fields, pem, no)
        lines.add(f"{uid} {spk} {fields[3]} {fields[4]}")  # `sort -u` of the awk output
    rows = [(u, s, float(a), float(b)) for u, s, a, b in (ln.split() for ln in sorted(lines))]
    ids = [r[0] for r in rows]
    if len(set(ids)) != len(ids):
        raise AsrError("two pem segments of one side get the same id (same times in centiseconds)", pem,
                       fix="remove the duplicate line from the pem")
    return [Utterance(u, s, "%.2f" % a, "%.2f" % b, "") for u, s, a, b in extend_segments(rows, 0.1)]


def read_stm_text(stm: Path) -> Dict[str, str]:
    """``{utt_id: words}`` of every stm segment (comments skipped; words are fields 7 on, as they are)."""
    out: Dict[str, str] = {}
    for no, line in enumerate(stm.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if ";;" in line or not line.split():
            continue
        fields = line.split()
        uid, _ = _utt(fields, stm, no)
        out[uid] = " ".join(fields[6:])
    return dict(sorted(out.items()))


def fix_stm(data: bytes) -> bytes:
    """Kaldi's ``sed -e 's:((:(:' -e 's:<B_ASIDE>::g' -e 's:<E_ASIDE>::g'`` (hubscr.pl trips on these).

    Works on bytes so that everything else in the reference is copied unchanged.
    """
    out = []
    for line in data.splitlines(keepends=True):
        line = line.replace(b"((", b"(", 1)
        out.append(line.replace(b"<B_ASIDE>", b"").replace(b"<E_ASIDE>", b""))
    return b"".join(out)


def prepare_eval2000(hub5_audio_dir, hub5_text_dir, out_dir, *, sph2pipe: Optional[str] = None,
                     force: bool = False) -> Path:
    """Prepare Hub5-2000 into the data dir ``out_dir`` (e.g. ``data/eval2000``), stm and glm included.

    Args:
        hub5_audio_dir: LDC2002S09's ``hub5e_00`` directory (holding ``english/``), or its parent.
        hub5_text_dir: LDC2002T43's directory (holding ``reference/`` or ``2000_hub5_eng_eval_tr/reference``).
        out_dir: the data dir to write.
        sph2pipe: the sph2pipe program, needed only if the audio is shorten-compressed.
        force: redo the work even if a marker says it is done with the same inputs.
    """
    hub5_audio_dir, hub5_text_dir, out_dir = Path(hub5_audio_dir), Path(hub5_text_dir), Path(out_dir)
    params = {"audio": str(hub5_audio_dir.resolve()), "text": str(hub5_text_dir.resolve()),
              "sph2pipe": sph2pipe}
    marker = out_dir / ".eval2000.done"
    if not force and marker.is_file() and json.loads(marker.read_text()) == params \
            and all((out_dir / f).is_file() for f in ("text", "segments", "wav.scp", "stm", "glm")):
        log.info("eval2000: %s is already prepared from these inputs (remove %s to redo)", out_dir, marker)
        return out_dir
    english = find_hub5_audio(hub5_audio_dir)
    reference = find_hub5_reference(hub5_text_dir)
    pem_segments = read_pem(english / PEM)
    text_all = read_stm_text(reference / STM)
    pem_ids = sorted(s.utt for s in pem_segments)
    if pem_ids != list(text_all):
        only_pem = sorted(set(pem_ids) - set(text_all))
        only_stm = sorted(set(text_all) - set(pem_ids))
        raise AsrError(f"segments from the pem and the stm do not match: {len(only_pem)} only in the pem "
                       f"(e.g. {only_pem[:1]}), {len(only_stm)} only in the stm (e.g. {only_stm[:1]})",
                       english / PEM, fix="use the pem of LDC2002S09 with the stm of LDC2002T43")
    segments = [s._replace(text=text_all[s.utt]) for s in pem_segments
                if not re.search("IGNORE_TIME_SEGMENT_", text_all[s.utt])]
    log.info("eval2000: %d pem segments, %d scored (%d IGNORE_TIME_SEGMENT_IN_SCORING left out)",
             len(pem_segments), len(segments), len(pem_segments) - len(segments))
    sph = find_sph(english)
    recos = sorted({s.reco for s in segments})
    wav, reco2fc = wav_scp_entries(sph, recos, sph2pipe)
    missing = [r for r in recos if r not in wav]
    if missing:
        raise AsrError(f"{len(missing)} conversation sides of the pem have no audio, e.g. "
                       f"{english}/{missing[0].rsplit('-', 1)[0]}.sph", english,
                       fix="copy the complete english/ directory of LDC2002S09")
    if len(wav) != 80:
        log.warning("eval2000: expected 80 conversation sides (Hub5-2000), found %d", len(wav))
    write_data_dir(out_dir, segments, wav, reco2fc)
    stm, glm = fix_stm((reference / STM).read_bytes()), (reference / GLM).read_bytes()
    for name, data in (("stm", stm), ("glm", glm)):
        with atomic_open(out_dir / name, "wb") as fh:
            fh.write(data)
    atomic_write_text(marker, json.dumps(params))
    log.info("eval2000: wrote %s (%d utterances, %d sides)", out_dir, len(segments), len(wav))
    return out_dir


__all__ = ["prepare_eval2000", "extend_segments", "fix_stm", "find_hub5_audio", "find_hub5_reference"]

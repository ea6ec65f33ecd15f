"""Switchboard-1 Release 2 (LDC97S62) into Kaldi data dirs, as Kaldi's egs/swbd/s5c does it.

Mirrors ``local/swbd1_data_prep.sh``, ``local/swbd1_map_words.pl``, the acronym steps of
``local/swbd1_prepare_dict.sh`` (``format_acronyms_dict.py`` + ``map_acronyms_transcripts.py``), the dev
split of ``run.sh`` (``utils/subset_data_dir.sh --first data/train 4000``) and
``local/remove_dup_utts.sh 300``. Ids match Kaldi's byte for byte:

- recording ``sw02001-A`` (conversation ``sw02001``, side A = first channel of ``sw02001.sph``);
- utterance ``sw02001-A_000098-001156``: start and end in centiseconds, ``int(100 * t + 0.5)``;
- speaker = conversation side, so utt2spk maps an utterance to its recording id.

Outputs under ``out_dir``: ``train`` (everything), ``train_dev`` (first ``dev_utts``), ``train_nodev``
(the rest) and ``train_nodup`` (``train_nodev`` with over-represented transcripts thinned out).
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from asrtrain.corpora.ldc import (Utterance, find_sph, keep_first, keep_last, remove_dup_utts, with_audio,
                                  write_data_dir)
from asrtrain.errors import AsrError
from asrtrain.atomic import atomic_write_text

log = logging.getLogger(__name__)

NOISE_TOKENS = ("[noise]", "[laughter]", "[vocalized-noise]")

# Letter pronunciations in the Mississippi State phone set (Kaldi's local/MSU_single_letter.txt):
# a word whose pronunciation is its letters spelled out is an acronym.
LETTER_PRONS = {
    "A": "ey", "B": "b iy", "C": "s iy", "D": "d iy", "E": "iy", "F": "eh f", "G": "jh iy", "H": "ey ch",
    "I": "ay", "J": "jh ey", "K": "k ey", "L": "eh l", "M": "eh m", "N": "eh n", "O": "ow", "P": "p iy",
    "Q": "k y uw", "R": "aa r", "S": "eh s", "T": "t iy", "U": "y uw", "V": "v iy",
    "W": "d ah b ax l y uw", "X": "eh k s", "Y": "w ay", "Z": "z iy",
}
# Entries swbd1_prepare_dict.sh puts in front of the dictionary before mapping it.
_EXTRA_LEXICON = ("!sil sil", "[vocalized-noise] spn", "[noise] nsn", "[laughter] lau", "<unk> spn")

# swbd1_map_words.pl, one substitution per line, each applied once (Perl s/// without /g) in order.
_NB = r"[^\]\[]"  # Perl's [^][]
_MAP_RULES: Sequence[Tuple["re.Pattern[str]", object]] = (
    # [laughter-story] -> story, keeping a trailing '-'. (The Perl's leading (|\-)^ can only be empty.)
    (re.compile(r"^\[LAUGHTER-(.+)\](|-)$", re.I), r"\1\2"),
    # [it'n/isn't] -> it'n (the pronounced form; may still hold partial-word brackets, handled below)
    (re.compile(r"^\[(.+)/.+\](|-)$"), r"\1\2"),
    # -[an]y -> -y (the leading '-' is sometimes missing in the input)
    (re.compile(r"^(|-)\[" + _NB + r"+\](.+)$"), r"-\2"),
    # ab[solute]- -> ab- (the trailing '-' is sometimes missing in the input)
    (re.compile(r"^(.+)\[" + _NB + r"+\](|-)$"), r"\1-"),
    # ex[specially]-/especially] -> ex (a mistake in the input)
    (re.compile(r"(" + _NB + r"+)\[.+\]$"), r"\1"),
    # {yuppiedom} -> yuppiedom
    (re.compile(r"^\{(.+)\}$"), r"\1"),
    # ammu[n]it-: the Perl replacement "$1-$3" refers to an undefined $3 and $1 holds the last bracketed
    # character, so Kaldi really writes "ammn-t-"; we reproduce what Kaldi does, not what its comment says.
    (re.compile(r"[A-Z]\[(" + _NB + r")+\][A-Z]", re.I), lambda m: m.group(1) + "-"),
    # them_1 -> them, them_1's -> them's
    (re.compile(r"_\d"), ""),
)


def map_word(word: str) -> str:
    """Apply Kaldi's swbd1_map_words.pl to one token (see the rules above)."""
    for pattern, repl in _MAP_RULES:
        word = pattern.sub(repl, word, count=1)
    return word


def build_acronym_map(dict_path: Path) -> Dict[str, str]:
    """The ``acronyms.map`` of swbd1_prepare_dict.sh: ``{"ibm": "i._b._m.", ...}`` from sw-ms98-dict.text.

    The lexicon is the dictionary (``#`` comments dropped) plus the noise entries and the spelled letters,
    with swbd1_map_words.pl applied to the words, sorted and unique, then scanned by the rules of Kaldi's
    format_acronyms_dict.py. (Kaldi also applies local/dict.patch, a few corrections to the dictionary that
    we do not ship; it adds no acronyms that we know of.)
    """
    lines = list(_EXTRA_LEXICON)
    for line in dict_path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.startswith("#") and line.split():
            lines.append(line)
    lines += [f"{k} {v}" for k, v in LETTER_PRONS.items()]
    lexicon = sorted({" ".join([map_word(ln.split()[0])] + ln.split()[1:]) for ln in lines})
    entries = set()
    for entry in lexicon:
        word, _, pron = entry.partition(" ")
        if not pron or not re.match(r"^[A-Za-z]+$|^[A-Za-z]+'s$|^[A-Za-z]+s$", word):
            continue
        if word.endswith("'s") and pron[-1] in "sz":
            stem, stem_pron, suffix = word[:-2], pron[:-2], ".'s"
        elif word.endswith("s") and pron[-1] in "sz":
            stem, stem_pron, suffix = word[:-1], pron[:-2], ".s"
        elif "'" not in word and not word.endswith("s"):
            stem, stem_pron, suffix = word, pron, "."
        else:
            continue
        if stem and " ".join(LETTER_PRONS[c.upper()] for c in stem) == stem_pron:
            entries.add((word, "._".join(c.lower() for c in stem) + suffix))
    out: Dict[str, str] = {}
    for word, mapped in sorted(entries):  # Kaldi reads the sort -u'ed map; the last line of a word wins
        out[word] = mapped
    return out


def normalize_words(words: Sequence[str], acronyms: Optional[Dict[str, str]] = None,
                    keep_noise: bool = True) -> List[str]:
    """Words of one ms98 segment -> Kaldi's training text (lower case), [silence] and asides removed.

    Kaldi's map_acronyms_transcripts.py never maps "i" (the pronoun); its first pass, which joins an
    upper-case "I" into a run of capital letters, cannot fire on the lower-case ms98 text, so it is left out.
    """
    line = re.sub(r"<B_ASIDE>|<E_ASIDE>", "", " ".join(words), flags=re.I)
    # Kaldi removes " [silence] " with one regex pass that misses a second [silence] right after a first
    # one; we drop every [silence] token.
    out = [map_word(w) for w in line.split() if w.lower() != "[silence]"]
    out = " ".join(out).split()  # a token mapped to "" disappears, as in Kaldi's later re-splits
    if acronyms:
        out = [acronyms.get(w, w) if w not in ("i", "I") else w for w in out]
    out = [w.lower() for w in out]
    if not keep_noise:
        out = [w for w in out if w not in NOISE_TOKENS]
    return out


def utt_id(ms98_id: str, start: str, end: str) -> Tuple[str, str]:
    """``("sw2001A-ms98-a-0002", "0.977625", "11.561375")`` -> ``("sw02001-A_000098-001156", "sw02001-A")``.
    """
    name = "sw0" + ms98_id[2:6]
    reco = f"{name}-{ms98_id[6]}"
    begin = int(100 * float(start) + 0.5)
    finish = int(100 * float(end) + 0.5)
    return f"{reco}_{begin:06d}-{finish:06d}", reco


def _centiseconds(text: str) -> str:
    """``"000098"`` -> ``"0.98"``: awk's ``startf/100`` printed with ``%.6g``, as Kaldi's segments file."""
    return "%.6g" % (int(text) / 100)


def find_transcripts(swbd_dir: Path, trans_dir: Optional[Path]) -> Path:
    """Locate ``swb_ms98_transcriptions`` (the ISIP word alignments that Kaldi downloads) or explain."""
    candidates = [trans_dir] if trans_dir is not None else [
        swbd_dir / "swb_ms98_transcriptions",
        swbd_dir / "transcriptions" / "swb_ms98_transcriptions",
        swbd_dir.parent / "swb_ms98_transcriptions",
    ]
    for cand in candidates:
        if cand is not None and any(cand.glob("*/*/*-trans.text")):
            return cand
    tried = ", ".join(f"{c}/NN/NNNN/swNNNN[AB]-ms98-a-trans.text" for c in candidates)
    raise AsrError(f"no Switchboard ms98 transcripts found; looked for {tried}",
                   fix="unpack switchboard_word_alignments.tar.gz (openslr.org/resources/5) there, "
                       "or pass --trans-dir DIR/swb_ms98_transcriptions")


def find_swbd_audio_root(swbd_dir: Path) -> Path:
    """The LDC97S62 directory holding ``swb1_d1`` .. ``swb1_d4``, or an error listing what is expected."""
    if not swbd_dir.is_dir():
        raise AsrError("Switchboard directory not found", swbd_dir,
                       fix="give the LDC97S62 directory holding swb1_d1 .. swb1_d4")
    # the discs sit in swbd_dir itself, or one or two levels down (swb1_LDC97S62/, or a site's own wrapper)
    roots = [swbd_dir] + sorted({d.parent for pattern in ("*/swb1_d[1-4]", "*/*/swb1_d[1-4]")
                                 for d in swbd_dir.glob(pattern) if d.is_dir()})
    for root in roots:
        discs = [d for d in (root / f"swb1_d{i}" / "data" for i in range(1, 5)) if d.is_dir()]
        if discs:
            if len(discs) < 4:
                log.warning("only %d of the 4 LDC97S62 discs found under %s: %s", len(discs), root,
                            ", ".join(str(d.parent.name) for d in discs))
            return root
    expected = ", ".join(f"{swbd_dir}/swb1_d{i}/data/swNNNNN.sph" for i in range(1, 5))
    raise AsrError(f"not an LDC97S62 directory: expected {expected} "
                   f"(or the same one or two levels down, e.g. under {swbd_dir}/swb1_LDC97S62/)", swbd_dir,
                   fix="point at the unpacked Switchboard-1 Release 2 corpus")


def read_ms98(trans_root: Path) -> List[Tuple[str, str, str, List[str], Path, int]]:
    """All ``*-trans.text`` lines as ``(ms98_id, start, end, words, file, line_no)`` (Kaldi globs */*/)."""
    rows = []
    files = sorted(trans_root.glob("*/*/*-trans.text"))
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise AsrError(f"not valid UTF-8 at byte {err.start}", path,
                           fix="use the ms98 transcripts as distributed (plain ASCII)") from None
        for no, line in enumerate(text.splitlines(), 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) < 3 or not re.match(r"^sw\d{4}[AB]-ms98", parts[0]):
                raise AsrError(f"not an ms98 transcript line: {line!r}", path, no,
                               fix="expected 'swNNNN[AB]-ms98-a-NNNN <start> <end> words...'")
            rows.append((parts[0], parts[1], parts[2], parts[3:], path, no))
    log.info("read %d segments from %d ms98 transcript files", len(rows), len(files))
    return rows


def build_segments(rows, acronyms: Optional[Dict[str, str]], keep_noise: bool) -> List[Utterance]:
    """ms98 rows -> normalised, Kaldi-named segments; logs how many were dropped and why."""
    out: Dict[str, Utterance] = {}
    empty = dups = bad_times = 0
    for ms98_id, start, end, words, path, no in rows:
        try:
            uid, reco = utt_id(ms98_id, start, end)
        except ValueError:
            raise AsrError(f"bad start/end times {start!r} {end!r}", path, no) from None
        text = normalize_words(words, acronyms, keep_noise)
        if not text:
            empty += 1
            continue
        begin, finish = uid.rsplit("_", 1)[1].split("-")
        if int(finish) <= int(begin):
            bad_times += 1  # Kaldi's feature extraction fails on these and fix_data_dir drops them
            continue
        if uid in out:
            dups += 1
            continue
        out[uid] = Utterance(uid, reco, _centiseconds(begin), _centiseconds(finish), " ".join(text))
    log.info("swbd: %d segments in, %d kept; %d without words after removing [silence]/asides%s, "
             "%d of zero length, %d duplicate ids", len(rows), len(out), empty,
             "" if keep_noise else "/noise", bad_times, dups)
    return [out[k] for k in sorted(out)]


def prepare_swbd(swbd_dir, out_dir, *, trans_dir=None, sph2pipe: Optional[str] = None,
                 dev_utts: int = 4000, max_dup: int = 300, keep_noise: bool = True,
                 acronyms: bool = True, force: bool = False) -> Dict[str, Path]:
    """Prepare LDC97S62 into ``out_dir/{train,train_dev,train_nodev,train_nodup}``.

    Args:
        swbd_dir: the LDC97S62 directory (``swb1_d1`` .. ``swb1_d4`` with ``data/*.sph``), or its parent
            holding ``swb1_LDC97S62/``.
        out_dir: where the data dirs go (e.g. ``data``).
        trans_dir: the ``swb_ms98_transcriptions`` directory; by default looked for inside ``swbd_dir``,
            ``swbd_dir/transcriptions`` or beside ``swbd_dir``.
        sph2pipe: the sph2pipe program for shorten-compressed audio (default: found on PATH).
        dev_utts: the first N utterances (sorted ids) form ``train_dev``, as in Kaldi's run.sh.
        max_dup: a transcript seen N or more times is thinned to about N copies in ``train_nodup``.
        keep_noise: keep [noise], [laughter], [vocalized-noise] as words (Kaldi), or delete them.
        acronyms: map acronyms to Fisher's convention (``ibm`` -> ``i._b._m.``) as Kaldi's s5c does; needs
            ``sw-ms98-dict.text`` in the transcripts directory.
        force: redo the work even if a marker says it is done with the same options.

    Returns the four data dirs by name.
    """
    swbd_dir, out_dir = Path(swbd_dir), Path(out_dir)
    names = ("train", "train_dev", "train_nodev", "train_nodup")
    dirs = {n: out_dir / n for n in names}
    params = {"swbd_dir": str(swbd_dir.resolve()), "trans_dir": str(trans_dir), "sph2pipe": sph2pipe,
              "dev_utts": dev_utts, "max_dup": max_dup, "keep_noise": keep_noise, "acronyms": acronyms}
    marker = out_dir / ".swbd.done"
    if not force and marker.is_file() and json.loads(marker.read_text()) == params \
            and all((d / "text").is_file() for d in dirs.values()):
        log.info("swbd: %s is already prepared with these options (remove %s to redo)", out_dir, marker)
        return dirs
    if dev_utts < 0 or max_dup < 2:
        raise AsrError("--dev-utts must be >= 0 and --max-dup >= 2")

    audio_root = find_swbd_audio_root(swbd_dir)
    trans_root = find_transcripts(swbd_dir, None if trans_dir is None else Path(trans_dir))
    acronym_map = None
    if acronyms:
        dict_path = trans_root / "sw-ms98-dict.text"
        if not dict_path.is_file():
            raise AsrError("the acronym mapping needs the ms98 dictionary, which is missing", dict_path,
                           fix="unpack the complete switchboard_word_alignments.tar.gz, "
                               "or pass --no-acronyms")
        acronym_map = build_acronym_map(dict_path)
        log.info("swbd: %d acronyms in %s", len(acronym_map), dict_path)

    sph = find_sph(audio_root)
    if len(sph) not in (2435, 2438):
        log.warning("swbd: expected 2435 or 2438 .sph files (LDC97S62), found %d", len(sph))
    segments = build_segments(read_ms98(trans_root), acronym_map, keep_noise)
    segments, wav, reco2fc = with_audio(segments, sph, sph2pipe, "swbd")
    if not segments:
        raise AsrError("no utterance has both a transcript and audio", swbd_dir,
                       fix="check that the ms98 transcripts belong to this LDC97S62 copy")

    write_data_dir(dirs["train"], segments, wav, reco2fc)
    write_data_dir(dirs["train_dev"], keep_first(segments, dev_utts), wav, reco2fc)
    nodev = keep_last(segments, max(len(segments) - dev_utts, 0))
    if not nodev:
        log.warning("swbd: all %d utterances went to train_dev (--dev-utts %d): train_nodev and train_nodup "
                    "are empty", len(segments), dev_utts)
    write_data_dir(dirs["train_nodev"], nodev, wav, reco2fc)
    nodup = remove_dup_utts(nodev, max_dup)
    write_data_dir(dirs["train_nodup"], nodup, wav, reco2fc)
    log.info("swbd: train %d, train_dev %d, train_nodev %d, train_nodup %d utterances",
             len(segments), min(dev_utts, len(segments)), len(nodev), len(nodup))
    atomic_write_text(marker, json.dumps(params))
    return dirs


__all__ = ["prepare_swbd", "map_word", "normalize_words", "build_acronym_map", "utt_id",
           "find_swbd_audio_root", "find_transcripts", "NOISE_TOKENS", "LETTER_PRONS"]

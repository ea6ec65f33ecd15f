"""Kaldi's data-dir selection tools: :func:`subset` (utils/subset_data_dir.sh) and :func:`split`
(utils/split_data.sh). Both check their input with :func:`asrtrain.data.validate.validate` (audio headers
left alone) and write full data dirs, the descriptive files of a features dir copied along.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import replace
from pathlib import Path
from typing import List, Optional, Sequence

from asrtrain.data.datadir import DESCRIPTIVE_FILES, DataDir, PathLike, write_datadir
from asrtrain.data.table import read_table_lines
from asrtrain.data.validate import validate
from asrtrain.errors import AsrError
from asrtrain.atomic import check_out_is_not_input

log = logging.getLogger(__name__)


def _read_id_list(path: PathLike) -> List[str]:
    return [key for _, key, _ in read_table_lines(path)]


def _copy_descriptive(src: Path, out: Path) -> None:
    for name in DESCRIPTIVE_FILES:
        if (src / name).exists():
            shutil.copy2(src / name, out / name)


def subset(path: PathLike, out: PathLike, *, utt_list: Optional[PathLike] = None,
           first: Optional[int] = None, last: Optional[int] = None,
           spk_list: Optional[PathLike] = None) -> DataDir:
    """Write a subset of a data dir to ``out`` (subset_data_dir.sh). Exactly one selector is given:
    ``utt_list`` / ``spk_list`` (files whose first field is an id), or the ``first`` / ``last`` N
    utterances in sorted order (N above the count is an error, as in subset_data_dir.sh). Ids listed but
    absent are counted and logged."""
    chosen = [x is not None for x in (utt_list, first, last, spk_list)]
    if sum(chosen) != 1:
        raise AsrError("give exactly one of --utt-list, --first, --last, --spk-list")
    check_out_is_not_input(path, out, "the subset would replace the data dir")
    data = validate(path, audio=False)
    utts = data.utts
    if utt_list is not None:
        wanted = _read_id_list(utt_list)
        missing = [u for u in wanted if u not in data.utt2spk]
        sel = [u for u in wanted if u in data.utt2spk]
    elif spk_list is not None:
        spk2utt = data.spk2utt
        wanted = _read_id_list(spk_list)
        missing = [s for s in wanted if s not in spk2utt]
        sel = [u for s in wanted if s in spk2utt for u in spk2utt[s]]
    else:
        n = first if first is not None else last
        if n < 0:
            raise AsrError(f"--first/--last must be >= 0, got {n}")
        if n > len(utts):
            option = "--first" if first is not None else "--last"
            raise AsrError(f"{option} {n}: the data dir has only {len(utts)} utterances (subset_data_dir.sh "
                           "refuses to subset to more than it has)", Path(path) / "utt2spk",
                           fix=f"ask for {option} {len(utts)} or fewer, or copy the whole dir")
        missing = []
        sel = utts[:n] if first is not None else utts[max(0, len(utts) - n):] if n else []
    if missing:
        log.warning("subset: %d listed ids are not in %s (e.g. '%s')", len(missing), path, missing[0])
    result = data.subset(sel)
    if not result.utt2spk:
        given = (("utt-list", utt_list), ("spk-list", spk_list), ("first", first), ("last", last))
        selector = next(f"--{name} {value}" for name, value in given if value is not None)
        raise AsrError(f"{selector} selects none of the {len(utts)} utterances of {path}: nothing to "
                       "write", fix="list ids that are in the data dir, or ask for N >= 1")
    out = Path(out)
    write_datadir(result, out)
    _copy_descriptive(Path(path), out)
    log.info("subset %s -> %s: %d utterances in, %d out", path, out, len(utts), len(result.utt2spk))
    return replace(result, path=out)


def split_speakers(counts: Sequence[int], n: int) -> List[int]:
    """Cut points splitting speakers (in order, with ``counts`` utterances each) into ``n`` contiguous
    groups of near-equal utterance totals; returns the start index of each group."""
    total, starts, cum, i = sum(counts), [0], 0, 0
    prefix = [0]
    for c in counts:
        cum += c
        prefix.append(cum)
    for k in range(1, n):
        target = total * k / n
        lo, hi = starts[-1] + 1, len(counts) - (n - k)  # each group keeps at least one speaker
        i = min(range(lo, hi + 1), key=lambda j: (abs(prefix[j] - target), j))
        starts.append(i)
    return starts


def split(path: PathLike, n: int) -> List[Path]:
    """Split by speaker into ``DIR/split<n>/1 .. n`` (split_data.sh); each part is a full data dir."""
    if n < 1:
        raise AsrError(f"number of splits must be >= 1, got {n}")
    path = Path(path)
    data = validate(path, audio=False)
    spk2utt = data.spk2utt
    speakers = sorted(spk2utt)
    if n > len(speakers):
        raise AsrError(f"cannot split {len(speakers)} speakers into {n} parts", path / "spk2utt",
                       fix=f"use at most {len(speakers)} splits")
    starts = split_speakers([len(spk2utt[s]) for s in speakers], n) + [len(speakers)]
    outs, sizes = [], []
    for j in range(n):
        part = data.subset(u for s in speakers[starts[j]:starts[j + 1]] for u in spk2utt[s])
        out = path / f"split{n}" / str(j + 1)
        write_datadir(part, out)
        _copy_descriptive(path, out)
        outs.append(out)
        sizes.append(len(part.utt2spk))
    log.info("split %s (%d utterances) into %d parts by speaker: %s utterances", path, len(data.utt2spk), n,
             " + ".join(map(str, sizes)))
    return outs

#!/usr/bin/env python3
"""Pack AN4's prepared data dirs with their audio as FLAC, to carry them to a machine without the corpus.

``scripts/an4_sweep.py --data OUT/data --flac-dir OUT/flac`` reads what this writes: OUT/data/{train,dev,test}
are the data dirs ``asrtrain prepare an4`` wrote, every file copied, except that each ``wav.scp`` line reads
``ID @FLAC@/ID.flac``, and OUT/flac/ID.flac holds the same samples losslessly (16-bit PCM, the rate of the
source). FLAC is about half of the SPHERE files' size here, which is what lets the audio, the wheels and
the tree fit one call's 64 MiB on the device machine (``../shared/device/README.md``).

    python scripts/an4_pack.py DATA OUT      # DATA: asrtrain prepare an4 AN4_DIR DATA

Every audio file is read back after it is written and compared sample for sample; a mismatch, an entry
that is not a plain path (a pipe) or an id that cannot be a file name stops with one line naming the
wav.scp line.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import soundfile as sf

from asrtrain.data.table import read_table_lines, write_table
from asrtrain.errors import AsrError

PARTS = ("train", "dev", "test")


def fail(msg: str) -> None:
    sys.exit(f"an4_pack: {msg}")


def pack_part(src: Path, dst: Path, flac: Path) -> tuple[int, int]:
    """Copy one data dir to ``dst`` with its audio as FLAC under ``flac``; (utterances, FLAC bytes)."""
    dst.mkdir(parents=True, exist_ok=True)
    rows, nbytes = [], 0
    scp = src / "wav.scp"
    for n, utt, path in read_table_lines(scp):
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", utt):
            raise AsrError(f"utterance id {utt!r} cannot be a file name", scp, n,
                           fix="keep ids to letters, digits, '_', '.', '-'")
        if not path or path.endswith("|") or not Path(path).is_file():
            raise AsrError(f"{path!r} is not an audio file on disk", scp, n,
                           fix="pack the data dirs `asrtrain prepare an4` wrote (plain .sph paths)")
        try:
            samples, rate = sf.read(path, dtype="int16")
        except (RuntimeError, sf.LibsndfileError) as err:
            raise AsrError(f"cannot read {path} ({err})", scp, n,
                           fix="check the file or re-extract the corpus") from None
        out = flac / f"{utt}.flac"
        tmp = out.with_suffix(".flac.tmp")
        sf.write(tmp, samples, rate, format="FLAC", subtype="PCM_16")
        back, back_rate = sf.read(tmp, dtype="int16")
        if back_rate != rate or not np.array_equal(back, samples):
            tmp.unlink()
            raise AsrError(f"{out} does not read back as {path}'s samples; nothing was kept", scp, n,
                           fix="check libsndfile's FLAC support (python -m soundfile)")
        os.replace(tmp, out)
        nbytes += out.stat().st_size
        rows.append((utt, f"@FLAC@/{utt}.flac"))
    for f in src.iterdir():
        if f.is_file() and f.name != "wav.scp":
            shutil.copy(f, dst / f.name)
    write_table(dst / "wav.scp", rows, sort=False)  # the source's order, which Kaldi's sort already is
    return len(rows), nbytes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data", type=Path, help="the data dirs `asrtrain prepare an4` wrote (train/ dev/ test/)")
    ap.add_argument("out", type=Path, help="writes OUT/data/{train,dev,test} and OUT/flac/")
    args = ap.parse_args()
    for part in PARTS:
        if not (args.data / part / "wav.scp").is_file():
            fail(f"{args.data / part / 'wav.scp'} not found; "
                 "give the dir `asrtrain prepare an4 AN4_DIR DATA` wrote")
    flac = args.out / "flac"
    flac.mkdir(parents=True, exist_ok=True)
    total = 0
    for part in PARTS:
        try:
            utts, nbytes = pack_part(args.data / part, args.out / "data" / part, flac)
        except AsrError as err:  # one line naming the wav.scp line and the fix
            fail(str(err))
        total += nbytes
        print(f"{part}: {utts} utterances, {nbytes / 2**20:.1f} MiB of FLAC", flush=True)
    print(f"an4_pack: {total / 2**20:.1f} MiB of FLAC in {flac}; run an4_sweep.py with --data "
          f"{args.out / 'data'} --flac-dir {flac}")


if __name__ == "__main__":
    main()

"""A miniature LDC layout for the Switchboard recipe tests: LDC97S62 + ms98 transcripts, LDC2002S09 + T43.

Audio is two-channel 8 kHz NIST SPHERE written here (1024-byte header + interleaved samples), in PCM and in
µ-law, with a different tone on each side (A: ``TONE_A`` Hz, B: ``TONE_B`` Hz) so that tests can tell the
channels apart. ``shorten=True`` marks one file as shorten-compressed (header only claims it; the body is
junk), which is enough to test the sph2pipe paths.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict

import numpy as np

SR = 8000
TONE_A = 300.0
TONE_B = 1200.0


def mulaw_encode(x: np.ndarray) -> np.ndarray:
    """int16 samples -> G.711 µ-law bytes (uint8), the coding of SPHERE ``ulaw`` files."""
    bias, clip = 0x84, 32635
    x = x.astype(np.int32)
    sign = np.where(x < 0, 0x80, 0)
    mag = np.minimum(np.abs(x), clip) + bias
    exponent = np.floor(np.log2(mag)).astype(np.int32) - 7
    exponent = np.clip(exponent, 0, 7)
    mantissa = (mag >> (exponent + 3)) & 0x0F
    return (~(sign | (exponent << 4) | mantissa) & 0xFF).astype(np.uint8)


def two_tone(seconds: float, seed: int = 0) -> np.ndarray:
    """(samples, 2) int16: side A a TONE_A sine, side B a TONE_B sine, plus a little noise."""
    t = np.arange(int(seconds * SR)) / SR
    rng = np.random.default_rng(seed)
    a = 8000 * np.sin(2 * np.pi * TONE_A * t) + rng.normal(0, 100, t.size)
    b = 8000 * np.sin(2 * np.pi * TONE_B * t) + rng.normal(0, 100, t.size)
    return np.stack([a, b], axis=1).astype(np.int16)


def write_sphere(path: Path, samples: np.ndarray, coding: str = "pcm") -> Path:
    """Write NIST SPHERE: ``coding`` is ``pcm`` (16-bit little-endian), ``ulaw`` or ``shorten`` (fake)."""
    n, channels = samples.shape
    if coding == "pcm":
        body, nbytes, fields = samples.astype("<i2").tobytes(), 2, ["sample_coding -s3 pcm",
                                                                     "sample_byte_format -s2 01"]
    elif coding == "ulaw":
        body, nbytes, fields = mulaw_encode(samples).tobytes(), 1, ["sample_coding -s4 ulaw",
                                                                     "sample_byte_format -s1 1"]
    elif coding == "shorten":
        body, nbytes = b"ajkq" + bytes(range(256)) * 4, 1
        fields = ["sample_coding -s26 ulaw,embedded-shorten-v2.00", "sample_byte_format -s1 1"]
    else:
        raise ValueError(coding)
    lines = ["NIST_1A", "   1024", "database_id -s7 fixture", f"sample_count -i {n}",
             f"sample_rate -i {SR}", f"channel_count -i {channels}", f"sample_n_bytes -i {nbytes}",
             *fields, "end_head"]
    header = ("\n".join(lines) + "\n").encode("ascii")
    header += b" " * (1024 - len(header))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(header + body)
    return path


# ms98 transcripts: (file, [lines]). Tokens exercise every drop, map and normalisation rule.
MS98 = {
    "sw2001A": [
        "sw2001A-ms98-a-0001 0.000000 0.977625 [silence]",
        "sw2001A-ms98-a-0002 0.977625 3.561375 hi um yeah <b_aside> [laughter-yes] [silence] ibm's -[an]y "
        "ab[solute]- <e_aside>",
        "sw2001A-ms98-a-0003 3.561375 5.200000 [it'n/isn't] {yuppiedom} them_1 ammu[n]it- [vocalized-noise]",
        "sw2001A-ms98-a-0004 5.200000 6.000000 uh-huh",
        "sw2001A-ms98-a-0005 6.000000 7.000000 [noise] uh-huh [laughter]",
        "sw2001A-ms98-a-0006 7.000000 8.000000 uh-huh",
        "sw2001A-ms98-a-0007 8.000000 9.000000 [silence] [silence]",
        "sw2001A-ms98-a-0008 9.000000 10.500000 i think i b m is a company",
    ],
    "sw2001B": [
        "sw2001B-ms98-a-0001 0.500000 2.000000 uh-huh",
        "sw2001B-ms98-a-0002 2.500000 4.000000 right [laughter-ri]-",
        "sw2001B-ms98-a-0003 4.000000 6.000000 uh-huh",
        "sw2001B-ms98-a-0004 6.000000 7.500000 ex[specially]-/especially] so",
        "sw2001B-ms98-a-0005 7.500000 9.000000 well [silence] [silence] okay",
        "sw2001B-ms98-a-0006 11.000000 11.001000 zero",
    ],
    "sw2005A": [
        "sw2005A-ms98-a-0001 0.200000 1.500000 uh-huh",
        "sw2005A-ms98-a-0002 1.500000 4.000000 and so it goes",
    ],
    "sw2005B": [
        "sw2005B-ms98-a-0001 0.100000 2.000000 yeah [laughter] right",
        "sw2005B-ms98-a-0002 2.000000 3.500000 uh-huh",
    ],
    # a conversation whose audio is missing from the corpus copy: its utterances are left out (logged)
    "sw3001A": ["sw3001A-ms98-a-0001 0.000000 1.000000 no audio here"],
}

MS98_DICT = """#
# fixture excerpt of sw-ms98-dict.text
#
a ax
b b iy
i ay
ibm ay b iy eh m
ibm's ay b iy eh m z
it'n ih t n
m eh m
yes y eh s
uh-huh ah hh ah
bbcs b iy b iy s iy z
"""


@dataclass
class SwbdFixture:
    swbd_dir: Path  # the LDC97S62 directory
    trans_dir: Path  # .../swb_ms98_transcriptions
    sph: Dict[str, Path]  # "sw02001" -> file


def make_swbd(root: Path, shorten: bool = False) -> SwbdFixture:
    """LDC97S62 with sw02001 (PCM, or fake shorten) and sw02005 (µ-law), plus ms98 transcripts and dict."""
    swbd = root / "LDC97S62"
    sph = {
        "sw02001": write_sphere(swbd / "swb1_d1" / "data" / "sw02001.sph", two_tone(12.0, 1),
                                "shorten" if shorten else "pcm"),
        "sw02005": write_sphere(swbd / "swb1_d2" / "data" / "sw02005.sph", two_tone(5.0, 2), "ulaw"),
    }
    for disc in ("swb1_d3", "swb1_d4"):
        (swbd / disc / "data").mkdir(parents=True)
    (swbd / "docs").mkdir()
    trans = swbd / "transcriptions" / "swb_ms98_transcriptions"
    for side, lines in MS98.items():
        conv = side[2:6]
        d = trans / conv[:2] / conv
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{side}-ms98-a-trans.text").write_text("\n".join(lines) + "\n", encoding="utf-8")
        # word-level alignments sit beside the segment files; Kaldi (and we) ignore them
        (d / f"{side}-ms98-a-word.text").write_text(
            f"{side}-ms98-a-0001 0.000000 0.500000 ignored\n", encoding="utf-8")
    (trans / "sw-ms98-dict.text").write_text(MS98_DICT, encoding="utf-8")
    return SwbdFixture(swbd, trans, sph)


PEM = """;; hub5e_00.pem fixture
en_4156 A unknown_speaker 0.29 2.00
en_4156 A unknown_speaker 2.05 4.00
en_4156 B unknown_speaker 1.00 3.00
sw_4390 A unknown_speaker 1.15 3.50
sw_4390 B unknown_speaker 0.50 2.00
"""

STM = """;; CATEGORY "0" "" ""
;; LABEL "O" "Overall" "The Complete Test Set"
;; LABEL "en" "CallHome" "CallHome conversations"
;; LABEL "sw" "Switchboard" "Switchboard conversations"
en_4156 A en_4156_A 0.29 2.00 <O,en,F,en-F> hello there (%HESITATION) how are you
en_4156 A en_4156_A 2.05 4.00 <O,en,F,en-F> IGNORE_TIME_SEGMENT_IN_SCORING
en_4156 B en_4156_B 1.00 3.00 <O,en,M,en-M> ((fine)) thanks <B_ASIDE> (uh-) i am <E_ASIDE>
sw_4390 A sw_4390_A 1.15 3.50 <O,sw,F,sw-F> yeah right
sw_4390 B sw_4390_B 0.50 2.00 <O,sw,M,sw-M> i think so
"""

GLM = """;;
;;  File: en20000405_hub5.glm (fixture excerpt)
;;
* name "en20000405_hub5.glm"
* desc "fixture"
* format = 'NIST1'
* max_nrules = '2000'
* copy_no_hit = 'T'
* case_sensitive = 'F'
[UH] => %HESITATION / [ ] __ [ ]
[UM] => %HESITATION / [ ] __ [ ]
[I'M] => [I AM] / [ ] __ [ ]
"""


@dataclass
class Hub5Fixture:
    audio_dir: Path  # LDC2002S09/hub5e_00
    text_dir: Path  # LDC2002T43


def make_hub5(root: Path, shorten: bool = False) -> Hub5Fixture:
    """LDC2002S09 (en_4156 PCM, sw_4390 µ-law, en_6000 without segments) and LDC2002T43 (stm, glm)."""
    english = root / "LDC2002S09" / "hub5e_00" / "english"
    write_sphere(english / "en_4156.sph", two_tone(4.5, 3), "shorten" if shorten else "pcm")
    write_sphere(english / "sw_4390.sph", two_tone(4.0, 4), "ulaw")
    write_sphere(english / "en_6000.sph", two_tone(1.0, 5), "pcm")
    (english / "hub5e_00.pem").write_text(PEM, encoding="utf-8")
    reference = root / "LDC2002T43" / "2000_hub5_eng_eval_tr" / "reference"
    reference.mkdir(parents=True)
    (reference / "hub5e00.english.000405.stm").write_text(STM, encoding="utf-8")
    (reference / "en20000405_hub5.glm").write_text(GLM, encoding="utf-8")
    return Hub5Fixture(root / "LDC2002S09" / "hub5e_00", root / "LDC2002T43")


FISHER_TRANS = {
    "fe_03_00001": "# fe_03_00001.sph\n# Transcribed at the LDC\n\n"
                   "0.29 1.50 A: hi [laugh] my name is\n"
                   "1.15 3.00 B: (( hello ))\n"
                   "3.10 4.00 A: [breath] [sigh]\n"
                   "4.00 5.50 B: and [cough]  you \n"
                   "5.60 5.90 A: [lipsmack]\n",
    "fe_03_05851": "# fe_03_05851.sph\n\n0.50 2.00 A: yeah\n2.10 3.00 B: uh-huh right\n",
    # transcribed but its audio is missing from the copy: left out (logged)
    "fe_03_05852": "# fe_03_05852.sph\n\n0.50 2.00 A: gone\n",
}


def make_fisher(root: Path) -> list:
    """The four Fisher releases: part 1 audio (µ-law) in fe_03_p1_sphN, part 2 audio (PCM) in the newer
    fisher_eng_tr_sp_dN naming, transcripts in fe_03_p{1,2}_tran/data/trans/NNN/. Returns the four dirs."""
    s13, s13b = root / "LDC2004S13", root / "LDC2005S13"
    t19, t19b = root / "LDC2004T19", root / "LDC2005T19"
    for i in range(1, 8):
        (s13 / f"fe_03_p1_sph{i}" / "audio").mkdir(parents=True)
        (s13b / f"fisher_eng_tr_sp_d{i}" / "audio").mkdir(parents=True)
    write_sphere(s13 / "fe_03_p1_sph1" / "audio" / "000" / "fe_03_00001.sph", two_tone(6.0, 6), "ulaw")
    write_sphere(s13b / "fisher_eng_tr_sp_d1" / "audio" / "058" / "fe_03_05851.sph", two_tone(3.5, 7), "pcm")
    for tran, call in ((t19 / "fe_03_p1_tran", "fe_03_00001"), (t19b / "fe_03_p2_tran", "fe_03_05851"),
                       (t19b / "fe_03_p2_tran", "fe_03_05852")):
        d = tran / "data" / "trans" / call[6:9]
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{call}.txt").write_text(FISHER_TRANS[call], encoding="utf-8")
    return [s13, s13b, t19, t19b]

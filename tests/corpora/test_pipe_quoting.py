"""wav.scp pipes run through /bin/sh (Kaldi's contract): the Switchboard prep quotes what it puts in them."""

import os
import stat

import numpy as np
import soundfile as sf

from asrtrain.corpora.ldc import wav_scp_entries
from asrtrain.data.audio import read_recording
from tests.helpers.sphere_fixture import tone, write_sphere


def test_sph2pipe_commands_quote_program_and_path(tmp_path):
    odd = tmp_path / "LDC corpus $(touch PWNED) it's" / "disc;1"
    odd.mkdir(parents=True)
    sph = odd / "sw0 2001.sph"
    write_sphere(sph, np.stack([tone(0.5, 8000), tone(0.5, 8000, freq=300)], axis=1), coding="shorten")
    ref = tmp_path / "ref.wav"
    sf.write(str(ref), tone(0.5, 8000), 8000, subtype="PCM_16")
    tools = tmp_path / "my tools"
    tools.mkdir()
    prog = tools / "sph2pipe"
    # a stand-in sph2pipe: refuses unless its 6th argument is the SPHERE file, then writes a wav
    prog.write_text(f'#!/bin/sh\n[ "$#" -eq 6 ] && [ -f "$6" ] || exit 3\ncat "{ref}"\n')
    prog.chmod(prog.stat().st_mode | stat.S_IEXEC)
    wav, r2fc = wav_scp_entries({"sw0 2001": sph}, ["sw0 2001-A", "sw0 2001-B"], sph2pipe=str(prog))
    assert wav["sw0 2001-B"].endswith("|") and " -c 2 " in wav["sw0 2001-B"]
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        samples, rate = read_recording(wav["sw0 2001-A"])
    finally:
        os.chdir(cwd)
    assert rate == 8000 and len(samples) == 4000
    assert not (tmp_path / "PWNED").exists() and not (odd / "PWNED").exists()

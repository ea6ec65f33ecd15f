"""validate and fix on what the audit found them to pass: audio headers that cannot be read, utterances
shorter than one feature frame, a byte-order mark at the start of a file."""

import pytest
import soundfile as sf

from asrtrain.data.datadir import read_datadir
from asrtrain.data.validate import find_problems
from tests.helpers.cli_helpers import one_error, run
from tests.helpers.sphere_fixture import make_data_dir


@pytest.fixture
def data(tmp_path):
    return make_data_dir(tmp_path, n_utts=4, speakers=2)


def _first_audio(data):
    rec, path = (data / "wav.scp").read_text().splitlines()[0].split()
    return rec, path


def test_validate_names_a_file_that_is_not_audio(data):
    rec, path = _first_audio(data)
    with open(path, "w") as fh:
        fh.write("not audio\n")
    err = one_error(run("data", "validate", data))
    assert f"{data}/wav.scp:1: cannot read audio file {path}: corrupt or unsupported format" in err
    assert f"asrtrain data fix {data} drops the recording" in err
    # --no-audio reads no header
    assert run("data", "validate", "--no-audio", data).exit_code == 0


def test_validate_leaves_pipes_unread(data, tmp_path):
    rec, path = _first_audio(data)
    lines = (data / "wav.scp").read_text().splitlines(keepends=True)
    lines[0] = f"{rec} cat {tmp_path}/no-such-file.wav |\n"
    (data / "wav.scp").write_text("".join(lines))
    assert find_problems(data) == []


def test_fix_drops_a_recording_whose_header_cannot_be_read(data):
    rec, path = _first_audio(data)
    with open(path, "wb") as fh:
        fh.write(b"RIFF\x00\x00")
    r = run("data", "fix", data)
    assert r.exit_code == 0, r.output
    assert "4 utterances in, 3 out" in r.stdout
    report = (data / "fix_report.txt").read_text()
    assert f"{rec} wav.scp:1: cannot read audio file {path}" in report
    d = read_datadir(data)
    assert rec not in d.wav_scp and rec not in d.utt2spk and rec not in d.text
    assert rec not in (data / "spk2utt").read_text()
    assert find_problems(data) == []
    # and info, which said to drop it with data fix, now reads the dir
    assert run("data", "info", data).exit_code == 0


def test_fix_drops_the_segments_of_an_unreadable_recording(data):
    wav = (data / "wav.scp").read_text().splitlines()
    recs = [ln.split()[0] for ln in wav]
    # two segments of each recording: utterance <rec>-a and <rec>-b
    utts = sorted((f"{r}-{x}", r) for r in recs for x in "ab")
    (data / "segments").write_text("".join(f"{u} {r} {0.0 if u.endswith('a') else 0.2} "
                                           f"{0.2 if u.endswith('a') else 0.4}\n" for u, r in utts))
    (data / "utt2spk").write_text("".join(f"{u} {r.split('-')[0]}\n" for u, r in utts))
    (data / "text").write_text("".join(f"{u} one\n" for u, _ in utts))
    (data / "spk2utt").unlink()
    assert run("data", "fix", data).exit_code == 0
    assert find_problems(data) == []
    with open(wav[0].split()[1], "w") as fh:
        fh.write("not audio\n")
    err = one_error(run("data", "validate", data))
    assert f"{data}/wav.scp:1: cannot read audio file" in err
    r = run("data", "fix", data)
    assert r.exit_code == 0, r.output
    assert "8 utterances in, 6 out" in r.stdout
    d = read_datadir(data)
    assert recs[0] not in d.wav_scp and sorted(d.segments) == [u for u, r in utts if r != recs[0]]
    report = (data / "fix_report.txt").read_text()
    assert f"{recs[0]}-a wav.scp:1: cannot read audio file" in report


def test_a_recording_no_segment_uses_is_named_and_fix_drops_it(data):
    """validate_data_dir.sh refuses a wav.scp recording that segments never names; so do we, and fix
    drops it as fix_data_dir.sh does."""
    wav = (data / "wav.scp").read_text().splitlines()
    recs = [ln.split()[0] for ln in wav]
    used = recs[1:]
    (data / "segments").write_text("".join(f"{r}-a {r} 0.0 0.2\n" for r in used))
    (data / "utt2spk").write_text("".join(f"{r}-a {r.split('-')[0]}\n" for r in used))
    (data / "text").write_text("".join(f"{r}-a one\n" for r in used))
    (data / "spk2utt").unlink()
    r = run("data", "fix", data)
    assert r.exit_code == 0, r.output
    assert find_problems(data) == [] and recs[0] not in read_datadir(data).wav_scp
    (data / "wav.scp").write_text("\n".join(wav) + "\n")  # the unused recording back
    assert f"{data}/wav.scp:1: recording '{recs[0]}' is used by no segment" in one_error(run("data", "validate", data))
    assert run("data", "fix", data).exit_code == 0
    assert find_problems(data) == [] and recs[0] not in read_datadir(data).wav_scp


# -- utterances shorter than one feature frame (25 ms, features.frame_length's default) ------------------
def _shorten(path, samples):
    x, rate = sf.read(path, dtype="int16")
    sf.write(path, x[:samples], rate, subtype="PCM_16")


def test_validate_names_an_utterance_shorter_than_one_frame(data):
    rec, path = _first_audio(data)
    whole, rate = sf.read(path, dtype="int16")
    _shorten(path, 320)  # 20 ms at 16 kHz: fewer samples than one 25 ms frame (400)
    err = one_error(run("data", "validate", data))
    assert (f"{data}/wav.scp:1: utterance '{rec}' is 320 samples (20.0 ms), shorter than one 25 ms feature "
            "frame (400 samples at 16000 Hz") in err
    assert "(fix: asrtrain data fix DIR drops it" in err
    sf.write(path, whole[:400], rate, subtype="PCM_16")  # exactly one frame is enough
    assert find_problems(data) == []


def test_validate_names_a_segment_shorter_than_one_frame(data):
    rec, _ = _first_audio(data)
    others = (data / "wav.scp").read_text().splitlines()[1:]
    utts = sorted([(f"{rec}-a", f"{rec} 0.0 0.3"), (f"{rec}-b", f"{rec} 0.3 0.32")]
                  + [(f"{ln.split()[0]}-a", f"{ln.split()[0]} 0.0 0.3") for ln in others])
    (data / "segments").write_text("".join(f"{u} {s}\n" for u, s in utts))
    (data / "utt2spk").write_text("".join(f"{u} {u.split('-')[0]}\n" for u, _ in utts))
    (data / "text").write_text("".join(f"{u} one\n" for u, _ in utts))
    (data / "spk2utt").unlink()
    r = run("data", "fix", data)
    assert r.exit_code == 0, r.output
    assert "5 utterances in, 4 out" in r.stdout
    report = (data / "fix_report.txt").read_text()
    assert f"{rec}-b segments:2: utterance '{rec}-b' is 320 samples (20.0 ms), shorter than one" in report
    assert f"{rec}-b" not in read_datadir(data).segments and find_problems(data) == []


def test_fix_drops_an_utterance_shorter_than_one_frame_from_every_file(data):
    rec, path = _first_audio(data)
    _shorten(path, 100)
    r = run("data", "fix", data)
    assert r.exit_code == 0, r.output
    assert "4 utterances in, 3 out" in r.stdout
    assert f"{rec} wav.scp:1: utterance '{rec}' is 100 samples" in (data / "fix_report.txt").read_text()
    d = read_datadir(data)
    assert rec not in d.wav_scp and rec not in d.utt2spk and rec not in d.text
    assert find_problems(data) == []


# -- a UTF-8 byte-order mark at the start of a file ------------------------------------------------------
BOM = b"\xef\xbb\xbf"


@pytest.mark.parametrize("name", ["utt2spk", "wav.scp", "text", "spk2utt", "utt2dur", "segments"])
def test_a_bom_is_named_and_fix_strips_it_keeping_every_utterance(data, name):
    if name == "utt2dur":
        (data / "utt2dur").write_text("".join(f"{ln.split()[0]} 0.6\n"
                                              for ln in (data / "utt2spk").read_text().splitlines()))
    if name == "segments":
        recs = [ln.split()[0] for ln in (data / "wav.scp").read_text().splitlines()]
        (data / "segments").write_text("".join(f"{r} {r} 0.0 0.5\n" for r in recs))
    clean = (data / name).read_bytes()
    (data / name).write_bytes(BOM + clean)
    problems = find_problems(data)
    assert [(p.path, p.line) for p in problems] == [(f"{data}/{name}", 1)], problems
    err = one_error(run("data", "validate", data))
    assert f"{data}/{name}:1: starts with a UTF-8 byte-order mark" in err
    assert "asrtrain data fix DIR strips it" in err
    r = run("data", "fix", data)
    assert r.exit_code == 0, r.output
    assert "4 utterances in, 4 out" in r.stdout
    assert (data / name).read_bytes() == clean
    assert f"{data}/{name}:1 starts with a UTF-8 byte-order mark" in (data / "fix_report.txt").read_text()
    assert find_problems(data) == []

"""Data dir tools through the CLI: validate, fix, subset, split, and every bad-input message."""

import re
import shutil

import pytest

from asrtrain.data.validate import find_problems, validate
from asrtrain.data.datadir import DataDir, Segment, read_datadir, write_datadir
from asrtrain.data.subsets import split_speakers
from tests.helpers.sphere_fixture import make_data_dir, tone, write_sphere


from tests.helpers.cli_helpers import one_error, run  # noqa: F401


@pytest.fixture
def data(tmp_path):
    return make_data_dir(tmp_path, n_utts=6, speakers=3)


def test_validate_ok(data):
    r = run("data", "validate", data)
    assert r.exit_code == 0, r.output
    assert "OK (6 utterances, 3 speakers, 6 recordings)" in r.stdout


def _replace_line(path, lineno, new):
    lines = path.read_text().splitlines(keepends=True)
    lines[lineno - 1] = new
    path.write_text("".join(lines))


def test_utt_in_text_not_in_wav_scp(data):
    wav = (data / "wav.scp").read_text().splitlines(keepends=True)
    (data / "wav.scp").write_text("".join(wav[:2] + wav[3:]))  # drop the 3rd recording
    utt = wav[2].split()[0]
    err = one_error(run("data", "validate", data))
    assert f"{data}/text:3: utterance '{utt}' is in text but not in wav.scp" in err
    assert "asrtrain data fix" in err


def test_empty_transcript(data):
    text = data / "text"
    utt = text.read_text().splitlines()[1].split()[0]
    _replace_line(text, 2, f"{utt}\n")
    err = one_error(run("data", "validate", data))
    assert f"{text}:2: empty transcript for utterance '{utt}'" in err


def test_non_utf8_text(data):
    text = data / "text"
    raw = text.read_bytes().split(b"\n")
    raw[3] = raw[3] + b" caf\xe9"
    text.write_bytes(b"\n".join(raw))
    err = one_error(run("data", "validate", data))
    assert f"{text}:4: not valid UTF-8" in err and "iconv" in err


def test_unsorted_ids(data):
    utt2spk = data / "utt2spk"
    lines = utt2spk.read_text().splitlines(keepends=True)
    lines[1], lines[2] = lines[2], lines[1]
    utt2spk.write_text("".join(lines))
    err = one_error(run("data", "validate", data))
    assert re.search(rf"{utt2spk}:3: not sorted: '\S+' comes after '\S+'", err)
    assert "LC_ALL=C sort" in err


def test_duplicate_ids(data):
    wav = data / "wav.scp"
    lines = wav.read_text().splitlines(keepends=True)
    wav.write_text("".join(lines[:2] + [lines[1]] + lines[2:]))
    err = one_error(run("data", "validate", data))
    assert f"{wav}:3: duplicate id '{lines[1].split()[0]}' (first on line 2)" in err


def test_spk2utt_disagrees(data):
    _replace_line(data / "spk2utt", 1, "spk0 spk0-utt0\n")
    err = one_error(run("data", "validate", data))
    assert f"{data}/spk2utt:1: spk2utt and utt2spk disagree about speaker 'spk0'" in err


def test_missing_audio_file(data):
    first = (data / "wav.scp").read_text().splitlines()[0].split()[1]
    shutil.move(first, first + ".gone")
    err = one_error(run("data", "validate", data))
    assert f"{data}/wav.scp:1: audio file not found: {first}" in err
    assert run("data", "validate", "--no-audio", data).exit_code == 0


def _segmented(tmp_path):
    """Two 2-channel SPHERE recordings (A/B sides), utterances as segments."""
    d = tmp_path / "seg"
    d.mkdir()
    import numpy as np
    for conv in ("sw01", "sw02"):
        x = np.stack([tone(2.0, 8000, 300, seed=1), tone(2.0, 8000, 600, seed=2)], 1)
        write_sphere(tmp_path / f"{conv}.sph", x, coding="ulaw")
    recs = [f"{c}-{s}" for c in ("sw01", "sw02") for s in "AB"]
    (d / "wav.scp").write_text("".join(f"{r} {tmp_path / r[:4]}.sph\n" for r in recs))
    (d / "reco2file_and_channel").write_text("".join(f"{r} {r[:4]} {r[-1]}\n" for r in recs))
    segs = [(f"{r}_{i:06d}", r, 0.5 * i, 0.5 * i + 0.4) for r in recs for i in range(3)]
    (d / "segments").write_text("".join(f"{u} {r} {s} {e}\n" for u, r, s, e in segs))
    (d / "text").write_text("".join(f"{u} hello world\n" for u, _, _, _ in segs))
    (d / "utt2spk").write_text("".join(f"{u} {r}\n" for u, r, _, _ in segs))
    spk = {}
    for u, r, _, _ in segs:
        spk.setdefault(r, []).append(u)
    (d / "spk2utt").write_text("".join(f"{r} {' '.join(us)}\n" for r, us in sorted(spk.items())))
    return d


def test_segments_checked_against_recording_length(tmp_path):
    d = _segmented(tmp_path)
    assert run("data", "validate", d).exit_code == 0
    _replace_line(d / "segments", 2, "sw01-A_000001 sw01-A 1.9 3.0\n")
    err = one_error(run("data", "validate", d))
    assert (f"{d}/segments:2: segment 1.9-3.0 s of 'sw01-A_000001' is outside recording 'sw01-A' "
            "(2.000 s long)") in err
    _replace_line(d / "segments", 2, "sw01-A_000001 sw01-A 0.9 0.5\n")
    err = one_error(run("data", "validate", d))
    assert f"{d}/segments:2: malformed record" in err


def test_fix_repairs_and_reports(data):
    wav = data / "wav.scp"
    lines = wav.read_text().splitlines(keepends=True)
    dropped_rec = lines[2].split()[0]
    wav.write_text("".join(lines[:2] + lines[3:] + [lines[0]]))  # a missing rec, unsorted + duplicate
    text = data / "text"
    empty_utt = text.read_text().splitlines()[4].split()[0]
    _replace_line(text, 5, f"{empty_utt}\n")
    (data / "spk2utt").unlink()
    before = len(find_problems(data))
    assert before >= 4
    r = run("data", "fix", data)
    assert r.exit_code == 0, r.output
    assert "6 utterances in, 4 out" in r.stdout
    assert find_problems(data) == []
    report = (data / "fix_report.txt").read_text()
    assert f"{dropped_rec} text:3: utterance '{dropped_rec}' is in text but not in wav.scp" in report
    assert f"{empty_utt} text:5: empty transcript" in report
    assert "duplicate id" in report
    assert (data / ".backup" / "wav.scp").read_text() == "".join(lines[:2] + lines[3:] + [lines[0]])
    d = read_datadir(data)
    assert dropped_rec not in d.utt2spk and empty_utt not in d.utt2spk and len(d.wav_scp) == 4


def test_fix_refuses_non_utf8(data):
    (data / "text").write_bytes(b"spk0-utt0 caf\xe9\n")
    err = one_error(run("data", "fix", data))
    assert f"{data}/text:1: not valid UTF-8" in err


def test_subset(data, tmp_path):
    utts = read_datadir(data).utts
    r = run("data", "subset", data, tmp_path / "first", "--first", 2)
    assert r.exit_code == 0, r.output
    assert validate(tmp_path / "first", audio=True).utts == utts[:2]
    run("data", "subset", data, tmp_path / "last", "--last", 2)
    assert read_datadir(tmp_path / "last").utts == utts[-2:]
    (tmp_path / "list").write_text(f"{utts[3]}\n{utts[1]}\nnot-there\n")
    run("data", "subset", data, tmp_path / "ul", "--utt-list", tmp_path / "list")
    assert read_datadir(tmp_path / "ul").utts == [utts[1], utts[3]]
    (tmp_path / "spks").write_text("spk1\n")
    run("data", "subset", data, tmp_path / "sl", "--spk-list", tmp_path / "spks")
    sub = read_datadir(tmp_path / "sl")
    assert sub.utts == [u for u in utts if u.startswith("spk1-")] and set(sub.wav_scp) == set(sub.utts)
    err = one_error(run("data", "subset", data, tmp_path / "x", "--first", 1, "--last", 1))
    assert "exactly one of" in err


def test_subset_segments_keeps_used_recordings(tmp_path):
    d = _segmented(tmp_path)
    (tmp_path / "spks").write_text("sw02-B\n")
    assert run("data", "subset", d, tmp_path / "b", "--spk-list", tmp_path / "spks").exit_code == 0
    sub = validate(tmp_path / "b", audio=True)
    assert list(sub.wav_scp) == ["sw02-B"] and sub.reco2file_and_channel == {"sw02-B": ("sw02", "B")}
    assert len(sub.segments) == 3


def test_split_by_speaker(tmp_path):
    data = make_data_dir(tmp_path, n_utts=9, speakers=3)
    r = run("data", "split", data, 3)
    assert r.exit_code == 0, r.output
    parts = [read_datadir(data / "split3" / str(j)) for j in (1, 2, 3)]
    assert [sorted(p.spk2utt) for p in parts] == [["spk0"], ["spk1"], ["spk2"]]
    assert sorted(u for p in parts for u in p.utts) == read_datadir(data).utts
    err = one_error(run("data", "split", data, 4))
    assert "cannot split 3 speakers into 4 parts" in err


def test_split_speakers_balances_counts():
    assert split_speakers([1, 1, 1, 1], 2) == [0, 2]
    assert split_speakers([10, 1, 1, 1, 1, 10], 2) == [0, 3]
    assert split_speakers([5, 5, 5], 3) == [0, 1, 2]
    starts = split_speakers([3] * 10, 4)
    assert starts[0] == 0 and sorted(set(starts)) == starts and len(starts) == 4


def test_write_read_roundtrip(tmp_path):
    d = DataDir(utt2spk={"b": "s1", "a": "s1"}, wav_scp={"r": "/x.wav"}, text={"a": "hi", "b": "yo"},
                segments={"a": Segment("r", 0.0, 1.25), "b": Segment("r", 1.25, -1.0)},
                reco2file_and_channel={"r": ("x", "A")})
    write_datadir(d, tmp_path / "d")
    assert (tmp_path / "d" / "spk2utt").read_text() == "s1 a b\n"
    assert (tmp_path / "d" / "segments").read_text() == "a r 0.0 1.25\nb r 1.25 -1.0\n"
    back = read_datadir(tmp_path / "d")
    assert back.segments == d.segments and back.text == d.text and back.channel("r") == "A"


def test_extra_tables_follow_subset_and_fix(data, tmp_path):
    """utt2dur, spk2gender and the like are filtered with the rest, never left inconsistent."""
    utts = read_datadir(data).utts
    (data / "utt2dur").write_text("".join(f"{u} 1.5\n" for u in utts))
    (data / "spk2gender").write_text("spk0 f\nspk1 m\nspk2 f\n")
    (tmp_path / "spks").write_text("spk1\n")
    assert run("data", "subset", data, tmp_path / "sub", "--spk-list", tmp_path / "spks").exit_code == 0
    assert (tmp_path / "sub" / "spk2gender").read_text() == "spk1 m\n"
    assert (tmp_path / "sub" / "utt2dur").read_text() == "".join(
        f"{u} 1.5\n" for u in utts if u.startswith("spk1-"))
    _replace_line(data / "text", 1, f"{utts[0]}\n")
    assert run("data", "fix", data).exit_code == 0
    assert utts[0] not in (data / "utt2dur").read_text()

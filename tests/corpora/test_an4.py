"""``asrtrain prepare an4``: a miniature AN4 layout (always), and the real corpus when ../shared/an4 exists."""

from pathlib import Path

import pytest

from asrtrain.corpora.an4 import prepare_an4, read_transcription, utt_id
from asrtrain.data.table import read_table
from asrtrain.data.validate import validate
from tests.helpers.cli_helpers import one_error, run
from tests.helpers.an4_fixture import TEST, TRAIN, make_an4

REAL_AN4 = Path(__file__).resolve().parents[2] / ".." / "shared" / "an4"

@pytest.fixture()
def an4(tmp_path):
    return make_an4(tmp_path / "an4")


def test_utt_ids_are_speaker_first():
    assert utt_id("an251-fash-b") == ("fash-an251-b", "fash")
    with pytest.raises(ValueError):
        utt_id("an251fash")


def test_prepare_splits_ids_and_audio(an4, tmp_path):
    out = tmp_path / "data"
    r = run("prepare", "an4", an4, out, "--dev-utts", "2")
    assert r.exit_code == 0, r.output
    assert "train: 4 utterances" in r.output and "dev: 2 utterances" in r.output and "test: 3 utterances" in r.output
    train_ids = sorted(utt_id(n)[0] for n, _ in TRAIN)
    dev = read_table(out / "dev" / "text")
    train = read_table(out / "train" / "text")
    assert list(dev) == train_ids[:2]  # the first N sorted speaker-first ids
    assert list(train) == train_ids[2:]
    assert dev["fash-cen1-b"] == "ONE TWO" and train["fbbh-cen7-b"] == "RUBOUT A B"  # <s> </s> dropped
    test = read_table(out / "test" / "text")
    assert list(test) == sorted(utt_id(n)[0] for n, _ in TEST)  # fcaw has no transcript: left out
    for split in ("train", "dev", "test"):
        d = validate(out / split, audio=True)
        for name in ("wav.scp", "text", "utt2spk", "spk2utt", "utt2dur", "spk2gender"):
            keys = [line.split()[0] for line in (out / split / name).read_text().splitlines()]
            assert keys == sorted(keys), (split, name)
        for utt, spk in d.utt2spk.items():
            assert utt.startswith(spk + "-")
            assert Path(d.wav_scp[utt]).is_absolute() and d.wav_scp[utt].endswith(".sph")
    # durations come from the SPHERE headers
    durs = read_table(out / "dev" / "utt2dur")
    assert abs(float(durs["fash-cen1-b"]) - 0.35) < 1e-3
    assert read_table(out / "test" / "spk2gender") == {"fjlp": "f", "mjwl": "m"}
    # audio goes through the ordinary reader
    from asrtrain.data.audio import load_audio
    wave, rate = load_audio(d.wav_scp[d.utts[0]])
    assert rate == 16000 and wave.numel() > 0
    # idempotent: a second run with the same inputs leaves the files alone
    before = (out / "train" / "text").stat().st_mtime_ns
    assert run("prepare", "an4", an4, out, "--dev-utts", "2").exit_code == 0
    assert (out / "train" / "text").stat().st_mtime_ns == before


def test_prepare_refuses_what_is_not_an4(an4, tmp_path):
    err = one_error(run("prepare", "an4", tmp_path, tmp_path / "data"))
    assert "not a CMU AN4 directory" in err and "an4_sphere" in err
    (an4 / "wav" / "an4_clstk" / "fash" / "cen1-fash-b.sph").unlink()
    err = one_error(run("prepare", "an4", an4, tmp_path / "data"))
    assert "have no audio" in err and "cen1-fash-b" in err
    bad = an4 / "etc" / "an4_test.transcription"
    bad.write_text("NO an416-fjlp-b\n")
    with pytest.raises(Exception, match=r"an4_test.transcription:1: expected 'WORDS \(file-name\)'"):
        read_transcription(bad)


@pytest.mark.skipif(not REAL_AN4.is_dir(), reason=f"CMU AN4 not found at {REAL_AN4} (the shared corpus copy "
                                                  "is absent on this machine)")
def test_real_an4_counts(tmp_path):
    dirs = prepare_an4(REAL_AN4, tmp_path / "data")
    counts = {s: len(read_table(d / "text")) for s, d in dirs.items()}
    n_test = len(read_transcription(REAL_AN4 / "etc" / "an4_test.transcription"))
    assert counts["train"] + counts["dev"] == 948 and counts["dev"] == 100
    assert counts["test"] == n_test and n_test in (117, 130)  # this copy lacks fcaw's 13 transcripts
    words = sum(len(t.split()) for t in read_table(dirs["test"] / "text").values())
    assert words == {117: 699, 130: 773}[n_test]  # 773: ESPnet's test word count on the full 130
    spk_train = set(read_table(dirs["train"] / "utt2spk").values())
    spk_dev = set(read_table(dirs["dev"] / "utt2spk").values())
    assert len(spk_train | spk_dev) == 74


def test_prepare_redoes_when_the_transcription_changed(an4, tmp_path):
    """Issue 57: "already prepared from these inputs" after the transcription changed was a silent
    acceptance; the marker now covers the transcription's contents."""
    out = tmp_path / "data"
    assert run("prepare", "an4", an4, out, "--dev-utts", "2").exit_code == 0
    trans = an4 / "etc" / "an4_train.transcription"
    trans.write_text(trans.read_text().replace("RUBOUT A B", "RUBOUT A C"))
    r = run("prepare", "an4", an4, out, "--dev-utts", "2")
    assert r.exit_code == 0, r.output
    assert read_table(out / "train" / "text")["fbbh-cen7-b"] == "RUBOUT A C"

"""Transcribe raw audio: segmenter, audio in (rates, channels, bad files), Transcriber from Python, CLI."""

import json

import numpy as np
import soundfile as sf

from asrtrain.transcribe.segment import cut_points



def test_ten_minutes_are_cut_into_bounded_segments_that_tile_it_at_the_silences():
    rate = 16000
    words = [np.full(int(0.8 * rate), 0.5, np.float32), np.zeros(int(0.7 * rate), np.float32)]
    wave = np.tile(np.concatenate(words), 400)  # 10 minutes: 0.8 s "words", 0.7 s silences
    cuts = cut_points(wave, rate, 30.0)
    assert cuts[0][0] == 0 and cuts[-1][1] == len(wave)
    assert all(a[1] == b[0] for a, b in zip(cuts, cuts[1:]))  # nothing lost, nothing doubled
    assert all(hi - lo <= 30 * rate for lo, hi in cuts)
    assert all(wave[hi] == 0 for _, hi in cuts[:-1])  # every cut inside a silence, never in a word


def test_transcriber_from_python_same_text_from_a_file_and_from_samples(exp, tmp_path, speechy):
    import asrtrain
    tr = asrtrain.Transcriber.load(exp)
    wave = speechy(2.0, 16000)
    sf.write(tmp_path / "a.flac", wave, 16000)
    a = tr.transcribe(tmp_path / "a.flac")
    b = tr.transcribe(wave, sample_rate=16000)
    assert a.text == b.text and a.segments == [(0.0, 2.0)]
    assert all(0 <= w.start < w.end <= 2.0 + 0.1 for w in a.words)
    # the same text as decode's model over the same features (the greedy path over the model's log-probs)
    from asrtrain.decode.ctc import greedy
    lp = tr.log_probs([tr.features(wave)])[0]
    assert a.text == tr.tok.decode(greedy(lp)[0])


def test_8khz_stereo_is_mixed_and_resampled_to_the_model_rate(exp, tmp_path, caplog, speechy):
    from asrtrain.transcribe.audio_in import to_model_input
    st = np.stack([speechy(1.0, 8000), speechy(1.0, 8000, 1)], axis=1)
    wave, done = to_model_input(st, 8000, 16000)
    assert len(wave) == 16000 and done == "2 channels mixed, resampled 8000 -> 16000 Hz"
    w1, done1 = to_model_input(st, 8000, 16000, channel=1)
    assert "channel 1 of 2" in done1 and not np.allclose(w1, wave)
    sf.write(tmp_path / "s.wav", st, 8000)
    import asrtrain
    assert isinstance(asrtrain.Transcriber.load(exp).transcribe(str(tmp_path / "s.wav")).text, str)


def test_long_audio_is_transcribed_in_segments_with_times_from_the_file_start(exp, speechy):
    import asrtrain
    tr = asrtrain.Transcriber.load(exp, max_segment_s=2.0)
    res = tr.transcribe(speechy(7.0, 16000), sample_rate=16000)
    assert len(res.segments) >= 4 and res.segments[-1][1] == 7.0
    assert all(w.end <= 7.1 for w in res.words)


def test_cli_bad_files_get_one_line_each_and_the_good_ones_are_transcribed(exp, tmp_path, caplog, speechy):
    from tests.helpers.cli_helpers import run
    good = tmp_path / "good.wav"
    sf.write(good, speechy(1.0, 16000), 16000)
    (tmp_path / "empty.wav").write_bytes(b"")
    (tmp_path / "text.wav").write_text("not audio at all\n")
    sf.write(tmp_path / "zero.wav", np.zeros(0, np.float32), 16000)
    nan = speechy(1.0, 16000)
    nan[100] = np.nan
    sf.write(tmp_path / "nan.wav", nan, 16000, subtype="FLOAT")
    bad = ["empty.wav", "text.wav", "zero.wav", "nan.wav"]
    out = tmp_path / "hyp.json"
    res = run("transcribe", exp, good, *[tmp_path / b for b in bad], "--format", "json", "--out", out)
    assert res.exit_code == 1, res.output
    assert "Traceback" not in res.output
    for b in bad:
        errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
        assert sum(b in ln.split(":")[0] for ln in errors) == 1, (b, errors)
    assert len(errors) == len(bad)
    for b in bad:  # each error line names its file once (it read "x.wav: x.wav: ..." where the error named it)
        line = next(ln for ln in errors if b in ln)
        assert line.count(b) == 1, line
    rows = [json.loads(ln) for ln in out.read_text().splitlines()]
    assert [r["utt"] for r in rows] == ["good"] and "words" in rows[0]


def test_cli_text_lines_from_a_wav_scp_with_a_pipe(exp, tmp_path, speechy):
    from tests.helpers.cli_helpers import run
    sf.write(tmp_path / "a.wav", speechy(1.0, 16000), 16000)
    (tmp_path / "wav.scp").write_text(f"u1 {tmp_path / 'a.wav'}\nu2 cat {tmp_path / 'a.wav'} |\n")
    res = run("transcribe", exp, tmp_path / "wav.scp")
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("u")]
    assert [ln.split()[0] for ln in lines] == ["u1", "u2"]
    assert lines[0].split()[1:] == lines[1].split()[1:]


def test_cli_reads_paths_from_stdin_and_a_directory(exp, tmp_path, speechy):
    from click.testing import CliRunner
    from asrtrain.cli import cli
    (tmp_path / "d").mkdir()
    for name in ("x", "y"):
        sf.write(tmp_path / "d" / f"{name}.wav", speechy(0.8, 16000), 16000)
    res = CliRunner().invoke(cli, ["transcribe", str(exp), "-"], input=f"{tmp_path / 'd' / 'x.wav'}\n")
    assert res.exit_code == 0 and res.stdout.split()[0] == "x", res.output
    res = CliRunner().invoke(cli, ["transcribe", str(exp), str(tmp_path / "d")])
    assert [ln.split()[0] for ln in res.stdout.splitlines()] == ["x", "y"], res.output

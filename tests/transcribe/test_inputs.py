"""What transcribe takes in: channels, samples from Python (dtypes, layouts, rates), utterance ids
(duplicates, whitespace), directories (what is skipped), empty inputs, out-of-range floats."""

import numpy as np
import pytest
import soundfile as sf

from asrtrain.errors import AsrError
from tests.helpers.cli_helpers import one_error, run


@pytest.fixture(scope="module")
def tr(exp):
    import asrtrain
    return asrtrain.Transcriber.load(exp)


def test_a_negative_channel_is_refused_in_one_line_on_the_cli_and_in_python(exp, tr, tmp_path, speechy):
    st = tmp_path / "st.wav"
    sf.write(st, np.stack([speechy(0.5, 16000), speechy(0.5, 16000, 1)], axis=1), 16000)
    for ch in ("-3", "-1"):
        assert "--channel " + ch + ": channels count from 0" in one_error(run("transcribe", exp, st, "--channel", ch))
    # checked before any model is loaded, so the onnx engine says the same
    assert "channels count from 0" in one_error(run("transcribe", "--engine", "onnx", tmp_path / "no_export",
                                                    st, "--channel", "-3"))
    with pytest.raises(AsrError, match="channel=-5: channels count from 0"):
        tr.transcribe_many([("a", str(st))], channel=-5)  # the call fails, not each input
    with pytest.raises(AsrError, match="channel=-1"):
        tr.transcribe(str(st), channel=-1)
    with pytest.raises(AsrError, match="not a channel number"):
        tr.transcribe(str(st), channel=1.0)
    assert tr.transcribe(str(st), channel=np.int64(1)).text == tr.transcribe(str(st), channel=1).text


def test_integer_pcm_from_python_is_scaled_as_soundfile_reads_it(tr, tmp_path, speechy):
    x = speechy(1.0, 16000)
    sf.write(tmp_path / "a.wav", x, 16000, subtype="PCM_16")
    want = tr.audio(str(tmp_path / "a.wav"))
    for dtype in ("int16", "int32"):
        pcm, _ = sf.read(tmp_path / "a.wav", dtype=dtype)  # what scipy.io.wavfile.read gives too
        np.testing.assert_array_equal(tr.audio(pcm, sample_rate=16000), want)
    u8 = np.round(x * 127 + 128).astype(np.uint8)
    np.testing.assert_allclose(tr.audio(u8, sample_rate=16000), (u8.astype(np.float32) - 128) / 128)
    for bad, said in ((np.arange(4000), "int64 samples have no known scale"), (x > 0, "dtype bool"),
                      (x.astype(np.complex64), "dtype complex64"), (np.array(["a", "b"]), "are not audio"),
                      ([[1.0, 2.0], [3.0]], "not an array of numbers")):
        with pytest.raises(AsrError, match=said):
            tr.audio(bad, sample_rate=16000)


def test_channels_first_samples_are_turned_round_and_unclear_shapes_refused(tr, speechy):
    st = np.stack([speechy(1.0, 16000), speechy(1.0, 16000, 1)], axis=1)  # [n, 2]: soundfile's layout
    np.testing.assert_array_equal(tr.audio(st.T.copy(), sample_rate=16000), tr.audio(st, sample_rate=16000))
    np.testing.assert_array_equal(tr.audio(st[:, :1].T, sample_rate=16000), tr.audio(st[:, 0], sample_rate=16000))
    assert tr.transcribe(st.T, sample_rate=16000, channel=1).text == tr.transcribe(st[:, 1], sample_rate=16000).text
    for shape in ((2, 2), (40, 100), (1, 16000, 1)):
        with pytest.raises(AsrError, match="samples of shape"):
            tr.audio(np.zeros(shape, np.float32), sample_rate=16000)


def test_a_bad_sample_rate_or_one_given_with_a_path_is_refused_in_one_line(tr, tmp_path, speechy):
    x = speechy(1.0, 16000)
    for rate, said in ((0, "must be positive"), (-16000, "must be positive"), (16000.5, "whole number of Hz"),
                       (float("nan"), "whole number"), ("16000", "not a number"), (True, "not a number"),
                       (None, "need their sample_rate")):
        with pytest.raises(AsrError, match=said):
            tr.audio(x, sample_rate=rate)
    np.testing.assert_array_equal(tr.audio(x, sample_rate=16000.0), tr.audio(x, sample_rate=16000))
    sf.write(tmp_path / "a.wav", x, 16000)
    with pytest.raises(AsrError, match="given with a path"):
        tr.transcribe(tmp_path / "a.wav", sample_rate=16000)


def _wavs(tmp_path, speechy, *names):
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        sf.write(tmp_path / name, speechy(0.5, 16000), 16000, format="FLAC" if name.endswith(".flac") else "WAV")
    return [tmp_path / n for n in names]


def test_two_inputs_with_the_same_id_are_refused_before_decoding_naming_both(exp, tmp_path, speechy):
    a, b, c, d = _wavs(tmp_path, speechy, "dup/x.wav", "other/x.wav", "in/a.wav", "in/a.flac")
    err = one_error(run("transcribe", exp, a, b))
    assert "utterance id 'x' is given by two inputs" in err and str(a) in err and str(b) in err
    assert "wav.scp" in err  # the fix: rename, or ids of your own
    assert "'a' is given by two inputs" in one_error(run("transcribe", exp, c, d))
    assert "'a' is given by two inputs" in one_error(run("transcribe", exp, tmp_path / "in"))  # a dir too
    assert "is given by two inputs" in one_error(run("transcribe", exp, tmp_path))  # in/a.*, dup/x, other/x
    assert "given by two inputs" in one_error(run("transcribe", exp, a, a))
    (tmp_path / "wav.scp").write_text(f"x {c}\n")
    assert "given by two inputs" in one_error(run("transcribe", exp, tmp_path / "wav.scp", a))
    (tmp_path / "own.scp").write_text(f"x1 {a}\nx2 {b}\n")  # the fix works
    res = run("transcribe", exp, tmp_path / "own.scp")
    assert res.exit_code == 0 and [ln.split()[0] for ln in res.stdout.splitlines()] == ["x1", "x2"], res.output


def test_whitespace_in_a_file_name_becomes_underscores_in_its_id_and_is_logged(exp, tmp_path, speechy, caplog):
    import logging
    (spaced,) = _wavs(tmp_path, speechy, "with space.wav")
    with caplog.at_level(logging.INFO):
        res = run("transcribe", exp, spaced, "--format", "ctm")
    assert res.exit_code == 0, res.output
    assert all(ln.split()[0] == "with_space" for ln in res.stdout.splitlines())
    assert any("utterance id 'with_space'" in r.getMessage() and "with space.wav" in r.getMessage()
               for r in caplog.records)
    _wavs(tmp_path, speechy, "with_space.wav")  # the replaced id then collides: refused, both named
    err = one_error(run("transcribe", exp, spaced, tmp_path / "with_space.wav"))
    assert "'with_space' is given by two inputs" in err and "with space.wav" in err


def test_a_directory_follows_symlinked_dirs_once_and_logs_what_it_skips(tmp_path, speechy, caplog):
    import logging
    import os
    from asrtrain.transcribe.inputs import expand_inputs
    _wavs(tmp_path, speechy, "d/UPPER.WAV", "d/rec.wave", "d/notes.txt", "elsewhere/far.wav", "d/sub/near.wav")
    os.symlink(tmp_path / "elsewhere", tmp_path / "d" / "linked")
    os.symlink(tmp_path / "d", tmp_path / "d" / "sub" / "up")  # a loop back up
    os.symlink(tmp_path / "gone.wav", tmp_path / "d" / "dangle.wav")
    with caplog.at_level(logging.INFO):
        pairs = expand_inputs([str(tmp_path / "d")])
    assert [u for u, _ in pairs] == ["UPPER", "far", "near"]
    said = " | ".join(r.getMessage() for r in caplog.records)
    assert "skipped 2 file(s) that are not audio by suffix" in said and "rec.wave" in said, said
    assert "skipped 1 entries that are not regular files" in said and "dangle.wav" in said, said
    assert "already walked" in said and "up" in said, said


def test_empty_stdin_or_wav_scp_is_refused_like_an_empty_directory(exp, tmp_path):
    from click.testing import CliRunner
    from asrtrain.cli import cli
    res = CliRunner().invoke(cli, ["transcribe", str(exp), "-"], input="\n")
    assert "no paths on stdin" in one_error(res)
    (tmp_path / "wav.scp").write_text("")
    assert "holds no entries" in one_error(run("transcribe", exp, tmp_path / "wav.scp"))
    (tmp_path / "empty").mkdir()
    assert "no audio files" in one_error(run("transcribe", exp, tmp_path / "empty"))


def test_no_real_time_factor_when_nothing_was_decoded(exp, tmp_path, caplog):
    import logging
    (tmp_path / "text.wav").write_text("not audio\n")
    with caplog.at_level(logging.INFO):
        one_error(run("transcribe", exp, tmp_path / "text.wav"))
    done = [r.getMessage() for r in caplog.records if r.getMessage().startswith("transcribed 0 of 1")]
    assert len(done) == 1 and "real-time factor" not in done[0], done


def test_float_samples_far_outside_the_unit_range_get_a_warning_naming_the_file(exp, tr, tmp_path, speechy,
                                                                                caplog):
    import logging
    x = speechy(1.0, 16000)
    x = x / np.abs(x).max()
    sf.write(tmp_path / "loud.wav", 8.0 * x, 16000, subtype="FLOAT")
    sf.write(tmp_path / "hot.wav", 1.2 * x, 16000, subtype="FLOAT")  # a little over: no warning
    with caplog.at_level(logging.INFO):
        res = run("transcribe", exp, tmp_path / "loud.wav", tmp_path / "hot.wav")
        tr.transcribe(x * 32768, sample_rate=16000)  # Kaldi's int16 scale, as floats
    assert res.exit_code == 0, res.output
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 2, warned
    assert "loud.wav: sample values reach 8" in warned[0] and "outside [-1, 1]" in warned[0]
    assert warned[1].startswith("samples: sample values reach 3.28e+04")


def test_a_stream_mode_wav_is_transcribed_as_the_whole_file(tr, tmp_path, speechy):
    """A wav whose data size a streaming writer left at 0 is read to its end (libsndfile alone reads
    nothing), as a file and through a pipe, as training's reader reads it."""
    import struct
    sf.write(tmp_path / "a.wav", speechy(0.8, 16000), 16000, subtype="PCM_16")
    raw = bytearray((tmp_path / "a.wav").read_bytes())
    assert raw[36:40] == b"data"
    raw[40:44] = struct.pack("<I", 0)
    (tmp_path / "s.wav").write_bytes(bytes(raw))
    want = tr.audio(str(tmp_path / "a.wav"))
    np.testing.assert_array_equal(tr.audio(str(tmp_path / "s.wav")), want)
    np.testing.assert_array_equal(tr.audio(f"cat {tmp_path / 's.wav'} |"), want)

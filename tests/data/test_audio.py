"""Audio reading: wav/flac/SPHERE (PCM, µ-law; 1 and 2 channels), pipes, segments, resampling, bad audio."""

import shutil

import numpy as np
import pytest
import soundfile as sf

from asrtrain.data.audio import channel_index, load_audio, sphere_header
from asrtrain.errors import AsrError
from tests.helpers.sphere_fixture import tone, ulaw_decode, ulaw_encode, write_sphere


def _stereo(rate=8000, seconds=0.5):
    return np.stack([tone(seconds, rate, 440, seed=1), tone(seconds, rate, 1000, amplitude=3000, seed=2)], 1)


@pytest.mark.parametrize("coding", ["pcm", "ulaw"])
def test_sphere_mono_and_stereo(tmp_path, coding):
    """libsndfile reads SPHERE PCM and µ-law, 1 and 2 channels; A/B pick the channels."""
    x = _stereo()
    want = x if coding == "pcm" else ulaw_decode(ulaw_encode(x))
    mono = write_sphere(tmp_path / "m.sph", x[:, 0], coding=coding)
    wave, rate = load_audio(str(mono))
    assert rate == 8000 and str(wave.dtype) == "torch.float32"
    np.testing.assert_array_equal(np.round(wave.numpy() * 32768).astype(np.int32), want[:, 0])
    stereo = write_sphere(tmp_path / "s.sph", x, coding=coding)
    for ch, col in (("A", 0), ("B", 1), ("2", 1), (0, 0)):
        wave, _ = load_audio(str(stereo), channel=ch)
        np.testing.assert_array_equal(np.round(wave.numpy() * 32768).astype(np.int32), want[:, col])


def test_sphere_big_endian_pcm(tmp_path):
    x = tone(0.2, 8000)
    path = write_sphere(tmp_path / "be.sph", x, byte_format="10")
    wave, _ = load_audio(str(path))
    np.testing.assert_array_equal(np.round(wave.numpy() * 32768).astype(np.int32), x)


def test_multichannel_without_channel_is_an_error(tmp_path):
    path = write_sphere(tmp_path / "s.sph", _stereo())
    with pytest.raises(AsrError, match="2 channels but no channel") as err:
        load_audio(str(path), scp_path="data/wav.scp", scp_line=3)
    assert err.value.render().startswith("data/wav.scp:3: ")
    with pytest.raises(AsrError, match="channel C"):
        load_audio(str(path), channel="C")


def test_shorten_sphere_names_sph2pipe(tmp_path):
    path = write_sphere(tmp_path / "sw02001.sph", _stereo(), coding="shorten")
    assert "shorten" in sphere_header(str(path))["sample_coding"]
    with pytest.raises(AsrError) as err:
        load_audio(str(path), channel="B", scp_path="wav.scp", scp_line=7)
    msg = err.value.render()
    assert msg.startswith("wav.scp:7: ") and "shorten" in msg
    assert f"sph2pipe -f wav -p -c 2 {path} |" in msg
    assert ("sph2pipe is at" if shutil.which("sph2pipe") else "sph2pipe is not on PATH") in msg


def test_pipe_segments_and_flac(tmp_path):
    x = tone(1.0, 16000)
    sf.write(tmp_path / "a.wav", x, 16000, subtype="PCM_16")
    sf.write(tmp_path / "a.flac", x, 16000, subtype="PCM_16")
    full, _ = load_audio(f"cat {tmp_path / 'a.wav'} |")
    np.testing.assert_array_equal(np.round(full.numpy() * 32768).astype(np.int32), x)
    flac, _ = load_audio(str(tmp_path / "a.flac"))
    np.testing.assert_array_equal(flac.numpy(), full.numpy())
    for spec in (str(tmp_path / "a.wav"), f"cat {tmp_path / 'a.wav'} |"):
        seg, _ = load_audio(spec, start=0.25, end=0.5)
        np.testing.assert_array_equal(seg.numpy(), full.numpy()[4000:8000])
        tail, _ = load_audio(spec, start=0.75, end=-1)
        assert tail.shape[0] == 4000
        # Kaldi's 0.5 s overshoot tolerance: clipped to the end, beyond it an error
        clipped, _ = load_audio(spec, start=0.9, end=1.3)
        assert clipped.shape[0] == 1600
        with pytest.raises(AsrError, match="past the recording's end"):
            load_audio(spec, start=0.9, end=1.6)


def test_pipe_failures(tmp_path):
    with pytest.raises(AsrError, match="not found on PATH") as err:
        load_audio("no-such-tool-xyz -f wav x.sph |", scp_path="wav.scp", scp_line=2)
    assert err.value.render().startswith("wav.scp:2: ")
    with pytest.raises(AsrError, match="exit code 3"):
        load_audio("echo oops >&2; exit 3 |")
    with pytest.raises(AsrError, match="not readable audio"):
        load_audio("echo hello |")


def test_resampling_and_rate_mismatch(tmp_path):
    rate = 8000
    t = np.arange(rate) / rate
    x = np.round(8000 * np.sin(2 * np.pi * 500 * t)).astype(np.int16)
    sf.write(tmp_path / "a.wav", x, rate, subtype="PCM_16")
    wave, out_rate = load_audio(str(tmp_path / "a.wav"), target_rate=16000)
    assert out_rate == 16000 and wave.shape[0] == 16000
    # the 500 Hz tone survives: its spectrum peaks at 500 Hz
    spec = np.abs(np.fft.rfft(wave.numpy()))
    assert abs(np.argmax(spec) * 16000 / 16000 - 500) <= 1
    with pytest.raises(AsrError) as err:
        load_audio(str(tmp_path / "a.wav"), target_rate=16000, resample=False, scp_path="d/wav.scp",
                   scp_line=1)
    assert err.value.render().startswith("d/wav.scp:1: sample rate 8000 Hz does not match")
    assert "features.sample_rate=8000" in err.value.render()


def test_missing_truncated_corrupt(tmp_path):
    with pytest.raises(AsrError, match="audio file not found") as err:
        load_audio(str(tmp_path / "nope.wav"), scp_path="wav.scp", scp_line=4)
    assert err.value.render().startswith("wav.scp:4: ")
    x = tone(0.5, 16000)
    sf.write(tmp_path / "a.wav", x, 16000, subtype="PCM_16")
    raw = (tmp_path / "a.wav").read_bytes()
    (tmp_path / "t.wav").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(AsrError, match="truncated"):
        load_audio(str(tmp_path / "t.wav"))
    sph = write_sphere(tmp_path / "a.sph", x).read_bytes()
    (tmp_path / "t.sph").write_bytes(sph[: 1024 + 1000])
    with pytest.raises(AsrError, match="truncated: 500 of 8000"):
        load_audio(str(tmp_path / "t.sph"))
    (tmp_path / "c.wav").write_bytes(b"RIFF this is not audio at all" * 10)
    with pytest.raises(AsrError, match="corrupt or unsupported"):
        load_audio(str(tmp_path / "c.wav"))
    (tmp_path / "e.wav").write_bytes(b"")
    with pytest.raises(AsrError):
        load_audio(str(tmp_path / "e.wav"))


def test_channel_index():
    assert [channel_index(c) for c in ("A", "b", "1", "2", 1, None)] == [0, 1, 0, 1, 1, None]
    with pytest.raises(AsrError):
        channel_index("x1")


def test_streamed_wav_header_through_a_pipe(tmp_path):
    """Tools writing wav to a pipe (sox -t wav -) cannot seek back: sizes are left at 0xFFFFFFFF."""
    import struct
    x = tone(0.3, 16000)
    sf.write(tmp_path / "a.wav", x, 16000, subtype="PCM_16")
    raw = bytearray((tmp_path / "a.wav").read_bytes())
    assert raw[36:40] == b"data"
    raw[4:8] = raw[40:44] = struct.pack("<I", 0xFFFFFFFF)
    (tmp_path / "s.wav").write_bytes(bytes(raw))
    wave, rate = load_audio(f"cat {tmp_path / 's.wav'} |")
    np.testing.assert_array_equal(np.round(wave.numpy() * 32768).astype(np.int32), x)


@pytest.mark.parametrize("riff_size", [0, None], ids=["riff-0", "riff-kept"])
def test_stream_mode_wav_with_zero_sizes_is_read_to_its_end(tmp_path, riff_size):
    """A writer that cannot seek back may leave the data size at 0 (Kaldi's wave reader then reads to the
    end of the file); libsndfile reads such a file as empty, and validate/features used to refuse it as
    holding no samples. As a file, through a pipe, for validate's header check and for data info."""
    import struct
    from asrtrain.data.audio import Where, audio_duration, file_info
    x = tone(0.3, 16000)
    sf.write(tmp_path / "a.wav", x, 16000, subtype="PCM_16")
    raw = bytearray((tmp_path / "a.wav").read_bytes())
    assert raw[36:40] == b"data"
    raw[40:44] = struct.pack("<I", 0)
    if riff_size is not None:
        raw[4:8] = struct.pack("<I", riff_size)
    path = tmp_path / "s.wav"
    path.write_bytes(bytes(raw))
    assert sf.info(str(path)).frames == 0  # what libsndfile alone makes of it
    assert file_info(str(path), Where()).frames == len(x)
    assert audio_duration(str(path)) == pytest.approx(0.3)
    for spec in (str(path), f"cat {path} |"):
        wave, rate = load_audio(spec)
        assert rate == 16000
        np.testing.assert_array_equal(np.round(wave.numpy() * 32768).astype(np.int32), x)
    wave, _ = load_audio(str(path), start=0.1, end=0.2)  # a segment of it
    assert wave.shape[0] == 1600
    empty = tmp_path / "e.wav"
    empty.write_bytes(bytes(raw[:44]))  # the header alone: still nothing to read
    with pytest.raises(AsrError, match="holds no samples"):
        file_info(str(empty), Where())

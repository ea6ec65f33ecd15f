"""MANIFEST.sha256: one reader (torch-free) for every loader; empty lines are skipped as sha256sum skips them,
any other malformed line is one error naming MANIFEST.sha256:LINE and the fix."""

import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf

from asrtrain.errors import AsrError
from asrtrain.transcribe.manifest import MANIFEST, read_manifest, verify, write_manifest


def _dir(tmp_path, *names):
    d = tmp_path / "pack"
    d.mkdir()
    for n in names or ("config.yaml", "model.safetensors"):
        (d / n).write_text(f"{n}\n")
    write_manifest(d)
    return d


def _append(d, data: bytes):
    with open(d / MANIFEST, "ab") as fh:
        fh.write(data)


def test_empty_lines_are_skipped_as_sha256sum_skips_them(tmp_path):
    d = _dir(tmp_path)
    _append(d, b"\n  \n")
    verify(d)
    assert set(read_manifest(d)) == {"config.yaml", "model.safetensors"}


def test_sha256sums_binary_marker_is_read(tmp_path):
    d = _dir(tmp_path)
    (d / MANIFEST).write_text((d / MANIFEST).read_text().replace("  model", " *model"))
    verify(d)


@pytest.mark.parametrize("junk, why", [
    (b"garbage\n", "not a manifest line"),
    (b"\xff\xfe\n", "not UTF-8"),
    (b"abc123  config.yaml\n", "not a manifest line"),
    (b"0" * 64 + b"  ../outside\n", "not a file of this directory"),
    (b"0" * 64 + b"  config.yaml\n", "listed twice"),
])
def test_a_malformed_line_is_one_error_naming_its_line(tmp_path, junk, why):
    d = _dir(tmp_path)
    _append(d, b"\n" + junk)
    with pytest.raises(AsrError) as err:
        verify(d)
    assert why in err.value.message or why in err.value.render() and err.value.path == str(d / MANIFEST) and err.value.line == 4
    assert "pack" in err.value.fix


def test_the_reader_imports_no_torch():
    code = ("import sys; sys.modules['torch'] = None\n"
            "from asrtrain.transcribe import manifest, onnx_engine  # noqa\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("junk", [b"garbage\n", b"\xff\xfe"])
def test_transcribe_and_export_of_a_pack_with_a_bad_manifest_line_are_one_line(exp, tmp_path, junk):
    import asrtrain
    from asrtrain.transcribe.pack import pack
    from tests.helpers.cli_helpers import one_error, run
    packed = pack(exp, tmp_path / "model")
    lines = len((packed / MANIFEST).read_text().splitlines())
    _append(packed, b"\n" + junk)
    sf.write(tmp_path / "a.wav", np.zeros(16000, np.float32), 16000)
    where = f"{MANIFEST}:{lines + 2}"
    assert where in one_error(run("transcribe", packed, tmp_path / "a.wav"))
    assert where in one_error(run("export", packed, tmp_path / "out"))
    with pytest.raises(AsrError, match=where):
        asrtrain.Transcriber.load(packed)
    (packed / MANIFEST).write_bytes((packed / MANIFEST).read_bytes().split(b"\n\n")[0] + b"\n\n")
    assert run("transcribe", packed, tmp_path / "a.wav").exit_code == 0  # an empty line alone is fine

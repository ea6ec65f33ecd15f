"""The onnxruntime snippet of docs/guide/transcribe.md runs as printed (with torch not importable) and
prints the onnx engine's text."""

import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "guide" / "transcribe.md"


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["stack", "conv"])
def test_the_guides_onnxruntime_snippet_prints_the_onnx_engines_text(exported, wavs, variant):
    from asrtrain.transcribe.onnx_engine import OnnxTranscriber
    _, out = exported(variant)
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    snippet = next(b for b in blocks if "onnxruntime" in b and "InferenceSession" in b)
    assert '"models/an4-onnx"' in snippet and '"recording.wav"' in snippet
    code = snippet.replace('"models/an4-onnx"', repr(str(out))).replace('"recording.wav"', repr(str(wavs[2])))
    code = "import sys; sys.modules['torch'] = None; sys.modules['torchaudio'] = None\n" + code
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    tr = OnnxTranscriber.load(out)
    # the snippet runs knf without dither (the conv variant was trained with dither 1): so does the engine here
    tr.cfg = replace(tr.cfg, features=replace(tr.cfg.features, dither=0.0))
    want = tr.transcribe(wavs[2]).text
    assert want and res.stdout.strip() == want

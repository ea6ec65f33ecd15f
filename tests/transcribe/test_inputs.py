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

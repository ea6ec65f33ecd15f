"""Errors that name what the user gave: an --out that is a directory is named, not the temp file beside it;
a model dir that does not exist is said not to exist."""

import numpy as np
import soundfile as sf

from tests.helpers.cli_helpers import one_error, run


def test_an_out_that_is_a_directory_is_named_not_its_temp_file(exp, tmp_path):
    sf.write(tmp_path / "a.wav", np.zeros(16000, np.float32), 16000)
    (tmp_path / "outdir").mkdir()
    err = one_error(run("transcribe", exp, tmp_path / "a.wav", "--out", tmp_path / "outdir"))
    assert f"{tmp_path / 'outdir'}: is a directory" in err and ".tmp" not in err


def test_a_model_dir_that_does_not_exist_is_said_not_to(tmp_path):
    sf.write(tmp_path / "a.wav", np.zeros(16000, np.float32), 16000)
    err = one_error(run("transcribe", tmp_path / "nowhere", tmp_path / "a.wav"))
    assert "nowhere: no such directory" in err
    assert "no such directory" in one_error(run("pack", tmp_path / "nowhere", tmp_path / "p"))


def test_cmvn_stats_for_a_model_without_global_cmvn_is_refused_as_utt2spk_is_for_a_global_one(exp, tmp_path):
    from asrtrain.features.cmvn import accumulate, write_global
    sf.write(tmp_path / "a.wav", np.zeros(16000, np.float32), 16000)
    write_global(tmp_path / "cmvn_global.ark", accumulate(np.random.default_rng(0).normal(size=(50, 23))))
    for res in (run("transcribe", exp, tmp_path / "a.wav", "--cmvn-stats", tmp_path / "cmvn_global.ark"),
                run("export", exp, tmp_path / "out", "--cmvn-stats", tmp_path / "cmvn_global.ark")):
        err = one_error(res)
        assert "cmvn_global.ark: --cmvn-stats is for a model trained with global CMVN" in err
        assert "this model's CMVN is speaker" in err and "drop --cmvn-stats" in err
    assert not (tmp_path / "out").exists()

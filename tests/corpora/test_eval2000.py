"""Hub5-2000 (LDC2002S09 + LDC2002T43) preparation on a miniature layout: Kaldi's ids, segments, text,
stm/glm copies, errors and the CLI."""

from __future__ import annotations

import os
import stat

import pytest
from click.testing import CliRunner

from asrtrain.cli import cli
from asrtrain.corpora.eval2000 import extend_segments, prepare_eval2000
from asrtrain.data.table import read_table
from asrtrain.errors import AsrError
from tests.helpers.swbd_fixture import GLM, make_hub5


@pytest.fixture(scope="module")
def hub5(tmp_path_factory):
    return make_hub5(tmp_path_factory.mktemp("hub5"))


@pytest.fixture(scope="module")
def prepared(hub5, tmp_path_factory):
    out = tmp_path_factory.mktemp("data") / "eval2000"
    prepare_eval2000(hub5.audio_dir, hub5.text_dir, out)
    return out


def test_ids_segments_and_text(prepared):
    # 0.29 * 100 and 1.15 * 100 fall just below an integer in binary; awk's %06d truncates, so do we
    assert read_table(prepared / "segments") == {
        "en_4156-A_000028-000200": "en_4156-A 0.19 2.02",  # extended 0.1 at the start, half the gap after
        "en_4156-B_000100-000300": "en_4156-B 0.90 3.10",
        "sw_4390-A_000114-000350": "sw_4390-A 1.05 3.60",
        "sw_4390-B_000050-000200": "sw_4390-B 0.40 2.10",
    }
    text = read_table(prepared / "text")
    assert text["en_4156-A_000028-000200"] == "hello there (%HESITATION) how are you"
    assert text["en_4156-B_000100-000300"] == "((fine)) thanks <B_ASIDE> (uh-) i am <E_ASIDE>"
    # the pem segment 2.05-4.00 (id ..._000204-000400, 2.05 * 100 truncating too) is IGNORE_TIME_SEGMENT_...
    assert "en_4156-A_000204-000400" not in text and len(text) == 4
    assert read_table(prepared / "utt2spk")["sw_4390-B_000050-000200"] == "sw_4390-B"


def test_recordings_channels_and_consistency(prepared, hub5):
    english = hub5.audio_dir / "english"
    wav = read_table(prepared / "wav.scp")
    assert wav == {"en_4156-A": str((english / "en_4156.sph").resolve()),
                   "en_4156-B": str((english / "en_4156.sph").resolve()),
                   "sw_4390-A": str((english / "sw_4390.sph").resolve()),
                   "sw_4390-B": str((english / "sw_4390.sph").resolve())}  # en_6000 has no segments
    assert read_table(prepared / "reco2file_and_channel") == {
        "en_4156-A": "en_4156 A", "en_4156-B": "en_4156 B",
        "sw_4390-A": "sw_4390 A", "sw_4390-B": "sw_4390 B"}
    for name in ("text", "segments", "utt2spk", "spk2utt", "wav.scp", "reco2file_and_channel"):
        keys = [ln.split()[0] for ln in (prepared / name).read_text().splitlines()]
        assert keys == sorted(keys), name
    assert list(read_table(prepared / "segments")) == list(read_table(prepared / "text")) \
        == list(read_table(prepared / "utt2spk"))


def test_stm_fixed_and_glm_copied(prepared):
    stm = (prepared / "stm").read_text().splitlines()
    assert stm[0].startswith(";; CATEGORY")
    assert stm[6] == "en_4156 B en_4156_B 1.00 3.00 <O,en,M,en-M> (fine)) thanks  (uh-) i am "
    assert "IGNORE_TIME_SEGMENT_IN_SCORING" in stm[5]
    assert (prepared / "glm").read_text() == GLM


def test_extend_segments_matches_kaldi_examples():
    # the examples at the end of Kaldi's local/extend_segments.pl
    rows = [("a1", "A", 0.0, 1.0), ("a2", "A", 3.0, 4.0), ("b1", "B", 0.0, 1.0), ("b2", "B", 2.0, 3.0)]
    assert extend_segments(rows, 1.0) == [("a1", "A", 0.0, 2.0), ("a2", "A", 2.0, 5.0),
                                          ("b1", "B", 0.0, 1.5), ("b2", "B", 1.5, 4.0)]
    assert extend_segments([("a1", "A", 0.0, 2.0), ("a2", "A", 1.0, 3.0)], 1.0) == \
        [("a1", "A", 0.0, 2.0), ("a2", "A", 1.0, 4.0)]
    assert extend_segments([("a1", "A", 0.0, 2.0), ("a2", "A", 5.0, 6.0), ("a3", "A", 3.0, 4.0)], 1.0) == \
        [("a1", "A", 0.0, 2.5), ("a2", "A", 4.5, 7.0), ("a3", "A", 2.5, 4.5)]


def test_misnamed_dirs_list_what_is_expected(hub5, tmp_path):
    with pytest.raises(AsrError) as err:
        prepare_eval2000(hub5.text_dir, hub5.text_dir, tmp_path / "out")
    assert f"{hub5.text_dir}/english/hub5e_00.pem" in str(err.value)
    with pytest.raises(AsrError) as err:
        prepare_eval2000(hub5.audio_dir, hub5.audio_dir, tmp_path / "out")
    msg = str(err.value)
    assert f"{hub5.audio_dir}/reference/hub5e00.english.000405.stm" in msg
    assert f"{hub5.audio_dir}/reference/en20000405_hub5.glm" in msg
    # the LDC2002S09 root (holding hub5e_00/) and the unpacked T43 reference dir are accepted too
    prepare_eval2000(hub5.audio_dir.parent, hub5.text_dir / "2000_hub5_eng_eval_tr", tmp_path / "ok")
    assert (tmp_path / "ok" / "stm").is_file()


def test_pem_and_stm_must_agree(tmp_path):
    fx = make_hub5(tmp_path)
    pem = fx.audio_dir / "english" / "hub5e_00.pem"
    pem.write_text(pem.read_text() + "sw_4390 B unknown_speaker 3.00 3.90\n")
    with pytest.raises(AsrError, match="1 only in the pem"):
        prepare_eval2000(fx.audio_dir, fx.text_dir, tmp_path / "out")


def test_shortened_audio_uses_sph2pipe(tmp_path, monkeypatch):
    fx = make_hub5(tmp_path, shorten=True)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(AsrError, match="sph2pipe"):
        prepare_eval2000(fx.audio_dir, fx.text_dir, tmp_path / "out")
    prog = tmp_path / "tools" / "my-sph2pipe"
    prog.parent.mkdir()
    prog.write_text("#!/bin/sh\nexit 0\n")
    prog.chmod(prog.stat().st_mode | stat.S_IEXEC)
    prepare_eval2000(fx.audio_dir, fx.text_dir, tmp_path / "out", sph2pipe=str(prog))
    wav = read_table(tmp_path / "out" / "wav.scp")
    path = (fx.audio_dir / "english" / "en_4156.sph").resolve()
    assert wav["en_4156-B"] == f"{prog} -f wav -p -c 2 {path} |"
    assert wav["sw_4390-A"] == str((fx.audio_dir / "english" / "sw_4390.sph").resolve())


def test_cli(hub5, tmp_path):
    runner = CliRunner()
    out = tmp_path / "data" / "eval2000"
    res = runner.invoke(cli, ["prepare", "eval2000", str(hub5.audio_dir), str(hub5.text_dir), str(out)])
    assert res.exit_code == 0, res.output
    assert len(read_table(out / "text")) == 4 and (out / "glm").is_file()
    res = runner.invoke(cli, ["prepare", "eval2000", str(tmp_path), str(tmp_path), str(out)])
    assert res.exit_code == 1 and "LDC2002S09" in res.output and "Traceback" not in res.output
    assert os.path.isfile(out / ".eval2000.done")

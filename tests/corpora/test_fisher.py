"""Fisher English preparation (Kaldi's fisher_data_prep.sh) on a miniature layout, and the combination with
Switchboard."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from asrtrain.commands.prepare_swbd import fisher as fisher_command
from asrtrain.corpora.fisher import prepare_fisher
from asrtrain.corpora.swbd import prepare_swbd
from asrtrain.data.table import read_table
from asrtrain.errors import AsrError
from tests.helpers.swbd_fixture import make_fisher, make_swbd


def test_ids_text_segments_and_audio(tmp_path):
    dirs = make_fisher(tmp_path)
    out = prepare_fisher(dirs, tmp_path / "train_fisher")
    assert read_table(out / "text") == {
        "fe_03_00001-A-000028-000150": "hi [laughter] my name is",  # 0.29 * 100 truncates to 28
        "fe_03_00001-A-000310-000400": "[noise] [noise]",
        "fe_03_00001-A-000560-000590": "[noise]",
        "fe_03_00001-B-000400-000550": "and [noise] you",
        "fe_03_05851-A-000050-000200": "yeah",
        "fe_03_05851-B-000210-000300": "uh-huh right",
    }  # the uncertain "(( hello ))" line is dropped, and fe_03_05852 has no audio
    segments = read_table(out / "segments")
    assert segments["fe_03_00001-A-000028-000150"] == "fe_03_00001-A 0.28 1.50"
    assert read_table(out / "utt2spk")["fe_03_05851-B-000210-000300"] == "fe_03_05851-B"
    wav = read_table(out / "wav.scp")
    assert sorted(wav) == ["fe_03_00001-A", "fe_03_00001-B", "fe_03_05851-A", "fe_03_05851-B"]
    assert wav["fe_03_05851-B"].endswith("fisher_eng_tr_sp_d1/audio/058/fe_03_05851.sph")
    assert read_table(out / "reco2file_and_channel")["fe_03_00001-B"] == "fe_03_00001 B"
    assert read_table(out / "spk2utt")["fe_03_00001-B"] == "fe_03_00001-B-000400-000550"


def test_drop_noise(tmp_path):
    out = prepare_fisher(make_fisher(tmp_path), tmp_path / "f", keep_noise=False)
    text = read_table(out / "text")
    assert text["fe_03_00001-B-000400-000550"] == "and you"
    assert not any(k.startswith("fe_03_00001-A-0003") or "[" in v for k, v in text.items())


def test_missing_release_lists_what_is_expected(tmp_path):
    dirs = make_fisher(tmp_path)
    with pytest.raises(AsrError) as err:
        prepare_fisher(dirs[:1] + dirs[2:], tmp_path / "f")  # LDC2005S13 left out
    msg = str(err.value)
    assert "fe_03_p2_sph1" in msg and "fe_03_p2_sph7" in msg and "fisher_eng_tr_sp_d1" in msg
    assert "fe_03_p1_sph1," not in msg


def test_combined_with_switchboard_via_cli(tmp_path):
    swbd = make_swbd(tmp_path / "swbd")
    prepare_swbd(swbd.swbd_dir, tmp_path / "data", dev_utts=3)
    dirs = make_fisher(tmp_path / "fisher")
    data = tmp_path / "data"
    res = CliRunner().invoke(fisher_command, [*map(str, dirs), str(data / "train_fisher"),
                                              "--combine-with", str(data / "train_nodup"),
                                              "--combined-dir", str(data / "train_nodup_fisher")])
    assert res.exit_code == 0, res.output
    both = tmp_path / "data" / "train_nodup_fisher"
    text = read_table(both / "text")
    assert len(text) == 12 + 6
    assert list(text) == sorted(text)
    assert read_table(both / "wav.scp").keys() == (read_table(data / "train_nodup" / "wav.scp")
                                                   | read_table(data / "train_fisher" / "wav.scp")).keys()
    spk2utt = read_table(both / "spk2utt")
    assert sum(len(v.split()) for v in spk2utt.values()) == 18

"""best.yaml of tune-lm: read back, including files written before the OOV penalty existed."""

import pytest

from asrtrain.decode.tune import parse_oov_grid, read_params
from asrtrain.errors import AsrError


def test_a_best_yaml_without_oov_penalty_is_the_closed_search(tmp_path):
    (tmp_path / "best.yaml").write_text("lm_weight: 0.5\nword_bonus: 2\nbeam_size: 10\ndev_wer: 12.1\n")
    assert read_params(tmp_path / "best.yaml") == {"lm_weight": 0.5, "word_bonus": 2, "beam_size": 10,
                                                   "oov_penalty": None, "att_rescore": 0.0, "nbest": 10}
    (tmp_path / "best.yaml").write_text("lm_weight: 0.5\nword_bonus: 2\nbeam_size: 10\noov_penalty: -8\n")
    assert read_params(tmp_path / "best.yaml")["oov_penalty"] == -8.0


def test_oov_grid_puts_closed_first_and_refuses_junk():
    assert parse_oov_grid("-8,closed,-5") == [None, -8.0, -5.0]
    assert parse_oov_grid("closed") == [None]
    for bad in ("closed,closed", "-8,-8", "open", "", "closed,nan"):
        with pytest.raises(AsrError):
            parse_oov_grid(bad)


@pytest.mark.parametrize("line", ["att_rescore: -1", "att_rescore: .nan", "att_rescore: x", "nbest: 0", "nbest: 2.5",
                                  "nbest: true"])
def test_rescoring_params_are_read_back_and_junk_is_named_by_line(tmp_path, line):
    path = tmp_path / "best.yaml"
    path.write_text("lm_weight: 0.5\nword_bonus: 2\nbeam_size: 10\natt_rescore: 0.3\nnbest: 8\n")
    got = read_params(path)
    assert got["att_rescore"] == 0.3 and got["nbest"] == 8 and isinstance(got["nbest"], int)
    key = line.split(":")[0]
    path.write_text("lm_weight: 0.5\nword_bonus: 2\nbeam_size: 10\n" + line + "\n")
    with pytest.raises(AsrError, match=key) as err:
        read_params(path)
    assert err.value.line == 4


def test_att_grid_auto_and_numbers():
    from asrtrain.decode.tune import parse_att_grid

    assert parse_att_grid("auto") is None and parse_att_grid("1,0") == [1.0, 0.0]
    with pytest.raises(AsrError, match="--att-weights"):
        parse_att_grid("auto,1")

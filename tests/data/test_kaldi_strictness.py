"""Where asrtrain's data-dir tools were looser than Kaldi's, and now are not: validate requires ``text``
unless ``--no-text`` (validate_data_dir.sh), subset refuses more utterances than the dir has
(subset_data_dir.sh), and fix leaves a dir that needs nothing alone (no backup of an unchanged dir)."""

from pathlib import Path

import pytest

from tests.helpers.cli_helpers import one_error, run
from tests.helpers.sphere_fixture import make_data_dir


@pytest.fixture
def data(tmp_path):
    return make_data_dir(tmp_path, n_utts=4, speakers=2)


def snapshot(d: Path):
    return {p.relative_to(d): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_validate_requires_text_unless_no_text(data):
    (data / "text").unlink()
    err = one_error(run("data", "validate", data))
    assert f"{data}/text: missing text" in err and "--no-text" in err, err
    r = run("data", "validate", "--no-text", data)
    assert r.exit_code == 0, r.output
    assert "OK (4 utterances" in r.stdout


def test_no_text_still_checks_a_text_that_is_there(data):
    (data / "text").write_text("spk0-utt0 hello <s> world\n")
    err = one_error(run("data", "validate", "--no-text", data))
    assert "holds '<s>'" in err, err


def test_tools_that_select_a_dir_do_not_need_text(data, tmp_path):
    """subset and split take a dir without transcripts (a test set to decode), as Kaldi's do."""
    (data / "text").unlink()
    assert run("data", "subset", data, tmp_path / "sub", "--first", 2).exit_code == 0
    assert not (tmp_path / "sub" / "text").exists()
    assert run("data", "split", data, 2).exit_code == 0


@pytest.mark.parametrize("selector", ["--first", "--last"])
def test_subset_of_more_than_the_dir_has_is_an_error(data, tmp_path, selector):
    err = one_error(run("data", "subset", data, tmp_path / "out", selector, 5))
    assert f"{selector} 5: the data dir has only 4 utterances" in err, err
    assert f"(fix: ask for {selector} 4 or fewer" in err
    assert not (tmp_path / "out").exists()
    r = run("data", "subset", data, tmp_path / "all", selector, 4)  # all of it is fine
    assert r.exit_code == 0 and "4 utterances" in r.stdout, r.output


def test_fix_of_a_clean_dir_changes_nothing_and_keeps_no_backup(data):
    before = snapshot(data)
    r = run("data", "fix", data)
    assert r.exit_code == 0, r.output
    assert "nothing to fix (4 utterances)" in r.stdout, r.stdout
    assert snapshot(data) == before
    assert not list(data.glob(".backup*")) and not (data / "fix_report.txt").exists()
    assert not list(data.glob(".fix-*")), "the trial write was left behind"


def test_fix_that_only_reformats_still_backs_up(data):
    """A valid dir whose files fix would rewrite (here: a tab instead of a space) is a change."""
    text = (data / "text").read_text().splitlines(keepends=True)
    (data / "text").write_text(text[0].replace(" ", "\t", 1) + "".join(text[1:]))
    r = run("data", "fix", data)
    assert r.exit_code == 0, r.output
    assert (data / ".backup" / "text").read_text().startswith(text[0].replace(" ", "\t", 1))
    assert (data / "text").read_text() == "".join(text)
    r = run("data", "fix", data)
    assert "nothing to fix" in r.stdout and not (data / ".backup.1").exists()

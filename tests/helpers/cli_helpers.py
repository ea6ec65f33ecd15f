"""Running the CLI in tests: one call, and the one-line error a failed call must print."""

from click.testing import CliRunner

from asrtrain.cli import cli


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def one_error(result) -> str:
    """The single ``asrtrain: error:`` line of a failed run (no traceback anywhere)."""
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("asrtrain: error:")]
    assert len(lines) == 1, result.stderr
    return lines[0]

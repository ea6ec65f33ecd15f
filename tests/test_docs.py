"""The docs site builds with ``mkdocs build --strict`` and README.md's local links resolve.

The strict build fails on a broken link between pages, a page missing from the site, or a docstring the
API reference cannot render; README.md is not part of the site, so its links are checked here.
"""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"

# Pages README may link to before they land (none now): every other local link must resolve.
PENDING: set = set()

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def readme_links():
    """The local targets of README.md's Markdown links, anchors and queries dropped."""
    targets = []
    for target in LINK.findall(README.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        targets.append(target.split("#", 1)[0].split("?", 1)[0])
    return targets


def test_readme_links_to_local_files_resolve():
    targets = readme_links()
    assert len(targets) > 10  # the regex still finds the links
    broken = [t for t in targets if not (ROOT / t).exists() and t not in PENDING]
    assert not broken, f"README.md links to missing files: {broken}"


def test_readme_is_a_short_page_with_short_table_cells():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 260
    cells = [c.strip() for line in lines if line.startswith("|") for c in line.strip("|").split(" | ")]
    long = [c[:60] for c in cells if len(c) > 200]
    assert not long, f"README table cells over 200 characters: {long}"


@pytest.mark.slow
@pytest.mark.skipif(any(importlib.util.find_spec(m) is None
                        for m in ("mkdocs", "material", "mkdocs_click", "mkdocstrings_handlers")),
                    reason="mkdocs, mkdocs-material, mkdocs-click or mkdocstrings[python] is not installed "
                           "(pip install -e '.[test]')")
def test_mkdocs_build_strict_passes_and_walks_every_subcommand(tmp_path):
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1",
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    site = tmp_path / "site"
    # no -q: it hides the warnings that --strict counts, and the build passes with a broken link
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                          "-f", str(ROOT / "mkdocs.yml"), "-d", str(site)],
                         capture_output=True, text=True, env=env, cwd=ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    from asrtrain.cli import SUBCOMMANDS

    cli_page = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    missing = [name for name in SUBCOMMANDS if f"asrtrain {name}" not in cli_page]
    assert not missing, f"the command-line reference lacks {missing} (the lazy group was not walked)"
    config_page = (site / "reference" / "config" / "index.html").read_text(encoding="utf-8")
    assert "asrtrain.config.schema.TrainConfig.lr" in config_page  # undocumented dataclasses shown too

"""The clean world the trust tests damage copies of (tests/helpers/corpus_world.py): built once for the
whole package (one tiny training run), shared read-only; each case copies what it damages."""

import pytest

from tests.helpers.corpus_world import build_world


@pytest.fixture(scope="package")
def world(tmp_path_factory):
    return build_world(tmp_path_factory.mktemp("world"))

from tests.helpers.sctk_tools import sctk  # noqa: F401  (the session fixture, shared by the parity tests)

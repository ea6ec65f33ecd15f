"""Shared test helpers: fixture corpora, CLI runners, toy loops (import as ``tests.helpers.<module>``)."""

"""Fixtures of the command-line tests."""

from __future__ import annotations

import os

import pytest


@pytest.fixture
def env(temporal_server, tmp_path):
    """passhat commands on the session's Temporal server, with a home (and SQLite
    results store) of the test's own."""
    e = dict(os.environ)
    e.update(
        TEMPORAL_ADDRESS=temporal_server.address,
        PASSHAT_HOME=str(tmp_path / "home"),
        LITELLM_LOCAL_MODEL_COST_MAP="True",
    )
    e.pop("PASSHAT_DB_URL", None)
    return e

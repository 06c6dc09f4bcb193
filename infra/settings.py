"""Where passhat keeps its state and which servers it talks to, from the environment."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_TEMPORAL_PORT = 7233
DEFAULT_UI_PORT = 8233


def home() -> Path:
    """Data directory: results database, embedded Temporal database, logs."""
    return Path(os.environ.get("PASSHAT_HOME", Path.home() / ".passhat")).expanduser()


def db_url() -> str:
    """Results store: PASSHAT_DB_URL (e.g. postgresql+psycopg://...) or a SQLite file."""
    return os.environ.get("PASSHAT_DB_URL") or f"sqlite:///{home() / 'results.db'}"


def temporal_address() -> str | None:
    """A real cluster when TEMPORAL_ADDRESS is set; None means the embedded dev server."""
    return os.environ.get("TEMPORAL_ADDRESS") or None


def temporal_namespace() -> str:
    return os.environ.get("TEMPORAL_NAMESPACE", "default")


def temporal_ui_url() -> str | None:
    """Base URL of the Temporal web UI, for links; PASSHAT_TEMPORAL_UI overrides."""
    return os.environ.get("PASSHAT_TEMPORAL_UI") or None


def jaeger_ui_url() -> str:
    return os.environ.get("PASSHAT_JAEGER_UI", "http://localhost:16686")

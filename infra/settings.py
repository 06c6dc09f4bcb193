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


def _port(variable: str, default: int) -> int:
    value = os.environ.get(variable)
    if not value:
        return default
    return check_port(value, variable)


def check_port(value: int | str, name: str) -> int:
    """`value` as a TCP port number, or ValueError with one line that names where it
    came from (an environment variable or an option)."""
    text = str(value).strip()
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"{name} must be a TCP port number (1-65535), got {value!r}")
    return int(text)


def temporal_port() -> int:
    """The embedded server's gRPC port: PASSHAT_TEMPORAL_PORT, default 7233."""
    return _port("PASSHAT_TEMPORAL_PORT", DEFAULT_TEMPORAL_PORT)


def ui_port() -> int:
    """The embedded server's web UI port: PASSHAT_UI_PORT, default 8233."""
    return _port("PASSHAT_UI_PORT", DEFAULT_UI_PORT)


def temporal_namespace() -> str:
    return os.environ.get("TEMPORAL_NAMESPACE", "default")


def temporal_ui_url() -> str | None:
    """Base URL of the Temporal web UI, for links; PASSHAT_TEMPORAL_UI overrides."""
    return os.environ.get("PASSHAT_TEMPORAL_UI") or None


def jaeger_ui_url() -> str:
    return os.environ.get("PASSHAT_JAEGER_UI", "http://localhost:16686")

"""The test agents (passhat_test_agents) importable and registered in this process, as a
plugin's are; processes these tests start import them through autoload/sitecustomize.py
(AGENTS_ENV)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import passhat_test_agents  # noqa: E402,F401  (registers the agents)


def agents_env(env: dict[str, str]) -> dict[str, str]:
    """`env` for a passhat process that imports the test agents at start."""
    paths = [str(HERE / "autoload"), str(HERE), *filter(None, [env.get("PYTHONPATH")])]
    return {**env, "PYTHONPATH": os.pathsep.join(paths)}

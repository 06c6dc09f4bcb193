"""Workflow tests use the fixtures in tests/conftest.py and the helpers in tests/runs.py."""

from tests.runs import config, run_to_end, worker_for  # noqa: F401  (kept for older imports)

"""The test agents are a plugin (tests/plugin_modules/passhat_test_agents.py), loaded as
a user's is: the runs these tests build name it (`plugins=[TEST_AGENTS]`), and its
folder is on the import path as PYTHONPATH would put it."""

from __future__ import annotations

import pytest

from tests.helpers import PLUGIN_MODULES


@pytest.fixture(autouse=True)
def plugin_modules_importable(monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGIN_MODULES))

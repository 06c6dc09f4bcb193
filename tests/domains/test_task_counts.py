"""`passhat domains` counts tasks from tau2's data files without importing tau2; the
counts are tau2's own."""

from __future__ import annotations

from passhat.domains.tau2_catalog import TAU2_DOMAINS, tau2_task_count


def test_task_counts_equal_tau2s():
    from tau2.registry import registry

    for name in TAU2_DOMAINS:
        assert tau2_task_count(name) == len(registry.get_tasks_loader(name)()), name

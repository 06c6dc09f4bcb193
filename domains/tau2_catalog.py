"""Which domains tau2's registry has, and how passhat may build their environments.

tau2 ships airline, retail, telecom (with its manual and workflow policies) and mock; a
plugin may register more with tau2's own registry (`registry.register_domain(
get_environment, NAME)` and `registry.register_tasks(get_tasks, NAME)`). passhat runs
each of them through Tau2Domain.

The shared-database speed-up (domains.shared_db) hands the environment constructor a
database copy through its `db` and `user_db` arguments and compares databases its own
way: exact for the domains tau2 ships, whose constructors and models passhat knows. A
plugin's domain is built and scored the way tau2 builds and scores it instead.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any, Callable

# tau2's own domains, listed without importing tau2 (that takes seconds).
TAU2_DOMAINS = ("airline", "retail", "telecom", "mock", "telecom-workflow")
# The domains whose environments take a shared database copy (db=, user_db=).
SHARED_DB_DOMAINS = frozenset(TAU2_DOMAINS)
# Where tau2 keeps a shipped domain's data files.
_DATA_FOLDER = {"telecom-workflow": "telecom"}


def registered_tau2_domains() -> list[str]:
    """Domains in tau2's registry beyond those it ships, when tau2's registry is loaded
    (a plugin that registers one has imported it); [] otherwise, without importing it."""
    if "tau2.registry" not in sys.modules:
        return []
    from tau2.registry import registry

    return [name for name in registry.get_domains()
            if name not in TAU2_DOMAINS and not name.startswith("passhat-")]


def is_tau2_domain(name: str) -> bool:
    return name in TAU2_DOMAINS or name in registered_tau2_domains()


def build_environment(construct: Callable[..., Any], solo_mode: bool = False) -> Any:
    """A plugin domain's environment, as tau2 builds it: solo_mode only when asked for
    and the constructor takes it."""
    if solo_mode and "solo_mode" in inspect.signature(construct).parameters:
        return construct(solo_mode=True)
    return construct()


def tau2_task_count(name: str, split_name: str = "base") -> int | None:
    """The size of the task set tau2 runs for a shipped domain (its "base" split where
    the domain has one, else every task, as tau2's task loaders choose), or of a task
    set tau2 ships beside its domains' (domains.task_sets.SHIPPED_EXTRA: a split of
    their data), read from tau2's data files without importing tau2; None when they
    are not where tau2 keeps them."""
    import json

    from passhat.domains.task_sets import SHIPPED_EXTRA
    from passhat.domains.tau2_version import domain_dir

    if name in SHIPPED_EXTRA:
        name, split_name = SHIPPED_EXTRA[name]
    elif name not in TAU2_DOMAINS:
        return None
    folder = domain_dir(_DATA_FOLDER.get(name, name))  # the installed tau2's data
    if folder is None:
        return None
    try:
        split = json.loads((folder / "split_tasks.json").read_text())
        if split_name in split:
            return len(split[split_name])
        return len(json.loads((folder / "tasks.json").read_text()))
    except (OSError, ValueError):
        return None

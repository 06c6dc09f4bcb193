"""tau2's task sets and splits: `tau2 run --domain D --task-set-name S --task-split-name P`
runs the tasks of task set S (split P) in domain D's environment. passhat names that
variant of a domain "D:S/P" ("telecom:telecom_full", "airline:airline/test"), the name a
run records and its workers load; a plain "D" is the domain's own task set with its
loader's default split, as before.

The task sets tau2 ships are one per domain plus telecom's telecom_full and
telecom_small; a plugin may register more with `registry.register_tasks`. A task set
whose loader takes no split (telecom_full, telecom_small) is loaded without one: `tau2
run` hands it the split "base" and fails, passhat refuses an explicit split instead.
"""

from __future__ import annotations

import inspect
from typing import Any

from passhat.domains.base import UnknownDomainError
from passhat.domains.plugins import last_line

MARK, SPLIT_MARK = ":", "/"
# Task sets tau2 ships beyond its domains' own, with (data folder, split), so that
# `passhat domains` can count them without importing tau2.
SHIPPED_EXTRA = {"telecom_full": ("telecom", "full"), "telecom_small": ("telecom", "small")}


def variant_name(domain: str, task_set: str | None, split: str | None) -> str:
    """The registry name of `domain` with the tasks of `task_set` (default: the domain's
    own) and `split` (default: the loader's own); `domain` when neither is given."""
    if task_set is None and split is None:
        return domain
    return f"{domain}{MARK}{task_set or domain}" + (f"{SPLIT_MARK}{split}" if split else "")


def split_variant(name: str) -> tuple[str, str | None, str | None]:
    """(domain, task set, split) of a variant name; (name, None, None) for a plain one."""
    domain, mark, rest = name.partition(MARK)
    if not mark:
        return name, None, None
    task_set, mark, split = rest.partition(SPLIT_MARK)
    return domain, task_set, (split if mark else None)


def task_set_names() -> list[str]:
    """Task sets that are not a domain's own: tau2's extras, and those a plugin
    registered (when tau2's registry is loaded; it is not imported for this)."""
    import sys

    names = list(SHIPPED_EXTRA)
    if "tau2.registry" in sys.modules:
        from tau2.registry import registry

        domains = set(registry.get_domains())
        names += [n for n in registry.get_task_sets() if n not in domains and n not in names]
    return names


def load_task_set(task_set: str, split: str | None) -> list[Any]:
    """tau2's Task models of a task set (and split), as `tau2 run` loads them. Raises
    UnknownDomainError, in words a user can act on, for a task set or split tau2's
    registry does not have."""
    from passhat.domains.tau2_data import quiet_tau2

    quiet_tau2()
    from tau2.registry import registry

    known = registry.get_task_sets()
    if task_set not in known:
        raise UnknownDomainError(f"tau2's registry has no task set {task_set!r}; task sets: {', '.join(known)}")
    loader = registry.get_tasks_loader(task_set)
    if split is not None:
        if not inspect.signature(loader).parameters:
            raise UnknownDomainError(f"task set {task_set} has no splits: leave out --task-split-name")
        splits = registry.get_task_splits_loader(task_set)
        if splits is not None and split not in (names := list(splits())):
            raise UnknownDomainError(
                f"task set {task_set} has no split {split!r}; its splits: {', '.join(names)}")
    try:
        return list(loader() if split is None else loader(task_split_name=split))
    except Exception as err:  # noqa: BLE001 - the task set's own code failed
        raise UnknownDomainError(f"task set {task_set} failed to load: {last_line(err)}") from err

"""Domains by name: tau2's built in, plus any a user registers, plus a tau2 domain with
the tasks of a user's task file, named "airline@/absolute/path/tasks.json"
(domains.task_file), plus a tau2 domain with the tasks of a task set and split of tau2's
registry, named "telecom:telecom_full" (domains.task_sets).

Importing this module must stay cheap (the CLI imports it to list domains), so nothing
here imports tau2; a tau2 domain loads its data on first use.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from passhat.domains.base import Domain, UnknownDomainError
from passhat.domains.task_file import SEPARATOR, read_task_list, split_domain_name, tool_schemas, validate_tasks
from passhat.domains.task_sets import MARK, load_task_set, split_variant
from passhat.domains.tau2_catalog import TAU2_DOMAINS, registered_tau2_domains, tau2_task_count
from passhat.domains.tau2_domain import Tau2Domain

DomainFactory = Callable[[], Domain]

_factories: dict[str, DomainFactory] = {
    name: (lambda name=name: Tau2Domain(name)) for name in TAU2_DOMAINS
}
# One instance per name and process, so per-process caches (parsed databases,
# conversation environments) are shared by every caller.
_instances: dict[str, Domain] = {}
_lock = threading.RLock()


def register_domain(name: str, factory: DomainFactory) -> None:
    """Make `factory()` the domain called `name`. The factory runs on first use."""
    for mark in (SEPARATOR, MARK):
        if mark in name:
            # It would read as "domain@task file" or "domain:task set".
            raise ValueError(f"A domain name cannot contain {mark!r}: {name!r}")
    with _lock:
        if name in _factories:
            raise ValueError(f"A domain named {name!r} is already registered")
        _factories[name] = factory


def domain_names() -> list[str]:
    """passhat's domains, then those a plugin registered with tau2's registry."""
    with _lock:
        names = list(_factories)
    return names + [n for n in registered_tau2_domains() if n not in names]


def task_count(name: str) -> int:
    """How many tasks the domain has: for a tau2 domain not loaded yet, read from tau2's
    data files without importing tau2 (seconds saved for `passhat domains`)."""
    with _lock:
        loaded = _instances.get(name)
    if loaded is None and name in TAU2_DOMAINS and _factories.get(name) is not None:
        count = tau2_task_count(name)
        if count is not None:
            return count
    return len(get_domain(name).task_ids())


def get_domain(name: str) -> Domain:
    """The domain called `name`. "D@PATH" is tau2 domain D with the tasks of the file at
    PATH; the file is read and validated here, once per process, and a broken one
    raises domains.task_file.TaskFileError."""
    with _lock:
        domain = _instances.get(name)
        if domain is not None:
            return domain
        base, path = split_domain_name(name)
        if path is not None:
            domain = _instances[name] = _task_file_domain(base, path, name)
            return domain
        domain_name, task_set, split = split_variant(name)
        if task_set is not None:
            domain = _instances[name] = _task_set_domain(domain_name, task_set, split, name)
            return domain
        factory = _factories.get(name)
        if factory is None and name in registered_tau2_domains():
            factory = _factories[name] = lambda: Tau2Domain(name)
        if factory is None:
            known = ", ".join(domain_names())
            raise UnknownDomainError(f"Unknown domain {name!r}; known domains: {known}")
        domain = factory()
        if not isinstance(domain, Domain):
            raise TypeError(
                f"The factory for {name!r} returned {domain!r}, not a Domain"
            )
        _instances[name] = domain
        return domain


def _task_set_domain(base: str, task_set: str, split: str | None, name: str) -> Domain:
    """tau2 domain `base` with the tasks of a task set and split of tau2's registry."""
    tools = get_domain(base)
    if not isinstance(tools, Tau2Domain):
        raise UnknownDomainError(
            f"task sets are tau2's, and {base!r} is not a domain of tau2's registry"
        )
    return Tau2Domain(tools.tau2_name, tasks=load_task_set(task_set, split), label=name)


def _task_file_domain(base: str, path: str, name: str) -> Domain:
    tools = get_domain(base)
    if not isinstance(tools, Tau2Domain):
        raise UnknownDomainError(
            f"task files work with domains of tau2's registry, and {base!r} is not one"
        )
    raw = read_task_list(path)  # file and JSON mistakes fail before tau2 loads
    # The base domain's tools decide which gold actions the file may name.
    user_tools = tools.user_tools()
    tasks = validate_tasks(
        path,
        raw,
        domain=base,
        agent_tools=tool_schemas(tools.agent_tools()),
        user_tools=None if user_tools is None else tool_schemas(user_tools),
    )
    return Tau2Domain(tools.tau2_name, tasks=tasks, label=name)

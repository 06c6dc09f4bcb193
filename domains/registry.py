"""Domains by name: tau2's built in, plus any a user registers.

Importing this module must stay cheap (the CLI imports it to list domains), so nothing
here imports tau2; a tau2 domain loads its data on first use.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from domains.base import Domain, UnknownDomainError
from domains.tau2_domain import TAU2_DOMAINS, Tau2Domain

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
    with _lock:
        if name in _factories:
            raise ValueError(f"A domain named {name!r} is already registered")
        _factories[name] = factory


def domain_names() -> list[str]:
    with _lock:
        return list(_factories)


def get_domain(name: str) -> Domain:
    with _lock:
        domain = _instances.get(name)
        if domain is not None:
            return domain
        factory = _factories.get(name)
        if factory is None:
            known = ", ".join(_factories)
            raise UnknownDomainError(f"Unknown domain {name!r}; known domains: {known}")
        domain = factory()
        if not isinstance(domain, Domain):
            raise TypeError(
                f"The factory for {name!r} returned {domain!r}, not a Domain"
            )
        _instances[name] = domain
        return domain

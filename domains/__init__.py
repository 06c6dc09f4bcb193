"""Benchmark domains: the interface passhat needs, and the registry of implementations.
The messages and task descriptions a domain exchanges are in passhat.messages."""

from passhat.domains.base import Domain, DomainLoadError, UnknownDomainError, UnknownTaskError
from passhat.domains.registry import domain_names, get_domain, register_domain

__all__ = [
    "Domain",
    "DomainLoadError",
    "UnknownDomainError",
    "UnknownTaskError",
    "domain_names",
    "get_domain",
    "register_domain",
]

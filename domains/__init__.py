"""Benchmark domains: the interface passhat needs, and the registry of implementations."""

from domains.base import (
    Domain,
    GoldAction,
    Message,
    Score,
    TaskInfo,
    ToolCall,
    UnknownDomainError,
    UnknownTaskError,
)
from domains.registry import domain_names, get_domain, register_domain

__all__ = [
    "Domain",
    "GoldAction",
    "Message",
    "Score",
    "TaskInfo",
    "ToolCall",
    "UnknownDomainError",
    "UnknownTaskError",
    "domain_names",
    "get_domain",
    "register_domain",
]

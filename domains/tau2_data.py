"""tau2's data, once per process: a domain's tasks, tools, policy and parsed database
(tau2 re-reads the database file for every environment it builds; here each is parsed
once and every environment shares the records it does not touch), the import of tau2
itself, and the cache of conversations' environments (passhat.domains.tau2_domain uses
them all).

tau2 is imported inside functions only: importing it takes seconds."""

from __future__ import annotations

import gc
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from passhat.domains.base import DomainLoadError
from passhat.domains.shared_db import SharedDatabase
from passhat.domains.task_load import check_unique_ids, load_failure
from passhat.domains.tau2_catalog import SHARED_DB_DOMAINS, build_environment

# The model named to tau2's agent and user classes that passhat builds only to read
# their system prompts.
PROMPT_ONLY = "passhat-prompt-only"


class Tau2Data:
    """What one domain needs from tau2's files, parsed once per process."""

    def __init__(self, name: str):
        from tau2.registry import registry

        tasks = default_tasks(name)
        check_unique_ids(tasks)  # kept by id: a repeated id would lose a task
        self.tasks = {task.id: task for task in tasks}
        self._construct = registry.get_env_constructor(name)
        self.shared = name in SHARED_DB_DOMAINS  # else tau2 builds and scores it as it is
        env = self._construct()
        self.policy = env.get_policy()
        self.agent_tools = env.get_tools()
        self.user_tools = env.get_user_tools() if env.user_tools is not None else None
        self.tool_kinds = {name: kit.tool_type(name).value
                           for kit in (env.user_tools, env.tools) if kit is not None for name in kit.tools}
        self.agent_tool_schemas = [tool.openai_schema for tool in self.agent_tools]
        self.user_tool_schemas = (
            None if self.user_tools is None else [tool.openai_schema for tool in self.user_tools]
        )
        self._agent_prompt: str | None = None
        if not self.shared:
            self.evaluator_domain = name
            return
        self._db = SharedDatabase(env.tools.db)
        self._user_db = SharedDatabase(env.user_tools.db) if env.user_tools else None

        self.evaluator_domain = f"passhat-{name}"
        if self.evaluator_domain not in registry.get_domains():
            registry.register_domain(self.new_environment, self.evaluator_domain)

    def agent_system_prompt(self) -> str:
        if self._agent_prompt is None:
            from tau2.agent.llm_agent import LLMAgent

            self._agent_prompt = LLMAgent(
                tools=self.agent_tools, domain_policy=self.policy, llm=PROMPT_ONLY
            ).system_prompt
        return self._agent_prompt

    def new_environment(self, solo_mode: bool = False) -> Any:
        """tau2's environment for this domain, on a fresh copy of the cached database."""
        if not self.shared:
            return build_environment(self._construct, solo_mode)
        with gc_paused():
            kwargs: dict[str, Any] = {"db": self._db.fresh()}
            if self._user_db is not None:
                kwargs["user_db"] = self._user_db.fresh()
            return self._construct(solo_mode=solo_mode, **kwargs)


_loaded: dict[str, Tau2Data] = {}
_load_lock = threading.Lock()


def domain_data(name: str) -> Tau2Data:
    data = _loaded.get(name)
    if data is None:
        with _load_lock:
            data = _loaded.get(name)
            if data is None:
                quiet_tau2()
                try:
                    data = Tau2Data(name)
                except Exception as err:  # noqa: BLE001 - the domain's own code failed
                    raise DomainLoadError(
                        f"domain {name} failed to load (its environment or tasks): {load_failure(name, err)}"
                    ) from err
                _loaded[name] = data
    return data


def default_tasks(name: str) -> list[Any]:
    """tau2's Task models of the task set tau2 runs by default for a domain (the "base"
    split where there is one)."""
    quiet_tau2()
    from tau2.registry import registry

    return list(registry.get_tasks_loader(name)())


def import_tau2() -> None:
    """Import tau2 now (seconds of CPU), e.g. before forking worker processes that will
    all need it."""
    quiet_tau2()
    import tau2.registry  # noqa: F401


def quiet_tau2() -> None:
    # tau2 logs every tool response at DEBUG to stderr; in a worker running thousands
    # of trials that is noise and measurable time. Only tau2's own loggers are silenced.
    from loguru import logger

    logger.disable("tau2")


_gc_lock = threading.Lock()
_gc_holders = 0
_gc_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while copying or hashing a database.

    Building an airline database allocates ~165k objects, which triggers repeated
    collections that scan every live object and make copying and hashing it markedly
    slower. Environments are freed by
    reference counting, and anything cyclic is collected once the collector resumes,
    when the last concurrent holder leaves.
    """
    global _gc_holders, _gc_was_enabled
    with _gc_lock:
        if _gc_holders == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_holders += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_holders -= 1
            if _gc_holders == 0 and _gc_was_enabled:
                gc.enable()


class SessionCache:
    """Environments of recent conversations, keyed by (task, session), least recently
    used evicted first. An entry is reused only when the conversation's tool history is
    exactly the one the environment has applied; otherwise the caller rebuilds. An entry
    is removed while in use, so two threads never share an environment."""

    def __init__(self, size: int):
        self._size = size
        self._entries: OrderedDict[Any, tuple[Any, tuple]] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, key: Any, trace: tuple) -> Any:
        with self._lock:
            entry = self._entries.pop(key, None)
        if entry is None or entry[1] != trace:
            return None
        return entry[0]

    def put(self, key: Any, env: Any, trace: tuple) -> None:
        if self._size <= 0:
            return
        with self._lock:
            self._entries[key] = (env, trace)
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

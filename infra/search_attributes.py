"""Custom search attributes passhat sets on trial workflows.

They make `temporal workflow list --query 'PasshatRun="r1" AND PasshatOutcome="failure"'`
(and the web UI's filter box) answer "which trials of this run failed?" without our
results database.

Two ways to get them onto a server:
  * the embedded dev server: `start_dev_flags()` on its command line. The dev server
    applies those flags only when it creates a fresh database file; on a restart with an
    existing file, new ones are silently ignored (checked with CLI 1.9.1 / Server 1.32.0),
    so the embedded server also calls `register()` after every start;
  * a real cluster: `register()` through the operator service (needs operator rights).
"""

from __future__ import annotations

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import Client
from temporalio.common import SearchAttributeKey
from temporalio.service import RPCError, RPCStatusCode

RUN = SearchAttributeKey.for_keyword("PasshatRun")
AGENT_MODEL = SearchAttributeKey.for_keyword("PasshatAgentModel")
DOMAIN = SearchAttributeKey.for_keyword("PasshatDomain")
TASK = SearchAttributeKey.for_keyword("PasshatTask")
# passhat.outcomes.outcome_label: "running" until the trial is scored.
OUTCOME = SearchAttributeKey.for_keyword("PasshatOutcome")

ALL: tuple[SearchAttributeKey, ...] = (RUN, AGENT_MODEL, DOMAIN, TASK, OUTCOME)

# The type names the CLI (`--search-attribute NAME=TYPE`) uses, per indexed type.
_CLI_TYPE = {
    IndexedValueType.INDEXED_VALUE_TYPE_TEXT: "Text",
    IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD: "Keyword",
    IndexedValueType.INDEXED_VALUE_TYPE_INT: "Int",
    IndexedValueType.INDEXED_VALUE_TYPE_DOUBLE: "Double",
    IndexedValueType.INDEXED_VALUE_TYPE_BOOL: "Bool",
    IndexedValueType.INDEXED_VALUE_TYPE_DATETIME: "Datetime",
    IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST: "KeywordList",
}


def cli_type(key: SearchAttributeKey) -> str:
    """"Keyword", "Int", ...: the type name as `temporal` command-line flags spell it."""
    return _CLI_TYPE[key.indexed_value_type]


def start_dev_flags() -> list[str]:
    """Flags for `temporal server start-dev` registering ALL on a fresh database."""
    flags: list[str] = []
    for key in ALL:
        flags += ["--search-attribute", f"{key.name}={cli_type(key)}"]
    return flags


async def registered(client: Client, namespace: str) -> dict[str, int]:
    """Custom search attributes of `namespace`: name -> IndexedValueType."""
    resp = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    return dict(resp.custom_attributes)


async def register(client: Client, namespace: str) -> None:
    """Add whichever of ALL the namespace lacks.

    Already-registered attributes are fine (this runs on every start). One registered
    under the same name with a different type is an error: workflows would fail to
    start with it, so say so now rather than in the middle of a run.
    """
    # A few rounds because another process may register some of them between our list
    # and our add; the server then refuses the whole add with ALREADY_EXISTS.
    for _ in range(3):
        existing = await registered(client, namespace)
        wrong = [
            f"{k.name} is {_CLI_TYPE.get(existing[k.name], existing[k.name])}, "
            f"passhat needs {cli_type(k)}"
            for k in ALL
            if k.name in existing and existing[k.name] != k.indexed_value_type
        ]
        if wrong:
            raise RuntimeError(
                f"search attributes in namespace {namespace!r} have the wrong type: "
                + "; ".join(wrong)
            )
        missing = {k.name: k.indexed_value_type for k in ALL if k.name not in existing}
        if not missing:
            return
        try:
            await client.operator_service.add_search_attributes(
                AddSearchAttributesRequest(namespace=namespace, search_attributes=missing)
            )
            return
        except RPCError as err:
            if err.status != RPCStatusCode.ALREADY_EXISTS:
                raise
    raise RuntimeError(f"could not register passhat search attributes in {namespace!r}")

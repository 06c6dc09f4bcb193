"""What differs between a trial's final database and the gold one, record by record and
field by field (issue 33): the answer behind tau2's DB check, which compares two hashes.

The databases are tau2's own, replayed as its evaluator replays them (see
Tau2Domain.database_differences); this module only compares two of them. Tables made of
shared records (passhat.domains.shared_db) are compared on the records either side
touched, as `same_data` decides equality; any other database is compared whole, through
the JSON tau2 hashes."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from passhat.domains.shared_db import tables_of

# A diagnosis lists at most this many differences per database: the first ones say where
# the state went wrong; thousands (a table rebuilt) would only bloat the stored record.
MAX_DIFFERENCES = 20
ABSENT = "<absent>"


def database_differences(gold: BaseModel | None, actual: BaseModel | None, database: str,
                         limit: int = MAX_DIFFERENCES) -> list[dict[str, Any]]:
    """[{"database", "path", "gold", "actual"}] for every field whose value differs, the
    path dotted from the table (`reservations.4WQ150.status`); a record only one side has
    is one entry with ABSENT on the other side."""
    out: list[dict[str, Any]] = []
    if gold is None or actual is None:
        if gold is not actual:
            out.append({"database": database, "path": "", "gold": _json(gold), "actual": _json(actual)})
        return out
    tables_gold, tables_actual = tables_of(gold), tables_of(actual)
    if (tables_gold is not None and tables_actual is not None and tables_gold.keys() == tables_actual.keys()
            and all(table.shared is tables_actual[name].shared for name, table in tables_gold.items())):
        for name, table in tables_gold.items():
            other = tables_actual[name]
            # A record added, deleted or changed on either side is that side's own: the
            # rest are the shared records themselves on both sides.
            for key in sorted(table.owned | other.owned):
                if key in table and key in other and table.record_json(key) == other.record_json(key):
                    continue
                _compare(_record(table, key), _record(other, key), f"{name}.{key}", database, out)
                if len(out) >= limit:
                    return out[:limit]
        return out
    _compare(_json(gold), _json(actual), "", database, out)
    return out[:limit]


def _json(value: Any) -> Any:
    """A database or record as the JSON tau2 hashes (tau2.utils.utils.get_dict_hash)."""
    if value is None:
        return None
    return json.loads(json.dumps(value.model_dump(), sort_keys=True, default=str))


def _record(table: Any, key: str) -> Any:
    """A record of a shared table as JSON, without making it the table's own."""
    return json.loads(table.record_json(key)) if key in table else ABSENT


def _compare(gold: Any, actual: Any, path: str, database: str, out: list[dict[str, Any]]) -> None:
    if gold == actual:
        return
    if isinstance(gold, dict) and isinstance(actual, dict):
        for key in [*gold, *(k for k in actual if k not in gold)]:
            _compare(gold.get(key, ABSENT), actual.get(key, ABSENT), f"{path}.{key}" if path else str(key), database, out)
        return
    if isinstance(gold, list) and isinstance(actual, list) and len(gold) == len(actual):
        for i, (g, a) in enumerate(zip(gold, actual)):
            _compare(g, a, f"{path}[{i}]", database, out)
        return
    out.append({"database": database, "path": path, "gold": gold, "actual": actual})

"""Databases that share their unchanged records with one read-only copy per process.

tau2 gives every environment its own copy of the domain's database, and its evaluator
hashes the whole database to compare it with the gold one. For airline that is 2,800
records (7 MB of JSON): tens of milliseconds to copy and more to hash, for every
environment a worker builds and every trial it scores, while a conversation touches a
handful of records.

Here a database whose fields are all tables (dicts of records keyed by id, as in airline
and retail) is built over the process's shared records: a table hands out a private copy
of a record the first time it is read by key or written, and keeps it, so a change never
reaches the shared records nor another environment. Building one costs a dict copy per
table. Iterating a table (tau2's searches: every flight, every user) hands out the shared
records themselves, which tau2's tools only read there: copying the 300 flights for
every search would cost megabytes per environment kept in a worker's session cache, and
CPU on every search. A tool that changed a record it got by iterating would change it for every
environment of the process; tests/domains/test_shared_db.py checks that tau2's tools
never do. Two such databases hold the same data when their tables have the same keys and
every record that either of them copied serializes the same: the records neither touched
are the very same shared objects. That is the comparison tau2 makes by hashing the JSON
of both whole databases (equal JSON, equal hash), made on the records that can differ.

Databases of any other shape (telecom: lists) are copied whole, and compared by tau2's
own hash.
"""

from __future__ import annotations

import json
import typing
from typing import Any

from pydantic import BaseModel


class SharedRecords:
    """The records of one table, shared read-only by every database of the process."""

    def __init__(self, record_type: type[BaseModel], records: dict[str, Any]):
        self.record_type = record_type
        self.data = records  # id -> the record as plain data (a fresh copy is validated from it)
        self.models = {key: record_type.model_validate(value) for key, value in records.items()}


class CopyOnAccessTable(dict):
    """A table of records that copies a shared record the first time it is handed out.

    The dict holds the shared record until then, so membership, length, keys, iteration
    and pydantic's serialization (which reads the dict directly) need no copy at all.
    Every way of getting one record out goes through `_own`.
    """

    __slots__ = ("shared", "owned", "frozen_json")

    def __init__(self, shared: SharedRecords):
        super().__init__(shared.models)
        self.shared = shared
        self.owned: set[str] = set()  # keys whose record is this table's own (or deleted)
        # key -> record JSON, once the table is kept for comparisons and will not change.
        self.frozen_json: dict[str, str] | None = None

    def record_json(self, key: str) -> str:
        """The record as tau2 serializes the whole database to hash it
        (tau2.utils.utils.get_dict_hash), without making it this table's own."""
        if self.frozen_json is not None and key in self.frozen_json:
            return self.frozen_json[key]
        text = json.dumps(dict.__getitem__(self, key).model_dump(), sort_keys=True, default=str)
        if self.frozen_json is not None:
            self.frozen_json[key] = text
        return text

    def _own(self, key: str) -> Any:
        record = dict.__getitem__(self, key)
        if key not in self.owned:
            self.owned.add(key)
            record = self.shared.record_type.model_validate(self.shared.data[key])
            dict.__setitem__(self, key, record)
        return record

    def __getitem__(self, key: str) -> Any:
        return self._own(key)

    def get(self, key: str, default: Any = None) -> Any:
        return self._own(key) if key in self else default

    # values() and items() are dict's own: the table's copies where it made them, the
    # shared records elsewhere, for reading (see the module's docstring).

    def __setitem__(self, key: str, value: Any) -> None:
        self.owned.add(key)
        dict.__setitem__(self, key, value)

    def __delitem__(self, key: str) -> None:
        self.owned.add(key)
        dict.__delitem__(self, key)

    def pop(self, key: str, *default: Any) -> Any:
        if key in self:
            value = self._own(key)
            dict.__delitem__(self, key)
            return value
        return dict.pop(self, key, *default)

    def popitem(self) -> tuple[str, Any]:
        key = next(reversed(self))
        return key, self.pop(key)

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key in self:
            return self._own(key)
        self[key] = default
        return default

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def clear(self) -> None:
        self.owned.update(self)
        dict.clear(self)

    def copy(self) -> dict:
        return {key: self._own(key) for key in self}

    def __reduce__(self) -> tuple:  # a copy (deepcopy, pickle) is a plain dict of own records
        return dict, (self.copy(),)


class SharedDatabase:
    """One domain's database, parsed once per process, from which fresh databases are made."""

    def __init__(self, db: BaseModel):
        self.db_type = type(db)
        self._dump = db.model_dump()
        self._tables = _table_types(self.db_type)
        self.shared: dict[str, SharedRecords] | None = None
        if self._tables is not None:
            self.shared = {
                field: SharedRecords(record_type, self._dump[field])
                for field, record_type in self._tables.items()
            }

    def fresh(self) -> BaseModel:
        """A database in the initial state that no other holder sees change."""
        if self.shared is None:
            # Validating plain data into new models: a full copy that shares nothing,
            # and quicker than deepcopy, model_copy or re-parsing JSON.
            return self.db_type.model_validate(self._dump)
        return self.db_type.model_construct(
            **{field: CopyOnAccessTable(records) for field, records in self.shared.items()}
        )


def _table_types(db_type: type[BaseModel]) -> dict[str, type[BaseModel]] | None:
    """field -> record model, when every field of the database is a dict[str, model]."""
    tables = {}
    for name, field in db_type.model_fields.items():
        annotation = field.annotation
        args = typing.get_args(annotation)
        if typing.get_origin(annotation) is not dict or len(args) != 2 or args[0] is not str:
            return None
        if not (isinstance(args[1], type) and issubclass(args[1], BaseModel)):
            return None
        tables[name] = args[1]
    return tables or None


def kept(db: BaseModel | None) -> BaseModel | str | None:
    """What `same_data` needs of a database kept to compare others with later (a gold
    final state): the database itself when it is made of shared tables (it owns only the
    records it touched), else tau2's hash of it. The database must not change after."""
    if db is None:
        return None
    tables = tables_of(db)
    if tables is None:
        return _hash(db)
    for table in tables.values():
        table.frozen_json = {}
    return db


def same_data(a: BaseModel | str | None, b: BaseModel | None) -> bool:
    """Whether two databases of one domain hold the same data, as tau2 decides it by
    comparing hashes of their JSON. `a` may be what `kept` returned."""
    if a is None or b is None:
        return a is b
    if isinstance(a, str):
        return a == _hash(b)
    tables_a, tables_b = tables_of(a), tables_of(b)
    if tables_a is None or tables_b is None or tables_a.keys() != tables_b.keys() or any(
        table.shared is not tables_b[field].shared for field, table in tables_a.items()
    ):
        return _hash(a) == _hash(b)
    for field, table_a in tables_a.items():
        table_b = tables_b[field]
        if table_a.keys() != table_b.keys():
            return False
        for key in table_a.owned | table_b.owned:
            if key in table_a and table_a.record_json(key) != table_b.record_json(key):
                return False
    return True


def _hash(db: BaseModel) -> str:
    from tau2.utils.utils import get_dict_hash

    return get_dict_hash(db.model_dump())


def tables_of(db: BaseModel) -> dict[str, CopyOnAccessTable] | None:
    """The database's copy-on-access tables, when it is made of them over the same shared
    records as any database it is compared with (a database rebuilt by tau2, e.g. by
    update_db, is a plain model and is compared whole)."""
    tables = {}
    for name in type(db).model_fields:
        value = getattr(db, name)
        if not isinstance(value, CopyOnAccessTable):
            return None
        tables[name] = value
    return tables

"""Databases over shared records give the data, and the verdicts, of tau2's full copies.

tau2 copies the whole database for every environment and compares final states by
hashing their JSON; passhat shares the records a conversation does not touch and compares
the ones it did. These tests hold the two to the same answers on every airline and
retail task, against tau2's own environments built from its data files.
"""

from __future__ import annotations

import ast
import itertools

import pytest

from passhat.domains.registry import get_domain
from passhat.domains.shared_db import CopyOnAccessTable, same_data
from passhat.domains.tau2_data import domain_data


def tau2_gold_hash(name: str, task, plain_db: dict) -> str:  # noqa: ANN001 - a tau2 Task
    """The hash tau2 computes for a task's gold final state, on an environment of tau2's
    over a whole copy of the database (`plain_db`: as read from tau2's file)."""
    from tau2.registry import registry

    construct = registry.get_env_constructor(name)
    env = construct(db=type(construct().tools.db).model_validate(plain_db))
    init = task.initial_state
    env.set_state(
        initialization_data=init.initialization_data if init else None,
        initialization_actions=init.initialization_actions if init else None,
        message_history=(init.message_history or []) if init else [],
    )
    for action in task.evaluation_criteria.actions or []:
        try:
            env.make_tool_call(tool_name=action.name, requestor=action.requestor, **action.arguments)
        except Exception:  # noqa: BLE001 - tau2's evaluator ignores a failing gold action
            pass
    return env.get_db_hash()


@pytest.mark.parametrize("name", ["airline", "retail"])
def test_gold_states_hash_and_compare_like_tau2s(name):
    from tau2.utils.utils import get_dict_hash

    from passhat.domains.tau2_data import gc_paused

    with gc_paused():  # hundreds of whole-database dumps: seconds of collector scans
        _check_gold_states(name, get_dict_hash)


def _check_gold_states(name: str, get_dict_hash) -> None:  # noqa: ANN001

    from tau2.registry import registry

    domain = get_domain(name)
    tasks = [domain._tau2_task(task_id) for task_id in domain.task_ids()]
    plain_db = registry.get_env_constructor(name)().tools.db.model_dump()
    golds, hashes = [], []
    for task in tasks:
        gold_db, gold_user_db = domain._replay.gold_state(task)
        assert gold_user_db is None
        # Built over shared tables, and holding tau2's data for the same actions.
        assert isinstance(gold_db.users, CopyOnAccessTable)
        hashes.append(tau2_gold_hash(name, task, plain_db))
        assert get_dict_hash(gold_db.model_dump()) == hashes[-1], task.id
        golds.append(gold_db)
    # Every pair of final states: equal exactly when tau2's hashes are equal.
    verdicts = {True: 0, False: 0}
    for i, j in itertools.combinations(range(len(tasks)), 2):
        same = same_data(golds[i], golds[j])
        assert same == (hashes[i] == hashes[j]), (tasks[i].id, tasks[j].id)
        verdicts[same] += 1
    assert verdicts[True] and verdicts[False]  # both answers were exercised
    # And each against the untouched initial state.
    initial_hash = get_dict_hash(domain_data(name)._db.fresh().model_dump())
    for gold, h in zip(golds, hashes):
        assert same_data(gold, domain_data(name)._db.fresh()) == (h == initial_hash)
    # Every task's gold actions, the write tools among them, left the shared records
    # as they were loaded.
    for field, records in domain_data(name)._db.shared.items():
        for key, model in records.models.items():
            assert model.model_dump() == records.data[key], (field, key)


# A tool's writes that would reach the records a table shares, had it made them to a
# record it got by iterating the table: assignments to it or into it, mutating calls
# on it, and handing it on under another name.
MUTATORS = {"append", "extend", "insert", "pop", "popitem", "remove", "clear", "update",
            "setdefault", "sort", "reverse", "add", "discard", "__setitem__", "__delitem__"}


def _root(node):  # noqa: ANN001, ANN202 - the name an attribute/subscript chain starts from
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _iterates_a_table(it: ast.AST) -> bool:  # self.db.<table>.values() or .items()
    return (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
            and it.func.attr in ("values", "items") and ast.unparse(it.func.value).startswith("self.db."))


def _iterated_table_writes(tree: ast.AST) -> list[str]:
    """The statements that write to a record got by iterating a table of self.db."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.For):
            loops = [(node.target, node.iter, node.body)]
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            loops = [(g.target, g.iter, [node]) for g in node.generators]
        else:
            continue
        for target, it, scope in loops:
            if not _iterates_a_table(it):
                continue
            names = {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
            for inner in (n for stmt in scope for n in ast.walk(stmt)):
                if isinstance(inner, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                    targets = inner.targets if isinstance(inner, (ast.Assign, ast.Delete)) else [inner.target]
                    into = any(not isinstance(t, ast.Name) and _root(t) in names for t in targets)
                    alias = isinstance(inner, ast.Assign) and isinstance(inner.value, ast.Name) \
                        and inner.value.id in names
                    if into or alias:
                        found.append(ast.unparse(inner))
                elif isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) \
                        and inner.func.attr in MUTATORS and _root(inner.func.value) in names:
                    found.append(ast.unparse(inner))
    return found


@pytest.mark.parametrize("name", ["airline", "retail"])
def test_tau2_tools_only_read_the_records_they_iterate(name):
    import importlib
    import inspect

    from tau2.environment.toolkit import ToolKitBase

    module = importlib.import_module(f"tau2.domains.{name}.tools")
    toolkits = [c for _, c in inspect.getmembers(module, inspect.isclass)
                if issubclass(c, ToolKitBase) and c.__module__ == module.__name__]
    assert toolkits
    tree = ast.parse(inspect.getsource(module))
    loops = [n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.comprehension))
             and "self.db." in ast.unparse(n.iter)]
    assert loops  # the searches are there to check
    assert _iterated_table_writes(tree) == []
    # The check finds such writes.
    written = ast.parse(
        "def book(self):\n"
        "    for flight in self.db.flights.values():\n"
        "        flight.dates['2024-05-01'].available_seats['economy'] -= 1\n"
        "    for uid, user in self.db.users.items():\n"
        "        user.payment_methods.pop('x')\n"
        "        found = user\n"
    )
    assert len(_iterated_table_writes(written)) == 3


def test_a_fresh_database_never_sees_another_ones_changes():
    shared = domain_data("retail")._db
    a, b = shared.fresh(), shared.fresh()
    user_id, order_id = next(iter(a.users)), next(iter(a.orders))
    before = b.model_dump()
    # Every way of getting one record out hands out a copy of its own.
    a.users[user_id].name.first_name = "Changed"
    a.orders.get(order_id).status = "changed"
    a.orders.setdefault(order_id).items.clear()
    # Iterating hands out the table's own copies where it has them, and the shared
    # records, which tau2's tools only read there (see below), elsewhere: no copy.
    product_id = next(iter(a.products))
    assert dict(a.products.items())[product_id] is shared.shared["products"].models[product_id]
    assert [u for u in a.users.values() if u.name.first_name == "Changed"] == [a.users[user_id]]
    assert a.products.owned == set()
    assert b.model_dump() == before
    assert shared.fresh().model_dump() == before
    assert not same_data(a, b)
    assert same_data(b, shared.fresh())


def test_added_and_removed_records_count():
    shared = domain_data("airline")._db
    initial = shared.fresh()
    some_id = next(iter(initial.reservations))

    removed = shared.fresh()
    del removed.reservations[some_id]
    assert not same_data(removed, initial) and not same_data(initial, removed)

    popped = shared.fresh()
    record = popped.reservations.pop(some_id)
    assert not same_data(popped, initial)
    popped.reservations[some_id] = record  # put back unchanged
    assert same_data(popped, initial) and same_data(initial, popped)

    added = shared.fresh()
    added.reservations["NEW001"] = record
    assert not same_data(added, initial)
    del added.reservations["NEW001"]
    assert same_data(added, initial)

    # Read but not changed: the same data.
    read = shared.fresh()
    _ = read.reservations[some_id].status
    assert same_data(read, initial)

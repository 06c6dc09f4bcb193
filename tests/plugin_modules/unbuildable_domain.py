"""A plugin for the tests: a tau2-contract domain whose environment fails to build."""

from tau2.registry import registry


def get_environment(solo_mode: bool = False):
    raise FileNotFoundError("db.json: no such file")


def get_tasks(task_split_name=None):
    return []


registry.register_domain(get_environment, "unbuildable")
registry.register_tasks(get_tasks, "unbuildable")

"""Plugins: the user's own Python modules that register domains (with tau2's registry or
passhat's) and agents when imported.

A plugin is named by a module ("my_domain"), or by "module:function" for a function to
call once the module is imported. Commands take them with `--plugin`; an installed
package may declare them as entry points in the group `passhat.plugins`, which every
process imports as well. A run records the set it was started with (`run_plugins`), and
every worker process imports that set before it takes work (the run's task queue is the
set's own, contracts.plugin_task_queue).
"""

from __future__ import annotations

import importlib
import threading
import traceback

ENTRY_POINT_GROUP = "passhat.plugins"

_loaded: set[str] = set()
_lock = threading.RLock()


class PluginError(Exception):
    """A plugin did not import (or its function failed); the message is one line naming
    the plugin and the error's last line."""


def entry_point_plugins() -> list[str]:
    """The plugins installed packages declare in the `passhat.plugins` group, as
    "module" or "module:function" (the entry point's value)."""
    from importlib.metadata import entry_points

    return sorted({ep.value.replace(" ", "") for ep in entry_points(group=ENTRY_POINT_GROUP)})


def run_plugins(modules: list[str]) -> list[str]:
    """The plugin set a run records: the given modules and the installed entry points,
    each once, sorted (the order never changes what they register)."""
    return sorted({*(m.strip() for m in modules), *entry_point_plugins()})


def load_plugins(modules: list[str]) -> None:
    """Import each plugin of `modules` and of the installed entry points, each once per
    process. Raises PluginError for the first that fails."""
    for spec in run_plugins(modules):
        _load(spec)


def loaded_plugins() -> list[str]:
    with _lock:
        return sorted(_loaded)


def _load(spec: str) -> None:
    with _lock:
        if spec in _loaded:
            return
        module_name, _, function = spec.partition(":")
        if not module_name or not all(part.isidentifier() for part in module_name.split(".")):
            raise PluginError(f"plugin {spec!r} is not a module name (such as my_domain or "
                              "my_package.plugin, optionally with :function)")
        try:
            module = importlib.import_module(module_name)
            if function:
                getattr(module, function)()
        except Exception as err:  # noqa: BLE001 - any failure of the user's code is one line
            raise PluginError(f"plugin {spec} failed to import: {last_line(err)}") from None
        _loaded.add(spec)


def last_line(err: BaseException) -> str:
    """The last line of an exception as Python prints it ("ModuleNotFoundError: No
    module named 'x'"), without the traceback, and with the exception's class."""
    lines = "".join(traceback.format_exception_only(type(err), err)).strip().splitlines()
    last = lines[-1].strip() if lines else ""
    name = type(err).__name__
    # A message of several lines ends with a line of its own: say what raised it.
    return last if last.startswith(name) else f"{name}: {last}".rstrip(": ")

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
    the plugin and the error's last line (`reason`, where a module failed)."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason


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


def load_run_plugins(run_id: str, recorded: list[str], given: list[str], then: str = "resume again") -> None:
    """Import the plugins of a recorded run that is being continued (`resume`), whose
    work goes to its plugin set's task queue as recorded.

    `given` (resume's --plugin) may only repeat the recorded set: a different one is
    refused, naming the difference, before anything is imported or recorded. Applying it
    instead would move the run to another queue, yet a run whose workflow is still open
    keeps its queue (resume attaches to it), the trials it already started keep theirs,
    and the plugins are part of the run's identity (its fingerprint): the same run id
    would then hold work done by two different plugin sets. A run with other plugins is
    a new run, with a new --run-id.

    A recorded plugin that does not import here is one line naming it and the run, and
    saying what to do `then` (the commands that read a run's results pass no `given`)."""
    if given and run_plugins(given) != run_plugins(recorded):
        asked, wanted = run_plugins(given), run_plugins(recorded)
        added = [p for p in asked if p not in wanted]
        left_out = [p for p in wanted if p not in asked]
        difference = "; ".join([*([f"adds {', '.join(added)}"] if added else []),
                                *([f"leaves out {', '.join(left_out)}"] if left_out else [])])
        started = f"with plugins {', '.join(recorded)}" if recorded else "without plugins"
        raise PluginError(
            f"run {run_id} was started {started} and keeps them; --plugin names another set "
            f"({difference}): resume it without --plugin (its plugins are imported anyway), "
            "or start a new --run-id with the other set")
    for spec in run_plugins(recorded):
        try:
            _load(spec)
        except PluginError as err:
            if spec not in recorded or err.reason is None:
                raise
            raise PluginError(
                f"run {run_id} needs plugin {spec}, which does not import here: {err.reason}; "
                f"put its folder on PYTHONPATH (or install it) and {then}") from None


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
            reason = last_line(err)
            raise PluginError(f"plugin {spec} failed to import: {reason}", reason) from None
        _loaded.add(spec)


def last_line(err: BaseException) -> str:
    """The last line of an exception as Python prints it ("ModuleNotFoundError: No
    module named 'x'"), without the traceback, and with the exception's class."""
    lines = "".join(traceback.format_exception_only(type(err), err)).strip().splitlines()
    last = lines[-1].strip() if lines else ""
    name = type(err).__name__
    qualified = f"{type(err).__module__}.{name}"
    if last.startswith(f"{qualified}:"):  # json.decoder.JSONDecodeError: ...
        last = name + last[len(qualified):]
    # A message of several lines ends with a line of its own: say what raised it.
    return last if last.startswith(name) else f"{name}: {last}".rstrip(": ")

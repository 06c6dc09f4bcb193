"""What makes the agent a run measures: the parts of the run's identity the agent
contributes (RunConfig.agent_digests, compared by passhat.run_identity), and where in
the agent's own code a failure of it happened.

Each kind of agent says what its parts are, in KINDS below:

- tau2's LLM agent (no --agent): passhat builds its requests from tau2's prompt (tau2's
  version is recorded with the run) or from the user's own template, which is a part
  ("prompt");
- an agent from tau2's agent registry (--agent NAME, a plugin's): the source file of
  the module that registered it and of every module of the same plugin that module
  imports, directly or through another, each a part ("module my_agents"). An agent of
  tau2's own has none: the tau2 version says which it is.

The model string and its args are not parts: the run records them per agent model, and
run_identity.agent_identity digests them with the parts. A secret never is one: the
args refuse secrets when the run is configured.

Another kind of agent contributes its identity by one function (name, prompt) ->
{part: value or digest} and one line in KINDS saying which --agent values it takes; an
A2A agent's (--agent a2a:URL) are its card's name, version and URL, as the command
that configured the run read them (domains/a2a_protocol.note_card).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import inspect
import site
import sys
import sysconfig
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from passhat.contracts import DEFAULT_AGENT
from passhat.domains.a2a_protocol import card_parts, is_a2a


def _llm_agent_parts(name: str, prompt: str | None) -> dict[str, str]:
    return {} if prompt is None else {"prompt": _digest(prompt.encode())}


def _registered_agent_parts(name: str, prompt: str | None) -> dict[str, str]:
    return {f"module {module}": _digest(path.read_bytes()) for module, path in agent_sources(name).items()}


def _a2a_agent_parts(name: str, prompt: str | None) -> dict[str, str]:
    return card_parts(name)


# (takes this --agent value, its parts): the first kind that takes a name measures it.
KINDS: list[tuple[Callable[[str], bool], Callable[[str, str | None], dict[str, str]]]] = [
    (lambda name: name == DEFAULT_AGENT, _llm_agent_parts),
    (is_a2a, _a2a_agent_parts),
    (lambda name: True, _registered_agent_parts),
]


def agent_digests(agent: str | None, prompt: str | None, *others: str) -> dict[str, dict[str, str]]:
    """{agent name: {part: digest}} of a run's agent as it is now (RunConfig.agent_digests);
    with `others`, of each agent of a sweep of A2A agents (`agent` is then None)."""
    names = list(others) or [agent or DEFAULT_AGENT]
    return {name: next(measure for takes, measure in KINDS if takes(name))(name, prompt) for name in names}


@functools.cache
def agent_sources(name: str) -> dict[str, Path]:
    """The source files of a registered agent's own code, by module name: the module
    that registered it (its class's, or its factory's on tau2 1.0.x), its class's bases
    from the same plugin, and every module of the same plugin they import. None of
    tau2's own (its version says which). Once per process: a worker asks on a failure."""
    from passhat.domains.tau2_agents import registered_code

    code = registered_code(name)
    classes = inspect.getmro(code) if inspect.isclass(code) else (code,)
    root = code.__module__
    if root.split(".")[0] == "tau2":
        return {}
    return dict(sorted(plugin_modules(root, [c.__module__ for c in classes]).items()))


def plugin_modules(root: str, also: Iterable[str] = ()) -> dict[str, Path]:
    """The module `root` (and those of `also` that are of its plugin) and every module
    of the same plugin they import, directly or through another, by name, with its
    source file. The same plugin: the same top-level package; for a plain module, the
    modules beside it in its folder (unless that folder is where installed packages or
    the standard library live)."""
    home = _home(root)
    if home is None:
        return {}
    found: dict[str, Path] = {}
    todo = [root, *also]
    while todo:
        name = todo.pop()
        if name in found:
            continue
        path = _source(name)
        if path is None or not home(name, path):
            continue
        found[name] = path
        todo += _imported(name, path)
    return found


def _home(root: str) -> Callable[[str, Path], bool] | None:
    """Whether a module (name, file) is of `root`'s plugin."""
    path = _source(root)
    if path is None:
        return None
    top = root.split(".")[0]
    if "." in root or path.name == "__init__.py":
        return lambda name, _: name.split(".")[0] == top
    folder = path.parent.resolve()
    if folder in _shared_folders():
        return lambda name, _: name == root
    return lambda _, file: file.resolve().is_relative_to(folder)


@functools.cache
def _shared_folders() -> frozenset[Path]:
    """Where the standard library and installed packages live: modules there are not a
    plugin's own, whatever sits beside it."""
    paths = {*sysconfig.get_paths().values(), *site.getsitepackages(), site.getusersitepackages()}
    return frozenset(Path(p).resolve() for p in paths if p)


def _source(name: str) -> Path | None:
    """A module's source file, without importing it: from sys.modules, or found where
    it would be imported from (only for a top-level name, or one whose package is
    imported already: finding `a.b` imports `a`)."""
    module = sys.modules.get(name)
    origin = getattr(module, "__file__", None) if module is not None else None
    if module is None:
        parent = name.rpartition(".")[0]
        if parent and parent not in sys.modules:
            return None
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            return None
        origin = spec.origin if spec is not None else None
    return Path(origin) if origin and origin.endswith(".py") else None


def _imported(name: str, path: Path) -> list[str]:
    """The modules a source file imports, and the names it imports from them (which may
    be modules), by absolute name."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return []
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                out += [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: max(0, len(package.split(".")) - node.level + 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module:
                out.append(module)
                out += [f"{module}.{alias.name}" for alias in node.names if alias.name != "*"]
    return out


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


# ---- where in the agent's code ----------------------------------------------------------


def failure_at(err: BaseException, agent: str) -> str | None:
    """Where an exception of the agent's turn was raised, as "file.py:LINE in FUNCTION":
    the innermost frame in the agent's own source files (agent_sources), else the
    innermost frame outside passhat (tau2's, when the agent's code is tau2's). The file
    is named as the module's path from its import root."""
    try:
        own = {p.resolve() for p in agent_sources(agent).values()}
    except Exception:  # noqa: BLE001 - the registry's or the plugin's; the frame is a help
        own = set()
    frames = [(f.f_code, line) for f, line in _walk(err.__traceback__)]
    passhat = Path(__file__).resolve().parent.parent
    for wanted in (lambda p: p in own, lambda p: not p.is_relative_to(passhat)):
        for code, line in reversed(frames):
            path = Path(code.co_filename).resolve()
            if wanted(path):
                return f"{_shown(path)}:{line} in {code.co_name}"
    return None


def method_at(obj: Any, method: str) -> str | None:
    """Where an agent's method is defined, as "file.py:LINE in METHOD": the place a
    value it returned came from, when that value is what failed."""
    try:
        function = inspect.unwrap(getattr(type(obj), method))
        path = Path(inspect.getsourcefile(function) or "").resolve()
        line = inspect.getsourcelines(function)[1]
    except (AttributeError, OSError, TypeError):
        return None
    return f"{_shown(path)}:{line} in {method}"


def _walk(tb: Any) -> list[tuple[Any, int]]:
    out = []
    while tb is not None:
        out.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    return out


def _shown(path: Path) -> str:
    """A source file as its module's path from the import root it was found under
    ("my_agents.py", "my_pkg/agents.py", "tau2/agent/llm_agent.py")."""
    roots = [Path(p or ".").resolve() for p in sys.path if Path(p or ".").is_dir()]
    under = [r for r in roots if path.is_relative_to(r)]
    return str(path.relative_to(max(under, key=lambda r: len(r.parts)))) if under else path.name

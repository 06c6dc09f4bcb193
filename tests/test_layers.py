"""Layers only point down: cli -> workflows -> activities -> domains, infra -> contracts.

Every import in the product (at module level, inside a function, or inside a string
that is Python code, such as a `python -c` body) is read with `ast` and checked against
the layer order. passhat.testing (loopback model servers and process
harness for tests and benchmarks) sits on top; nothing in the product imports it, and
bench/ imports the product, never tests/.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Folder -> (package, rank). A module may import its own package and lower ranks only.
LAYERS = {
    "passhat": ("passhat", 0),  # contracts and metrics: pure, shared by every layer
    "domains": ("passhat.domains", 1),
    "infra": ("passhat.infra", 1),
    "activities": ("passhat.activities", 2),
    # Recorded results (report, statistics, export, import): beside the activities (neither
    # imports the other), below the workflows, whose rounds ask them which tasks run next.
    "results": ("passhat.results", 2),
    "workflows": ("passhat.workflows", 3),
    "cli": ("passhat.cli", 5),
    "testing": ("passhat.testing", 6),
}
# The root modules every layer may use; the first two import nothing of passhat.
CONTRACTS = ("passhat.contracts", "passhat.messages", "passhat.outcomes")
GENERIC_NAMES = {"cli", "workflows", "activities", "domains", "infra", "results", "testing", "tests", "bench"}


def layer_of(module: str) -> str | None:
    """The folder a passhat module lives in, or None for a module outside passhat."""
    parts = module.split(".")
    if parts[0] != "passhat":
        return None
    if len(parts) > 1 and parts[1] in LAYERS and parts[1] != "passhat":
        return parts[1]
    return "passhat"


def code_in_strings(tree: ast.AST) -> list[tuple[int, ast.AST]]:
    """(line, parsed code) of every string constant that is Python code with an import,
    such as a `python -c` body: a subprocess imports those modules too."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "import " in node.value:
            try:
                found.append((node.lineno, ast.parse(node.value)))
            except SyntaxError:
                continue  # prose, not code
    return found


def imported_modules(path: Path, package: str) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in a file, relative ones resolved;
    an import inside a string of code is reported at the string's line."""
    tree = ast.parse(path.read_text(), filename=str(path))
    out: list[tuple[int, str]] = []
    in_strings = [(line, node) for line, code in code_in_strings(tree) for node in ast.walk(code)]
    for line, node in [(None, node) for node in ast.walk(tree)] + in_strings:
        if line is not None and isinstance(node, (ast.Import, ast.ImportFrom)):
            node.lineno = line
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module == "passhat" or (node.level and not node.module):
                # `from passhat import metrics`: the names are modules.
                out += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
            else:
                out.append((node.lineno, module))
    return out


def upward_imports(root: Path) -> list[str]:
    problems = []
    for folder, (package, rank) in LAYERS.items():
        for path in sorted((root / folder).rglob("*.py")):
            for line, module in imported_modules(path, package):
                where = f"{path.relative_to(root)}:{line} imports {module}"
                if module.split(".")[0] in GENERIC_NAMES:
                    problems.append(f"{where}: not under the passhat namespace")
                    continue
                target = layer_of(module)
                if target is None:
                    continue
                if folder == "passhat":  # the root modules: the others may use the contracts
                    if path.name in ("contracts.py", "messages.py"):
                        problems.append(f"{where}: the contracts import nothing of passhat")
                    elif module not in CONTRACTS:
                        problems.append(f"{where}: only the contracts ({', '.join(CONTRACTS)}) are below {path.name}")
                elif target != folder and LAYERS[target][1] >= rank:
                    problems.append(f"{where}: {target} is not below {folder}")
    return problems


def test_no_import_points_up_a_layer():
    assert upward_imports(ROOT) == []


@pytest.mark.parametrize("name", ["contracts.py", "messages.py"])
def test_contracts_import_nothing_of_passhat(name):
    contracts = ROOT / "passhat" / name
    assert [m for _, m in imported_modules(contracts, "passhat") if m.startswith("passhat")] == []


@pytest.mark.parametrize("folder", ["bench", "tests"])
def test_bench_and_tests_import_the_product_by_its_name(folder):
    """bench/ uses the product's public modules, never tests/; neither uses the bare
    folder names, which are not importable once passhat is installed."""
    bad = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        if path == Path(__file__).resolve():
            continue  # its checker test writes bad imports on purpose
        for line, module in imported_modules(path, folder):
            top = module.split(".")[0]
            if top in GENERIC_NAMES - {"tests"} or (folder == "bench" and top == "tests"):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert bad == []


def test_the_walk_sees_an_upward_import(tmp_path):
    """The checker itself: a copy of the tree with one upward import is caught."""
    for folder in LAYERS:
        (tmp_path / folder).mkdir()
    (tmp_path / "infra" / "store.py").write_text(
        "def f():\n    from passhat.workflows.trial import TrialWorkflow\n"
    )
    (tmp_path / "domains" / "x.py").write_text("from passhat.infra import llm\n")
    (tmp_path / "passhat" / "contracts.py").write_text("from passhat import metrics\n")
    (tmp_path / "activities" / "y.py").write_text("from workflows import trial\n")
    (tmp_path / "domains" / "z.py").write_text(
        'CODE = "import sys; from passhat.cli.main import app"  # a python -c body\n'
    )
    found = upward_imports(tmp_path)
    assert len(found) == 5, found
    assert "domains/z.py:1 imports passhat.cli.main: cli is not below domains" in found

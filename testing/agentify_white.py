"""tau2-bench's own agentify white agent (src/experiments/agentify_tau_bench/white_agent),
run unchanged in a process and a virtualenv of its own, behind its own a2a-sdk 0.3 server,
its model the scripted one over loopback HTTP.

Nothing of it is in this repository: its code comes from a mirror of tau2-bench (a git
directory, `git archive`), its packages from a virtualenv made from the versions its
uv.lock pins (`make_venv`). The agent calls `litellm.completion(model="openai/gpt-4o",
custom_llm_provider="openai")` (no LITELLM_PROXY_API_KEY set), so it is pointed at the
scripted model by the environment alone: OPENAI_API_BASE and OPENAI_API_KEY; the model
server answers its `gpt-4o` as the scripted model it plays (ScriptedResponder(play=)).

Its own entry point (`tau-bench-agent white`, agentify_tau_bench.main) imports the green
agent too, which needs tau2 installed as a package beside it; the launcher here imports
the white agent's module alone and calls its `start_white_agent(host=, port=)`, as
main.py's `run` does for ROLE=white. The card's URL is AGENT_URL, as the agent reads it.

    experiment = extract(MIRROR, tmp)             # the experiment's files at the mirror's HEAD
    with WhiteAgent(experiment, VENV_PYTHON, model_url, log) as agent:
        passhat run --agent a2a:{agent.url} --agent-protocol agentify ...
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
import tomllib
from pathlib import Path

from passhat.testing.a2a_agents import wait_for_card
from passhat.testing.fault_server import stop_process
from passhat.testing.harness import free_port

MIRROR = Path(os.environ.get("PASSHAT_TAU2_MIRROR", "/work/.mirror/sierra-research+tau2-bench/repo"))
VENV = Path(os.environ.get("PASSHAT_AGENTIFY_VENV", "/work/agentify-white/venv"))
EXPERIMENT = "src/experiments/agentify_tau_bench"
CARD_NAME = "general_white_agent"  # what its card says it is
# What the white agent imports (its module's imports, and what they need), at the
# versions the experiment's uv.lock pins.
PACKAGES = ("a2a-sdk", "litellm", "loguru", "dotenv", "python-dotenv", "uvicorn", "openai", "starlette",
            "sse-starlette", "fastapi", "httpx")
EXTRAS = {"a2a-sdk": "[http-server]"}
_LAUNCH = ("import sys\n"
           "from agentify_tau_bench.white_agent.agent import start_white_agent\n"
           "start_white_agent(host='127.0.0.1', port=int(sys.argv[1]))\n")


def venv_python(venv: Path = VENV) -> Path:
    return venv / "bin" / "python"


def unavailable(mirror: Path = MIRROR, venv: Path = VENV) -> str | None:
    """Why the white agent cannot run here (None if it can)."""
    if not (mirror / "HEAD").exists():
        return f"no tau2-bench mirror at {mirror} (PASSHAT_TAU2_MIRROR)"
    if not venv_python(venv).exists():
        return f"no virtualenv for the white agent at {venv} (PASSHAT_AGENTIFY_VENV; bench/agentify_white.py --setup)"
    check = subprocess.run([str(venv_python(venv)), "-c", "import a2a, litellm, loguru, dotenv, uvicorn"],
                           capture_output=True, text=True)
    if check.returncode:
        return f"the virtualenv at {venv} lacks the white agent's packages: {check.stderr.strip().splitlines()[-1]}"
    return None


def extract(mirror: Path, dest: Path) -> Path:
    """The experiment's files at the mirror's HEAD, written under `dest`; its folder.
    (Its own tree is archived: the mirror lacks some large blobs elsewhere, such as
    airline's db.json, which a path-limited archive of HEAD still trips over.)"""
    archive = subprocess.run(["git", "-C", str(mirror), "archive", "--format=tar", f"HEAD:{EXPERIMENT}"],
                             capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest / EXPERIMENT, filter="data")
    return dest / EXPERIMENT


def mirror_commit(mirror: Path = MIRROR) -> str:
    return subprocess.run(["git", "-C", str(mirror), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


def pinned(experiment: Path) -> list[str]:
    """PACKAGES as requirements at the versions the experiment's uv.lock pins."""
    lock = tomllib.loads((experiment / "uv.lock").read_text())
    versions = {p["name"]: p["version"] for p in lock["package"] if "version" in p}
    return [f"{name}{EXTRAS.get(name, '')}=={versions[name]}" for name in PACKAGES if name in versions]


def make_venv(experiment: Path, venv: Path, python: str) -> None:
    """A virtualenv at `venv` made with `python` (the experiment asks for 3.13), holding
    the white agent's packages as its uv.lock pins them (from the package registry)."""
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv_python(venv)), "-m", "pip", "install", "-q", *pinned(experiment)], check=True)


class WhiteAgent:
    """The white agent in a process of its own, until stop()."""

    def __init__(self, experiment: Path, python: Path, model_url: str, log: Path, port: int | None = None):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "PYTHONPATH": str(experiment / "src"), "AGENT_URL": self.url + "/",
               "OPENAI_API_BASE": model_url.rstrip("/") + "/v1", "OPENAI_API_KEY": "loopback",
               "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        env.pop("LITELLM_PROXY_API_KEY", None)  # else it asks a litellm proxy for openrouter's gpt-4o
        self.log = log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen([str(python), "-c", _LAUNCH, str(self.port)], env=env, cwd=experiment,
                                         stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def stop(self) -> None:
        stop_process(self.proc)

    def __enter__(self) -> WhiteAgent:
        try:
            wait_for_card(self.url, self.proc, self.log)
        except RuntimeError:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

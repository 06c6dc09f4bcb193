"""The documentation is a test: every shell block of README.md, docs/*.md and examples/
runs as written, in order, in a fresh copy of this repository with a fresh PASSHAT_HOME.

What a block is, by its fence's language tag (every fence must have one):
  * `bash` (or `sh`, `shell`): commands. Each block runs with `bash -e -o pipefail` in the
    page's working folder (a copy of the repository's tracked files); it must exit 0, or
    the test fails naming the file and the block's line.
  * any other tag (`toml`, `json`, `python`, `text`, ...): not run. A block right under a
    line `*File `NAME`:*` is written to NAME in the working folder before the page's
    commands run, so a command can read a file the page shows.
  * a block right under a line that starts `*Not run by the docs test:` is not run; the
    line says why, visibly, on the page.
Indented code blocks are not used for commands (the test refuses a page with one that
starts with `passhat`). No trial of the docs' runs may end in a failure of the agent's own
code (`error_at`): an example agent works as shown.

Every page shares one embedded Temporal server (on free ports) and one results store,
README.md first, so a page may read a run the README made (docs/results.md reports the
README's sweep). Model strings naming a provider (`openai/...`) reach a loopback server
that passhat's test support starts, chosen by litellm's base-URL environment variables
only (OPENAI_API_BASE, OPENAI_BASE_URL); it plays scripted/oracle for any model name it
does not know as a scripted one, and the task is found from the request itself
(passhat.testing.scripted_http)."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from passhat.testing.fault_server import FaultServer
from passhat.testing.harness import free_ports
from passhat.testing.scripted_http import ScriptedHTTPError, ScriptedResponder, message_text, success_probability

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")),
         *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples").rglob("*.md"))]
SHELL = {"bash", "sh", "shell"}
FENCE = re.compile(r"^(\s*)(```+)(.*)$")
FILE_LINE = re.compile(r"^\*File `([^`]+)`:\*\s*$")
NOT_RUN = "*Not run by the docs test:"
BLOCK_TIMEOUT_S = 900


@dataclass
class Block:
    page: str
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    file: str | None  # the file this block is, when a `*File `NAME`:*` line names one
    not_run: str | None  # why it is not run, when a `*Not run by the docs test:` line says


def blocks(page: str) -> list[Block]:
    """The fenced blocks of a page, with what the line above each says of it."""
    lines = (ROOT / page).read_text().split("\n")
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m.group(2), m.group(3).strip()
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip().startswith(fence))
        above = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        file = FILE_LINE.match(above)
        out.append(Block(page, i + 1, lang, "\n".join(lines[i + 1:end]), file.group(1) if file else None,
                         above if above.startswith(NOT_RUN) else None))
        i = end + 1
    return out


def indented_commands(page: str) -> list[int]:
    """Lines of indented code blocks that hold a passhat command."""
    lines = (ROOT / page).read_text().split("\n")
    found, in_fence = [], False
    for n, line in enumerate(lines):
        if FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and re.match(r"^ {4,}passhat ", line) and (n == 0 or not lines[n - 1].strip()):
            found.append(n + 1)
    return found


class AnyModelIsTheOracle(ScriptedResponder):
    """The scripted models over HTTP; a model name that is not a scripted one
    (`gpt-4.1`) plays scripted/oracle."""

    def answer(self, body: dict) -> dict:
        try:
            success_probability(str(body.get("model", "")))
        except ValueError:
            body = {**body, "model": "oracle"}
        return super().answer(body)

    def _agent_candidates(self, system: str, messages: list[dict]) -> list:
        """An agent with a prompt of its own (`--agent-prompt`) is none of the domains'
        prompts: its task is found by the user's opening request alone, in every domain."""
        try:
            return super()._agent_candidates(system, messages)
        except ScriptedHTTPError:
            first = next((message_text(m.get("content")) for m in messages if m.get("role") == "user"), "")
            found = [(i, i.tasks[t]) for i in self.indexes for t in i.by_opening.get(first, [])]
            if not found:
                raise
            return found


@pytest.fixture(scope="module")
def docs_env(tmp_path_factory):
    """A copy of the repository's tracked files, a fresh PASSHAT_HOME and embedded server,
    and the loopback model server, shared by every page in order."""
    work = tmp_path_factory.mktemp("docs") / "passhat"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        target = work / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / name).is_file():
            shutil.copy2(ROOT / name, target)
    temporal, ui = free_ports(2)
    with FaultServer(responder=AnyModelIsTheOracle(["airline", "retail"])) as srv:
        env = {k: v for k, v in os.environ.items()
               if k not in ("TEMPORAL_ADDRESS", "PASSHAT_DB_URL", "GITHUB_STEP_SUMMARY", "VIRTUAL_ENV")}
        env.update(
            PASSHAT_HOME=str(work.parent / "home"), PASSHAT_TEMPORAL_PORT=str(temporal), PASSHAT_UI_PORT=str(ui),
            LITELLM_LOCAL_MODEL_COST_MAP="True",
            OPENAI_API_BASE=f"{srv.url}/v1", OPENAI_BASE_URL=f"{srv.url}/v1", OPENAI_API_KEY="loopback-docs-key",
            # The venv this test runs in: `passhat` and `python` as a reader's activated venv.
            PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        )
        try:
            yield work, env
        finally:
            subprocess.run([str(Path(sys.executable).parent / "passhat"), "server", "stop"], env=env,
                           capture_output=True, timeout=120)


def test_every_fence_says_what_it_is():
    """A command block without a language tag would never run: every fence has one, and
    no passhat command hides in an indented block."""
    untagged = [f"{b.page}:{b.line}" for page in PAGES for b in blocks(page) if not b.lang]
    indented = [f"{page}:{n}" for page in PAGES for n in indented_commands(page)]
    assert untagged == [] and indented == []


# The README's first block sets up a venv of its own (pip installs passhat's dependencies):
# minutes on a busy 2-core machine, before its demo and runs.
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("page", PAGES)
def test_page_runs_as_written(page, docs_env):
    work, env = docs_env
    page_blocks = blocks(page)
    for block in page_blocks:
        if block.file:
            target = work / block.file
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.text + "\n")
    for block in page_blocks:
        if block.lang not in SHELL or block.not_run:
            continue
        done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.text], cwd=work, env=env,
                              capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, (
            f"{page}:{block.line}: the block exited {done.returncode}\n--- stdout (end)\n{done.stdout[-3000:]}"
            f"\n--- stderr (end)\n{done.stderr[-3000:]}")
        assert agent_code_failures(work) == [], f"{page}:{block.line}: an example's agent failed in its own code"


def agent_code_failures(work: Path) -> list[tuple[str, str, str]]:
    """(trial, error, where) of every trial the docs' runs recorded as ended by the
    agent's own code: an example agent must work as shown (docs/agents.md's, with a
    model that makes parallel tool calls), and its failure would only lower a pass^k."""
    db = work.parent / "home" / "results.db"
    if not db.exists():
        return []
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT trial_id, error, error_at FROM trials WHERE error_at IS NOT NULL").fetchall()

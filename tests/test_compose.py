"""docker-compose.yml, Dockerfile and .dockerignore, checked without a Docker engine.

No engine runs where these tests run, so each part of the stack is exercised through the
same programs it uses inside its container, pointed at the test servers instead:

  * `docker-compose config` (Debian's docker-compose) validates and normalises the file;
    the assertions below read its output, not the raw YAML;
  * the Temporal healthcheck and the `passhat-setup` command run against the embedded
    Temporal dev server, with the real `temporal` CLI and the real `passhat` CLI;
  * the PostgreSQL init script runs with psql against the test PostgreSQL, and passhat's
    store then opens the database it created, with the URL shape the workers get;
  * the image's `pip install .` is replayed on a copy of what the Dockerfile's COPY lines
    would put in the image, filtered by .dockerignore.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
import tomllib
import yaml
from packaging.specifiers import SpecifierSet
from sqlalchemy.engine import make_url
from sqlmodel import SQLModel

from passhat.infra import search_attributes
from passhat.infra.store import Store
from passhat.infra.temporal_server import find_temporal_binary
from tests.conftest import PG_ADMIN_URL
from passhat.testing.harness import free_port

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
INIT_SCRIPT = ROOT / "deploy" / "postgres" / "initdb" / "10-passhat-db.sh"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

SERVICES = {"postgresql", "temporal", "temporal-ui", "jaeger", "passhat-setup", "passhat-worker"}
# Variables the file interpolates; unset here so the checks see the file's defaults.
INTERPOLATED = ("TEMPORAL_DB_PASSWORD", "PASSHAT_DB_PASSWORD")


# --- docker-compose config ------------------------------------------------------------


def _docker_compose() -> str:
    exe = shutil.which("docker-compose")
    if exe is None:
        pytest.fail(
            "docker-compose is not installed: it is what validates docker-compose.yml. "
            "tests/run.sh installs it as root (apt-get install docker-compose)."
        )
    return exe


def _compose_config() -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in INTERPOLATED}
    return subprocess.run(
        [_docker_compose(), "--file", str(COMPOSE_FILE), "config"],
        capture_output=True, text=True, env=env, timeout=120, cwd=ROOT,
    )


@pytest.fixture(scope="module")
def config() -> dict:
    """The compose file as `docker-compose config` resolves it (defaults interpolated,
    ports and paths in long form)."""
    proc = _compose_config()
    assert proc.returncode == 0, f"docker-compose config failed:\n{proc.stderr}"
    return yaml.safe_load(proc.stdout)


def _env(service: dict) -> dict[str, str | None]:
    env = service.get("environment", {})
    # Both spellings are legal in a compose file; `config` normally prints the mapping.
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, None) for item in env)
    return env


def _targets(service: dict) -> set[int]:
    return {int(p["target"]) for p in service.get("ports", [])}


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def test_compose_config_is_valid():
    proc = _compose_config()
    assert proc.returncode == 0, proc.stderr
    assert "WARNING" not in proc.stderr, proc.stderr


def test_services(config):
    assert set(config["services"]) == SERVICES


def test_worker_talks_to_the_compose_services(config):
    services = config["services"]
    env = _env(services["passhat-worker"])

    # Temporal: the frontend port of the temporal service; the UI and the setup job
    # must talk to the same frontend.
    host, port = _host_port(env["TEMPORAL_ADDRESS"])
    assert host == "temporal" and port in _targets(services["temporal"])
    assert _env(services["passhat-setup"])["TEMPORAL_ADDRESS"] == env["TEMPORAL_ADDRESS"]
    assert _env(services["temporal-ui"])["TEMPORAL_ADDRESS"] == env["TEMPORAL_ADDRESS"]

    # Traces: OTLP over HTTP (the exporter passhat depends on), to jaeger's HTTP port.
    assert any(d.startswith("opentelemetry-exporter-otlp-proto-http") for d in PYPROJECT["project"]["dependencies"])
    endpoint = env["OTEL_EXPORTER_OTLP_ENDPOINT"]
    assert endpoint == "http://jaeger:4318"
    assert 4318 in _targets(services["jaeger"])
    assert _env(services["jaeger"])["COLLECTOR_OTLP_ENABLED"] == "true"
    assert env["OTEL_SERVICE_NAME"] == "passhat-worker"

    # Provider keys are passed through from the host, never written in the file.
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        assert key in env
    raw = COMPOSE_FILE.read_text()
    assert not re.search(r"(OPENAI|ANTHROPIC)_API_KEY:[ \t]*\S", raw)


def test_otlp_exporter_resolves_the_worker_endpoint(config, monkeypatch):
    """OTEL_EXPORTER_OTLP_ENDPOINT is a base URL: the HTTP exporter appends /v1/traces.
    A value that already ended in /v1/traces would be sent to /v1/traces/v1/traces."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    endpoint = _env(config["services"]["passhat-worker"])["OTEL_EXPORTER_OTLP_ENDPOINT"]
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    assert OTLPSpanExporter()._endpoint == "http://jaeger:4318/v1/traces"


def test_worker_db_url_matches_the_database_postgres_creates(config):
    services = config["services"]
    url = make_url(_env(services["passhat-worker"])["PASSHAT_DB_URL"])
    # What infra.store.Store accepts for PostgreSQL, with the driver passhat installs.
    assert url.drivername == "postgresql+psycopg"
    assert url.get_backend_name() == "postgresql"
    assert url.get_dialect().import_dbapi() is psycopg

    assert url.host == "postgresql" and url.port in _targets(services["postgresql"])
    pg_env = _env(services["postgresql"])
    assert (url.username, url.password, url.database) == (
        pg_env["PASSHAT_DB_USER"], pg_env["PASSHAT_DB_PASSWORD"], pg_env["PASSHAT_DB_NAME"],
    )
    # passhat's store and Temporal's databases are separate.
    assert url.database not in ("temporal", "temporal_visibility")
    assert url.username != pg_env["POSTGRES_USER"]

    # Temporal uses the same server with the superuser the image creates.
    t_env = _env(services["temporal"])
    assert t_env["DB"] == "postgres12"
    assert t_env["POSTGRES_SEEDS"] == "postgresql"
    assert int(t_env["DB_PORT"]) in _targets(services["postgresql"])
    assert (t_env["POSTGRES_USER"], t_env["POSTGRES_PWD"]) == (
        pg_env["POSTGRES_USER"], pg_env["POSTGRES_PASSWORD"],
    )

    # The init script is mounted where the postgres image runs it.
    mounts = [v.split(":") for v in services["postgresql"]["volumes"]]
    assert [str(INIT_SCRIPT.parent), "/docker-entrypoint-initdb.d", "ro"] in mounts
    assert os.access(INIT_SCRIPT, os.X_OK), "the postgres image sources non-executable .sh files instead"


def test_start_order(config):
    services = config["services"]
    worker = services["passhat-worker"]["depends_on"]
    assert worker["passhat-setup"]["condition"] == "service_completed_successfully"
    assert worker["temporal"]["condition"] == "service_healthy"
    assert worker["postgresql"]["condition"] == "service_healthy"
    assert services["passhat-setup"]["depends_on"]["temporal"]["condition"] == "service_healthy"
    assert services["temporal"]["depends_on"]["postgresql"]["condition"] == "service_healthy"
    # A condition on a healthcheck that does not exist would never be met.
    for name, service in services.items():
        for dep, how in service.get("depends_on", {}).items():
            if how["condition"] == "service_healthy":
                assert "healthcheck" in services[dep], f"{name} waits for {dep}'s healthcheck"


def test_dynamic_config_is_mounted_where_temporal_reads_it(config):
    temporal = config["services"]["temporal"]
    # auto-setup resolves DYNAMIC_CONFIG_FILE_PATH against its working dir, /etc/temporal.
    in_container = Path("/etc/temporal") / _env(temporal)["DYNAMIC_CONFIG_FILE_PATH"]
    host_file = None
    for volume in temporal["volumes"]:
        host, target = volume.split(":")[:2]
        if in_container.is_relative_to(target):
            host_file = Path(host) / in_container.relative_to(target)
    assert host_file is not None and host_file.is_file(), f"nothing mounted at {in_container}"
    dynamic = yaml.safe_load(host_file.read_text())
    assert dynamic, "empty dynamic config"
    for key, values in dynamic.items():
        assert isinstance(values, list) and all({"value", "constraints"} <= set(v) for v in values), key
    # Model calls start in the worker whose workflow task scheduled them, as on the
    # embedded server (Temporal's own default is off).
    assert dynamic["system.enableActivityEagerExecution"] == [{"value": True, "constraints": {}}]


def test_workers_are_built_from_the_dockerfile(config):
    services = config["services"]
    for name in ("passhat-worker", "passhat-setup"):
        build = services[name]["build"]
        assert Path(build["context"]) == ROOT
        assert build.get("dockerfile", "Dockerfile") == "Dockerfile"
    # Same tag, so the setup job and the workers run one image.
    assert services["passhat-worker"]["image"] == services["passhat-setup"]["image"]
    # No command override: the worker runs the image's CMD.
    assert "command" not in services["passhat-worker"]
    assert services["passhat-worker"]["deploy"]["replicas"] >= 1


def _cluster_section() -> str:
    """The user documentation of running on a cluster (the README points to it)."""
    return (ROOT / "docs" / "cluster.md").read_text()


def test_readme_lists_every_image_and_port(config):
    section = _cluster_section()
    for name, service in config["services"].items():
        assert f"`{service['image']}`" in section, f"docs/cluster.md lacks {name}'s image {service['image']}"
        for port in service.get("ports", []):
            for number in {port["published"], port["target"]}:
                assert re.search(rf"\b{number}\b", section), f"docs/cluster.md lacks {name}'s port {number}"
    # The names the docs tell people to search for are the ones the file sets.
    worker_env = _env(config["services"]["passhat-worker"])
    assert worker_env["OTEL_SERVICE_NAME"] in section
    assert config["services"]["passhat-setup"]["command"] == ["passhat", "search-attributes", "register"]
    assert "passhat search-attributes register" in section


# --- the commands the stack runs, against the test servers ------------------------------


def _passhat_exe() -> str:
    exe = Path(sys.executable).parent / "passhat"
    assert exe.exists(), f"{exe} missing: install the project (pip install -e .)"
    return str(exe)


def _swap(argv: list[str], old: str, new: str) -> list[str]:
    assert old in argv, f"{old} not in {argv}"
    return [new if a == old else a for a in argv]


async def test_temporal_healthcheck_runs(config, temporal_server):
    """The healthcheck is a `temporal` CLI command: run it with the same CLI against a
    live server (healthy) and against a port nobody listens on (unhealthy)."""
    check = config["services"]["temporal"]["healthcheck"]["test"]
    assert check[0] == "CMD" and check[1] == "temporal"
    argv = [str(find_temporal_binary()), *check[2:]]
    argv = _swap(argv, _env(config["services"]["passhat-worker"])["TEMPORAL_ADDRESS"], temporal_server.address)

    ok = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    # It lists the namespace's attributes, including the ones passhat registers.
    assert search_attributes.RUN.name in ok.stdout

    down = _swap(argv, temporal_server.address, f"127.0.0.1:{free_port()}")
    assert subprocess.run(down, capture_output=True, timeout=60).returncode != 0


async def test_setup_command_registers_search_attributes(config, temporal_server):
    setup = config["services"]["passhat-setup"]
    argv = _swap(setup["command"], "passhat", _passhat_exe())
    env = {**os.environ, **_env(setup), "TEMPORAL_ADDRESS": temporal_server.address}
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    printed = dict(line.split("\t") for line in proc.stdout.splitlines())
    assert printed == {key.name: "Keyword" for key in search_attributes.ALL}


def test_worker_command_exists():
    # `--help` parses the command without connecting anywhere.
    proc = subprocess.run([_passhat_exe(), "worker", "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def _pg_env() -> dict[str, str]:
    """libpq variables pointing psql / pg_isready at the test PostgreSQL."""
    env = {**os.environ, "PGHOST": PG_ADMIN_URL.host or "127.0.0.1", "PGPORT": str(PG_ADMIN_URL.port or 5432)}
    if PG_ADMIN_URL.password:
        env["PGPASSWORD"] = PG_ADMIN_URL.password
    return env


def _pg_tool(name: str) -> str:
    exe = shutil.which(name)
    if exe is None:
        pytest.fail(f"{name} not found: the PostgreSQL client programs (Debian: postgresql-client) are needed")
    return exe


def test_postgres_healthcheck_runs(config):
    check = config["services"]["postgresql"]["healthcheck"]["test"]
    assert check[:2] == ["CMD", "pg_isready"]
    argv = _swap([_pg_tool("pg_isready"), *check[2:]], "127.0.0.1", PG_ADMIN_URL.host or "127.0.0.1")
    proc = subprocess.run(argv, capture_output=True, text=True, env=_pg_env(), timeout=30)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_init_script_creates_a_database_the_store_can_use(config):
    """Run the postgres image's init script with psql, as the image would (under a unique
    role and database name, so a real `passhat` database on the test server is never
    touched), then open passhat's store on it as that role."""
    _pg_tool("psql")
    pg_env = _env(config["services"]["postgresql"])
    worker_url = make_url(_env(config["services"]["passhat-worker"])["PASSHAT_DB_URL"])
    name = f"passhat_compose_{uuid.uuid4().hex[:10]}"
    admin_url = PG_ADMIN_URL.set(drivername="postgresql").render_as_string(hide_password=False)
    env = {
        **_pg_env(),
        "POSTGRES_USER": PG_ADMIN_URL.username or "postgres",
        "PASSHAT_DB_USER": name,
        "PASSHAT_DB_NAME": name,
        # A password with quotes: the script must quote it, not paste it into SQL.
        "PASSHAT_DB_PASSWORD": pg_env["PASSHAT_DB_PASSWORD"] + "'\"; --",
    }
    try:
        proc = subprocess.run([str(INIT_SCRIPT)], capture_output=True, text=True, env=env, timeout=60)
        assert proc.returncode == 0, proc.stdout + proc.stderr

        url = worker_url.set(
            host=PG_ADMIN_URL.host, port=PG_ADMIN_URL.port, username=name, database=name,
            password=env["PASSHAT_DB_PASSWORD"],
        )
        store = Store(url.render_as_string(hide_password=False))
        try:
            # Opening the store created its schema, as the passhat role, in its own database.
            with store.engine.connect() as conn:
                owner = conn.exec_driver_sql(
                    "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = current_database()"
                ).scalar()
                owned = set(conn.exec_driver_sql(
                    "SELECT tablename FROM pg_tables WHERE tableowner = current_user"
                ).scalars())
            assert owner == name
            assert owned == set(SQLModel.metadata.tables) and owned
        finally:
            store.engine.dispose()
    finally:
        with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute(f'DROP ROLE IF EXISTS "{name}"')


# --- Dockerfile and .dockerignore -------------------------------------------------------


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, comments dropped, continuation lines joined."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in DOCKERFILE.read_text().splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        pending += line.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        keyword, _, args = pending.strip().partition(" ")
        out.append((keyword.upper(), args.strip()))
        pending = ""
    return out


def test_dockerfile_image_settings():
    steps = _instructions()
    froms = [args for kw, args in steps if kw == "FROM"]
    assert froms == ["python:3.11-slim"]
    # The base image's Python satisfies the project's requires-python.
    assert "3.11" in SpecifierSet(PYPROJECT["project"]["requires-python"])

    env: dict[str, str] = {}
    for kw, args in steps:
        if kw == "ENV":
            env.update(item.split("=", 1) for item in shlex.split(args))
    assert env.get("LITELLM_LOCAL_MODEL_COST_MAP") == "True"

    users = [args for kw, args in steps if kw == "USER"]
    assert users and users[-1] not in ("root", "0"), "the image must not run as root"

    cmds = [args for kw, args in steps if kw == "CMD"]
    assert json.loads(cmds[-1]) == ["passhat", "worker"]
    assert "passhat" in PYPROJECT["project"]["scripts"]


def _ignore_rules() -> list[tuple[bool, re.Pattern]]:
    """.dockerignore as (is_exception, regex) rules, in Docker's syntax: `*` and `?` stay
    within one path segment, `**` spans segments, `!` re-includes, the last match wins."""
    rules = []
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        exception = line.startswith("!")
        pattern = line.lstrip("!").strip("/")
        regex = ""
        i = 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                regex, i = regex + "(?:.*/)?", i + 3
            elif pattern.startswith("**", i):
                regex, i = regex + ".*", i + 2
            elif pattern[i] == "*":
                regex, i = regex + "[^/]*", i + 1
            elif pattern[i] == "?":
                regex, i = regex + "[^/]", i + 1
            elif pattern[i] == "[":
                end = pattern.index("]", i)
                regex, i = regex + pattern[i:end + 1], end + 1
            else:
                regex, i = regex + re.escape(pattern[i]), i + 1
        rules.append((exception, re.compile(regex)))
    return rules


def _ignored(rel: str, rules) -> bool:
    """Whether Docker leaves `rel` (relative to the context root) out of the context: a
    pattern that matches a directory excludes everything below it."""
    parts = rel.split("/")
    ignored = False
    for exception, regex in rules:
        if any(regex.fullmatch("/".join(parts[:n])) for n in range(1, len(parts) + 1)):
            ignored = not exception
    return ignored


def test_dockerignore_keeps_the_context_small():
    rules = _ignore_rules()
    for heavy in (".venv/bin/python", ".git/HEAD", "tests/test_compose.py",
                  "infra/__pycache__/store.cpython-311.pyc", "passhat.egg-info/PKG-INFO"):
        assert _ignored(heavy, rules), heavy
    for needed in ("pyproject.toml", "README.md", "infra/store.py", "Dockerfile"):
        assert not _ignored(needed, rules), needed


def test_dockerfile_installs_the_project(tmp_path):
    """Replay the build: copy what the COPY lines would bring into the image (after
    .dockerignore), then run setuptools, the backend `pip install .` uses, on that copy.
    A package pyproject lists but the Dockerfile does not copy fails the build here."""
    rules = _ignore_rules()
    image_root = tmp_path / "image"
    workdir = Path("/")
    install_dir = None
    for kw, args in _instructions():
        if kw == "WORKDIR":
            workdir = workdir / args
        elif kw == "COPY":
            *sources, dest = shlex.split(args)
            assert not any(s.startswith("--") for s in sources), "COPY flags are not replayed"
            target = image_root / (workdir / dest).relative_to("/")
            for source in sources:
                src = ROOT / source
                files = [src] if src.is_file() else sorted(p for p in src.rglob("*") if p.is_file())
                for f in files:
                    rel = f.relative_to(ROOT).as_posix()
                    if _ignored(rel, rules):
                        continue
                    if src.is_file():
                        out = target / f.name if dest.endswith("/") else target
                    else:
                        out = target / f.relative_to(src)
                    out.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(f, out)
        elif kw == "RUN" and re.search(r"\bpip install \.(\s|$)", args):
            install_dir = image_root / workdir.relative_to("/")
    assert install_dir is not None, "no `pip install .` in the Dockerfile"
    assert (install_dir / "pyproject.toml").is_file(), "`pip install .` runs where pyproject.toml was not copied"

    pytest.importorskip("setuptools", reason="the build is replayed with this Python's setuptools, which "
                        "a 3.12 venv does not have (docs/fidelity.md installs it for tau2 1.0.x)")
    out = tmp_path / "build"
    out.mkdir()
    proc = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", "from setuptools import setup; setup()",
         "egg_info", "--egg-base", str(out), "build", "--build-base", str(out / "b")],
        cwd=install_dir, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lib = out / "b" / "lib"
    assert {p.name for p in lib.iterdir()} == {"passhat"}
    built = {".".join(p.parent.relative_to(lib).parts) for p in lib.rglob("__init__.py")}
    assert built == set(PYPROJECT["tool"]["setuptools"]["packages"])
    entry_points = next(out.glob("*.egg-info")) / "entry_points.txt"
    assert "passhat = passhat.cli.entry:main" in entry_points.read_text()

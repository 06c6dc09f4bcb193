#!/usr/bin/env bash
# Sets up everything the test suite needs on a fresh machine with only python3, then runs
# it. Used by the README's test command and by CI (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'

# Debian packages some tests drive as real programs: docker-compose validates the
# compose file; chromium screenshots the Temporal UI; PostgreSQL's server binaries
# (initdb, pg_ctl) run a throwaway database the store-outage test stops and starts.
# Installed only when missing.
need=()
command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || need+=(postgresql)
if [ ${#need[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

export LITELLM_LOCAL_MODEL_COST_MAP=True
# Two processes, each a file at a time: most tests wait on servers and subprocesses, not on
# a core, and a file's module fixtures stay in one process.
exec .venv/bin/python -m pytest -n 2 --dist loadfile "$@"

"""Prints how long `passhat --help` and `passhat domains` take to start and finish, as a
user's shell sees them (a fresh process each time, median of N runs).

    python bench/startup.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

PASSHAT = Path(sys.executable).parent / "passhat"


def wall(args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([str(PASSHAT), *args], check=True, capture_output=True,
                   env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    runs = ap.parse_args().runs
    print(f"{'command':24} {'median s':>9} {'min s':>7}")
    for args in (["--help"], ["domains"]):
        times = [wall(args) for _ in range(runs)]
        print(f"{'passhat ' + ' '.join(args):24} {statistics.median(times):9.2f} {min(times):7.2f}")


if __name__ == "__main__":
    main()

"""The `passhat` command's entry point. A command that executes a run goes to the warm
process when one is ready (passhat.cli.warm_start); every other command, and a run's
when there is none, runs in this process (passhat.cli.main). Only the standard library
and passhat's settings are imported before that choice: the command line's own modules
cost a quarter second."""

from __future__ import annotations

import os
import sys


def main() -> None:
    from passhat.cli.warm_start import run_warm

    code = run_warm(sys.argv)
    if code is not None:
        os._exit(code)
    from passhat.cli.main import main as run_here

    run_here()

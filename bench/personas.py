#!/usr/bin/env python
"""Personas bench: each scripted persona's known effect on the scripted agents.

Runs one sweep the way a user would (`passhat run`, a fresh PASSHAT_HOME, the embedded
Temporal server): two scripted agents, `scripted/oracle` (acts on the task's gold actions
whatever the user says) and `scripted/verifier` (asks for the user id, twice at most, and
acts only once it has it), against `scripted/customer` under tau2's own user and every
built-in persona at several intensities (docs/personas.md, "Offline ground truth"). Then
`passhat report -o json` gives, per agent and persona, the drop in pass^k from tau2's user
paired by task; each is printed beside the drop the persona's known behaviour implies,
and the bench exits 0 only if every one matches.

    python bench/personas.py                 # airline tasks 2 7 8 9 11, k=2: 240 trials
    python bench/personas.py --trials 1
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PASSHAT = str(Path(sys.executable).parent / "passhat")
AGENTS = ["scripted/oracle", "scripted/verifier"]
# The drop of pass^k each persona's scripted behaviour implies for the verifier, which
# asks for the user id twice and asks nothing else before it acts (the oracle: 0 for all).
VERIFIER_DROP = {
    "skeptical:1": 0.0,     # gives the id at the second ask
    "skeptical:2": 1.0,     # ... at the third: never asked
    "skeptical:3": 1.0,
    "incoherent:1": 0.0,    # "My user id" / "is <id>.": the id by the second ask
    "incoherent:3": 1.0,    # a word at a time: "My" / "user", then the verifier gives up
    "impatient:1": 0.0,     # stops at the 3rd question since its request; the verifier asks 1
    "impatient:2": 0.0,     # ... at the 2nd
    "impatient:3": 1.0,     # ... at the 1st: the verifier's
    "changes-mind:1": 1.0,  # answers the first ask by changing its mind, the second by going back
    "confused:3": 0.0,      # no scripted behaviour: the cooperative customer
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=["2", "7", "8", "9", "11"], help="airline task ids")
    parser.add_argument("--trials", type=int, default=2)
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="passhat-personas-")
    env = {**os.environ, "PASSHAT_HOME": home, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    run = ["run", "--domain", "airline", "--trials", str(args.trials), "--user-model", "scripted/customer",
           "--run-id", "personas-bench", "--yes", "-o", "json"]
    run += [a for t in args.tasks for a in ("--task", t)] + [a for m in AGENTS for a in ("--agent-model", m)]
    run += [a for p in VERIFIER_DROP for a in ("--user-persona", p)]
    started = time.monotonic()
    try:
        done = subprocess.run([PASSHAT, *run], env=env, capture_output=True, text=True, timeout=3600)
        if done.returncode != 0:
            print(done.stdout, done.stderr, sep="\n")
            return 1
        wall = time.monotonic() - started
        report = json.loads(subprocess.run([PASSHAT, "report", "personas-bench", "-o", "json"], env=env,
                                           capture_output=True, text=True, check=True, timeout=600).stdout)
    finally:
        subprocess.run([PASSHAT, "server", "stop"], env=env, capture_output=True, timeout=120)
    users = len(VERIFIER_DROP) + 1
    print(f"airline tasks {' '.join(args.tasks)}, k={args.trials}, {len(AGENTS)} agents x {users} users "
          f"(tau2's and {users - 1} personas): {len(args.tasks) * args.trials * users * len(AGENTS)} trials "
          f"in {wall:.0f} s")
    print(f"{'agent':<19} {'persona':<15} {'pass^k':>7} {'tau2 user':>9} {'drop [95% CI]':>26} "
          f"{'expected':>8}  broken tasks")
    ok = True
    for r in report["robustness"]:
        k = max(r["drop"], key=int)
        drop = r["drop"][k]
        want = 0.0 if r["agent_model"] == "scripted/oracle" else VERIFIER_DROP[r["user_persona"]]
        met = abs(drop["value"] - want) < 1e-9
        ok &= met
        print(f"{r['agent_model']:<19} {r['user_persona']:<15} {r['pass_hat_k'][k]['value']:>7.3f} "
              f"{r['baseline_pass_hat_k'][k]['value']:>9.3f} "
              f"{drop['value']:>+7.3f} [{drop['low']:+.3f}, {drop['high']:+.3f}] {want:>+8.3f}  "
              f"{' '.join(r['broken_tasks']) or '-'}{'' if met else '  NOT AS EXPECTED'}")
    print("every drop as the personas' known behaviour implies" if ok else "SOME DROPS DIFFER FROM THE KNOWN EFFECT")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Saturating a machine's CPUs on purpose: busy processes started and stopped by a test
or a benchmark, and the /proc counters that show how busy the machine and each process
were."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass

# A busy process's life, should the process that started it die without stopping it.
HOG_LIFETIME_S = 900
# A busy process: spins until its parent (a test or a bench) is gone or its lifetime is over.
HOG = (
    "import os, time\n"
    f"parent, end = os.getppid(), time.monotonic() + {HOG_LIFETIME_S}\n"
    "while os.getppid() == parent and time.monotonic() < end:\n"
    "    for _ in range(100_000): pass\n"
)


def machine_ticks() -> tuple[int, int]:
    """(CPU time the machine had, of which idle), in clock ticks, from /proc/stat. Time
    stolen by a hypervisor is not the machine's to give: it is left out."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq = (fields + [0] * 7)[:7]
    return user + nice + system + idle + iowait + irq + softirq, idle + iowait


def process_ticks(pid: int) -> int:
    """User + system CPU time of one process, in clock ticks (/proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        # The command name may hold spaces and parentheses: fields start after the last ')'.
        rest = f.read().rsplit(")", 1)[1].split()
    return int(rest[11]) + int(rest[12])  # utime, stime (fields 14 and 15)


@dataclass
class CpuHogs:
    """Busy-loop processes (HOG), at this process's nice value, which the worker
    inherits too: they compete with it on equal terms."""

    procs: list[subprocess.Popen]

    @classmethod
    def start(cls, n: int) -> CpuHogs:
        hogs = cls([])
        try:
            for _ in range(n):
                hogs.procs.append(subprocess.Popen(
                    [sys.executable, "-S", "-c", HOG],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL, start_new_session=True,
                ))
        except BaseException:
            hogs.stop()
            raise
        return hogs

    def alive(self) -> int:
        return sum(p.poll() is None for p in self.procs)

    def ticks(self) -> int:
        return sum(process_ticks(p.pid) for p in self.procs)

    def running(self) -> bool:
        """Every one of them alive and already burning CPU."""
        return all(p.poll() is None and process_ticks(p.pid) > 0 for p in self.procs)

    def stop(self) -> None:
        """SIGKILL each and reap it: none of them runs after this returns."""
        for p in self.procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
        for p in self.procs:
            p.wait(30)

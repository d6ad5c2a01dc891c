"""What a job's control group adds to its start: a process started in a fresh group with
a GPU device rule, a memory and a CPU limit, against the same process started plainly.

    sudo python bench/cgroup_bench.py [--rounds N]

Each round starts ``python -c pass`` twice, the plain one and the one in a group, in an
order that turns from round to round; the group's time includes making it (the device
rules of a one-GPU job: 253 denied minors), joining it before exec and removing it
once the process is gone, as the local backend does. Printed: the medians, and what
the group adds, in milliseconds and as a ratio. Needs root and cgroups (v1 here).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from nbjobs.cgroups import Cgroups, Limits

COMMAND = [sys.executable, "-c", "pass"]
LIMITS = Limits(memory=8 * 2**30, cpus=4, gpu_minors=(0,))


def plain() -> float:
    started = time.perf_counter()
    subprocess.run(COMMAND, check=True)
    return time.perf_counter() - started


def grouped(cgroups: Cgroups, round_: int) -> float:
    started = time.perf_counter()
    group = cgroups.group(f"bench-{os.getpid()}-{round_}")
    group.create(LIMITS)
    subprocess.run(COMMAND, check=True, preexec_fn=group.join)
    group.remove()
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=21)
    args = parser.parse_args()
    cgroups = Cgroups()
    if not cgroups.enforced or cgroups.uses_systemd:
        raise SystemExit(f"nothing to measure here: {cgroups.summary()}")
    times: dict[str, list[float]] = {"plain": [], "in its group": []}
    for round_ in range(args.rounds):
        steps = [("plain", plain), ("in its group", lambda r=round_: grouped(cgroups, r))]
        if round_ % 2:
            steps.reverse()
        for name, step in steps:
            times[name].append(step())
    base = statistics.median(times["plain"])
    ours = statistics.median(times["in its group"])
    load = os.getloadavg()[0]
    print(f"a job's process start, median of {args.rounds} rounds (load {load:.2f}):")
    print(f"  plain            {base * 1000:7.1f} ms")
    print(f"  in its group     {ours * 1000:7.1f} ms   ÷ plain {ours / base:.2f}")
    print(f"  the group adds   {(ours - base) * 1000:7.1f} ms ({cgroups.summary()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Where a command's CPU goes, by kind of process: ``python scripts/suite_cpu.py [-- CMD...]``.

Runs CMD (by default the test suite as scripts/test.sh runs it, without the install) and,
every quarter second meanwhile, reads the CPU time of every process on the machine; at
the end prints the CPU each kind of process used (job runners, kernels, notebook servers,
hubs, chromium, the test workers ...) with its share of the whole and how many were
seen. A process that lives less than a quarter second can be missed, and one that
existed before CMD started counts only from then on. The suite is bound by CPU on two
cores, so this is what to read before making it shorter (docs/development.md).
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections import Counter

import psutil

#: (a word in the command line, the kind it makes a process), first match wins
KINDS = [
    ("nbjobs.job_runner", "job runner"),
    ("ipykernel", "kernel"),
    ("spawner.singleuser", "notebook server"),
    ("jupyterhub-singleuser", "notebook server"),
    ("jupyterhub.singleuser", "notebook server"),
    ("hub_config.run", "hub"),
    ("-m jupyterhub", "hub"),
    ("configurable-http-proxy", "proxy"),
    ("chrom", "chromium"),
    ("job_service.notebooks", "notebook checker"),
    ("bench/", "bench run by a test"),
    ("nbjobs.cli service", "nbjobs service"),
    ("nbjobs.cli", "nbjobs command"),
    ("postgres", "postgres"),
    ("python -u -c", "test worker"),
    ("pytest", "pytest"),
    ("node", "node"),
]
DEFAULT = [sys.executable, "-m", "pytest", "tests", "--ignore=tests/hub_mock", "-q"]
DEFAULT += ["-n", "4", "--dist", "loadgroup", "-p", "no:cacheprovider"]


def kind_of(cmdline: list[str]) -> str:
    line = " ".join(cmdline)
    return next((kind for word, kind in KINDS if word in line), "other")


def sample(stop: threading.Event, used: Counter[str], seen: Counter[str]) -> None:
    """Add each process's CPU since it was last read to its kind, until ``stop``."""
    last: dict[int, list] = {}
    first = True
    while not stop.is_set():
        alive = set()
        for process in psutil.process_iter(["cmdline", "cpu_times"]):
            times = process.info["cpu_times"]
            if times is None or process.pid == psutil.Process().pid:
                continue
            cpu = times.user + times.system
            if process.pid not in last:
                kind = kind_of(process.info["cmdline"] or [])
                last[process.pid] = [kind, cpu if first else 0.0]
                seen[kind] += 0 if first else 1
            alive.add(process.pid)
            kind, before = last[process.pid]
            if cpu > before:
                used[kind] += cpu - before
                last[process.pid][1] = cpu
        for pid in set(last) - alive:
            del last[pid]
        first = False
        stop.wait(0.25)


def main(argv: list[str]) -> int:
    command = argv[argv.index("--") + 1 :] if "--" in argv else DEFAULT
    used: Counter[str] = Counter()
    seen: Counter[str] = Counter()
    stop = threading.Event()
    sampler = threading.Thread(target=sample, args=(stop, used, seen), daemon=True)
    sampler.start()
    code = subprocess.call(command)
    stop.set()
    sampler.join()
    total = sum(used.values()) or 1.0
    print(f"\nCPU by kind of process ({total:.0f} s in all, load {psutil.getloadavg()[0]:.1f}):")
    for kind, seconds in used.most_common():
        print(f"  {kind:22} {seconds:8.0f} s  {seconds / total:6.1%}  {seen[kind]:6} seen")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Where a command's CPU goes, by kind of process: ``python scripts/suite_cpu.py [-- CMD...]``.

Runs CMD (by default the test suite as scripts/test.sh runs it, without the install) and,
every quarter second meanwhile, reads the CPU time of every process on the machine; at
the end prints the CPU each kind of process used (job runners, kernels, notebook servers,
hubs, chromium, the test workers ...) with its share of the whole and how many were
seen. A process that lives less than a quarter second can be missed, and one that
existed before CMD started counts only from then on. The suite is bound by CPU on two
cores, so this is what to read before making it shorter (docs/development.md).

With ``--by-file`` it also puts each process's CPU to the test file its test worker was
running when it was read (the worker and everything started under it; a process first
seen after its parent had gone counts under "(no worker)"; ``--by-test``: the test it
was running) and prints the files that
cost most, each with the three kinds of process that cost it most; then each worker's
wall time (from its first file to its last one's end, and how much of it the machine-wide
files took, which one worker runs one after the other) and the files that took longest.
``--dump FILE`` also writes the CPU by file (or test) and kind as JSON, to read any kind's
files, not only the three costliest of each.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import psutil

#: (a word in the command line, the kind it makes a process), first match wins
KINDS = [
    # before the runner's: the server-extension tests' servers' command line imports
    # nbjobs.job_runner.lean_imports
    ("jupyter_server.serverapp", "notebook server"),
    ("nbjobs.job_runner", "job runner"),
    ("ipykernel", "kernel"),
    ("spawner.singleuser", "notebook server"),
    ("jupyterhub-singleuser", "notebook server"),
    ("jupyterhub.singleuser", "notebook server"),
    ("hub_config.run", "hub"),
    ("-m jupyterhub", "hub"),
    ("configurable-http-proxy", "proxy"),
    ("--type=renderer", "chromium renderer"),
    ("--type=gpu-process", "chromium gpu process"),
    ("--type=", "chromium helper"),
    ("chrom", "chromium"),
    ("job_service.notebooks", "notebook checker"),
    ("bench/", "bench run by a test"),
    ("nbjobs.cli service", "nbjobs service"),
    ("nbjobs.cli", "nbjobs command"),
    ("postgres", "postgres"),
    ("python -u -c", "test worker"),
    ("-m pytest", "pytest"),
    ("bin/pytest", "pytest"),
    ("node", "node"),
]
DEFAULT = [sys.executable, "-m", "pytest", "tests", "--ignore=tests/hub_mock", "-q"]
DEFAULT += ["-n", "4", "--dist", "loadgroup", "-p", "no:cacheprovider"]


def kind_of(cmdline: list[str]) -> str:
    line = " ".join(cmdline)
    return next((kind for word, kind in KINDS if word in line), "other")


def worker_files(folder: str | None) -> dict[int, str]:
    """Each test worker's pid and the test file it is on (tests/conftest.py writes them)."""
    if folder is None:
        return {}
    files = {}
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            files[int(name)] = f.read()
    return files


def worker_of(process: psutil.Process, files: dict[int, str]) -> int | None:
    """The test worker ``process`` is (or runs under), None when none is among its
    parents (or it is gone)."""
    try:
        return next((p.pid for p in [process, *process.parents()] if p.pid in files), None)
    except psutil.Error:
        return None


@dataclass
class Seen:
    """A process as last read: its kind, its CPU time then, the test worker it runs under."""

    kind: str
    cpu: float
    worker: int | None


@dataclass
class Timeline:
    """When each test worker began each test file, seconds from the start of the run."""

    start: float = field(default_factory=time.monotonic)
    #: per worker: (the file, when the worker was first seen on it)
    spans: dict[int, list[tuple[str, float]]] = field(default_factory=dict)

    def saw(self, files: dict[int, str]) -> None:
        now = time.monotonic() - self.start
        for worker, name in files.items():
            spans = self.spans.setdefault(worker, [])
            if not spans or spans[-1][0] != name:
                spans.append((name, now))

    def print(self, end: float, machine_wide: tuple[str, ...]) -> None:
        """Each worker's files in order, with the wall time each took (to the next one's
        start, or to the end of the run); then the longest files."""
        walls: Counter[str] = Counter()
        print(f"\nWall time by worker ({end:.0f} s from the start of pytest to its end):")
        for worker, spans in sorted(self.spans.items()):
            ends = [at for _, at in spans[1:]] + [end]
            chain = 0.0
            for (name, at), until in zip(spans, ends, strict=True):
                walls[name] += until - at
                chain += until - at if name in machine_wide else 0.0
            print(
                f"  worker {worker}: {len(spans)} files, from {spans[0][1]:.0f} s to"
                f" {ends[-1]:.0f} s; the machine-wide files {chain:.0f} s of it"
            )
        print("  the longest files (wall):")
        for name, seconds in walls.most_common(15):
            print(f"    {seconds:6.0f} s  {name}")


def sample(
    stop: threading.Event,
    used: Counter[str],
    seen: Counter[str],
    by_file: Counter[tuple[str, str]],
    folder: str | None,
    timeline: Timeline,
) -> None:
    """Add each process's CPU since it was last read to its kind (and, with ``folder``,
    to the test file its worker is on and that kind, in ``by_file``, and the files'
    changes to ``timeline``), until ``stop``."""
    last: dict[int, Seen] = {}
    first = True
    me = os.getpid()
    while not stop.is_set():
        alive = set()
        files = worker_files(folder)
        timeline.saw(files)
        for process in psutil.process_iter(["cmdline", "cpu_times"]):
            times = process.info["cpu_times"]
            if times is None or process.pid == me:
                continue
            cpu = times.user + times.system
            if process.pid not in last:
                kind = kind_of(process.info["cmdline"] or [])
                if kind == "other":  # named by its program, to say what it was
                    kind = f"other: {' '.join(process.info['cmdline'] or ['?'])[:60]}"
                # where it runs is looked up until found, then kept: it stays under
                # that worker when its parent goes first
                last[process.pid] = Seen(kind, cpu if first else 0.0, worker_of(process, files))
                seen[kind] += 0 if first else 1
            alive.add(process.pid)
            now = last[process.pid]
            if now.worker is None and files:  # a worker seen before it wrote its file
                now.worker = worker_of(process, files)
            if cpu > now.cpu:
                used[now.kind] += cpu - now.cpu
                if folder is not None:
                    name = files.get(now.worker or 0, "(no worker)")
                    by_file[name, now.kind] += cpu - now.cpu
                now.cpu = cpu
        for pid in set(last) - alive:
            del last[pid]
        first = False
        stop.wait(0.25)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--by-file", action="store_true", help="also the CPU by test file")
    parser.add_argument(
        "--by-test", action="store_true", help="as --by-file, by test rather than by file"
    )
    parser.add_argument(
        "--dump", metavar="FILE", help="also write the CPU by file (or test) and kind as JSON"
    )
    parser.add_argument("command", nargs="*", help="after --: what to run (the suite)")
    args = parser.parse_args(argv)
    command = args.command or DEFAULT
    args.by_file = args.by_file or args.by_test
    used: Counter[str] = Counter()
    seen: Counter[str] = Counter()
    by_file: Counter[tuple[str, str]] = Counter()
    stop = threading.Event()
    timeline = Timeline()
    with tempfile.TemporaryDirectory(prefix="suite-cpu-") as folder:
        env = None
        if args.by_file:
            env = dict(os.environ, NBJOBS_SUITE_CPU_DIR=folder)
        if env is not None and args.by_test:
            env["NBJOBS_SUITE_CPU_BY_TEST"] = "1"
        sampler = threading.Thread(
            target=sample,
            args=(stop, used, seen, by_file, folder if args.by_file else None, timeline),
            daemon=True,
        )
        sampler.start()
        code = subprocess.call(command, env=env)
        end = time.monotonic() - timeline.start
        stop.set()
        sampler.join()
    total = sum(used.values()) or 1.0
    print(f"\nCPU by kind of process ({total:.0f} s in all, load {psutil.getloadavg()[0]:.1f}):")
    for kind, seconds in used.most_common(30):
        print(f"  {kind:22} {seconds:8.0f} s  {seconds / total:6.1%}  {seen[kind]:6} seen")
    if args.by_file:
        print_by_file(by_file, total)
        timeline.print(end, machine_wide())
    if args.dump:
        rows = [[name, kind, round(cpu, 2)] for (name, kind), cpu in by_file.most_common()]
        with open(args.dump, "w") as out:
            json.dump({"kinds": used, "seen": seen, "by_file": rows}, out, indent=0)
    return code


def machine_wide() -> tuple[str, ...]:
    """The machine-wide test files (tests/conftest.py's MACHINE_WIDE)."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from tests.conftest import MACHINE_WIDE

    return MACHINE_WIDE


def print_by_file(by_file: Counter[tuple[str, str]], total: float) -> None:
    """The 40 costliest test files, each with its three costliest kinds of process."""
    files: Counter[str] = Counter()
    for (name, _kind), seconds in by_file.items():
        files[name] += seconds
    print("\nCPU by test file (the worker and all under it), the costliest 40:")
    for name, seconds in files.most_common(40):
        kinds = Counter({kind: s for (n, kind), s in by_file.items() if n == name})
        most = ", ".join(f"{kind} {s:.0f}" for kind, s in kinds.most_common(3))
        print(f"  {seconds:8.0f} s  {seconds / total:6.1%}  {name}  ({most})")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

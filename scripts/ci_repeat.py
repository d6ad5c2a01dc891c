"""Run CI again and again from fresh clones: ``python scripts/ci_repeat.py [--runs N]``.

What issue 44 asks a suite to prove: green on every run, alone and on a busy machine.
Each run clones this repository's commit (``--rev``, HEAD by default) into a new folder
and runs ``.ci/run`` there, exactly as CI does (it installs what it needs, then runs the
README's test command). ``--beside-demo`` keeps the demo (``scripts/demo.sh``, from a
clone of its own) running on the machine the whole time; ``--beside-suite`` runs a second
``.ci/run`` of another clone at the same time as each counted one (a row is green only
when both are). Every run prints one line: green or red, the pytest summary, the wall
time, the machine's load (mean and peak of the one-minute load average, read every
10 s), the CPU seconds the machine was busy, idle and stolen by its host over the run,
and its speed before the run (``probe``: a fixed piece of work on one core, in ms); the
end says how many were green. A red run's log is kept and named; green runs' folders
are removed.

Each clone's install picks the interpreter of its venv as a fresh checkout's does
(scripts/python_for_accounts.sh: one the tests' OS accounts can start), whatever Python
this is run with.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
#: the demo's hub (README)
DEMO_URL = "http://127.0.0.1:8000/hub/login"
#: pytest's last line: "1 329 passed, 2 skipped in 1250.83s (0:20:50)"
SUMMARY = re.compile(r"^=*\s*(\d+ (passed|failed|error).*? in [\d.]+s.*?)\s*=*$", re.MULTILINE)


class Load:
    """The one-minute load average, read every 10 s while a run lasts."""

    def __init__(self) -> None:
        self.readings: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)

    def _read(self) -> None:
        while True:
            self.readings.append(os.getloadavg()[0])
            if self._stop.wait(10):
                return

    def __enter__(self) -> Load:
        self._started = cpu_times()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.cpu = [end - start for start, end in zip(self._started, cpu_times(), strict=True)]

    def __str__(self) -> str:
        if not self.readings:
            return "load ?"
        busy, idle, steal = self.cpu
        return (
            f"load {statistics.mean(self.readings):.1f} (peak {max(self.readings):.1f}),"
            f" {busy:.0f} CPU-s busy, {idle:.0f} idle, {steal:.0f} stolen"
        )


def cpu_times() -> list[float]:
    """The machine's CPU seconds so far, all cores together (/proc/stat): busy (user,
    system, interrupts), idle (waiting for input or output too), and stolen (by the host
    from this virtual machine, where it says). Busy over a run is the work the run did:
    a run that takes longer with the same busy seconds waited, or was slowed by the host."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = fields[:8]
    tick = os.sysconf("SC_CLK_TCK")
    return [(user + nice + system + irq + softirq) / tick, (idle + iowait) / tick, steal / tick]


def probe() -> float:
    """Milliseconds one core takes now for a fixed piece of pure-Python work, the best of
    five: read between runs, when the machine is otherwise idle, it says how fast the
    machine is at the time (this one's speed changes by a quarter from one half hour to
    the next), so that two runs' times can be told apart from the machine's."""
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        sum(i * i for i in range(1_000_000))
        best = min(best, time.perf_counter() - start)
    return best * 1000


def clone(rev: str, where: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(REPOSITORY), str(where)], check=True)
    subprocess.run(["git", "-C", str(where), "checkout", "-q", rev], check=True)
    return where


def start_ci(folder: Path) -> tuple[subprocess.Popen[bytes], Path]:
    log = folder.with_suffix(".log")
    with log.open("wb") as out:
        proc = subprocess.Popen([str(folder / ".ci" / "run")], cwd=folder, stdout=out, stderr=out)
    return proc, log


def summary(log: Path) -> str:
    found = SUMMARY.findall(log.read_text(errors="replace"))
    return "; ".join(line for line, _ in found) or "no pytest summary (see the log)"


def start_demo(rev: str, base: Path) -> subprocess.Popen[bytes]:
    """The demo from a clone of its own, answering before the first run starts."""
    folder = clone(rev, base / "demo")
    with (base / "demo.log").open("wb") as log:
        proc = subprocess.Popen(
            [str(folder / "scripts" / "demo.sh")], cwd=folder, stdout=log, stderr=log
        )
    deadline = time.monotonic() + 900  # it installs first
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"the demo stopped (exit {proc.returncode}): see {base / 'demo.log'}")
        try:
            urllib.request.urlopen(DEMO_URL, timeout=5)
            print(f"the demo answers at {DEMO_URL}", flush=True)
            return proc
        except (urllib.error.URLError, OSError):
            time.sleep(5)
    proc.terminate()
    sys.exit(f"the demo did not answer within 15 minutes: see {base / 'demo.log'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="how many counted runs (10)")
    parser.add_argument("--rev", default="HEAD", help="the commit to clone (HEAD)")
    parser.add_argument("--beside-demo", action="store_true", help="with the demo running")
    parser.add_argument("--beside-suite", action="store_true", help="with a second suite")
    args = parser.parse_args()
    rev = subprocess.run(
        ["git", "-C", str(REPOSITORY), "rev-parse", args.rev],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    base = Path(tempfile.mkdtemp(prefix="ci-repeat-"))
    # open to all, as a checkout is: the tests run jobs, checks and servers under OS
    # accounts of their own, which must reach the clone's .venv (mkdtemp makes it 0700)
    base.chmod(0o755)
    print(
        f"{args.runs} runs of .ci/run on {rev[:10]} in {base} ({os.cpu_count()} cores)", flush=True
    )
    demo = start_demo(rev, base) if args.beside_demo else None
    green = 0
    try:
        for number in range(1, args.runs + 1):
            counted = clone(rev, base / f"run-{number}")
            other = clone(rev, base / f"beside-{number}") if args.beside_suite else None
            speed = probe()
            started = time.monotonic()
            with Load() as load:
                proc, log = start_ci(counted)
                second = start_ci(other) if other else None
                code = proc.wait()
                wall = time.monotonic() - started
                if second:
                    second[0].wait()
            ok = code == 0 and (second is None or second[0].returncode == 0)
            green += ok
            verdict = "green" if ok else "RED"
            line = f"run {number}: {verdict}  {summary(log)}  {wall / 60:.1f} min, {load}"
            line += f", probe {speed:.0f} ms before it"
            if second:
                line += f"  | beside it: exit {second[0].returncode}, {summary(second[1])}"
            print(line + ("" if ok else f"  log: {log}"), flush=True)
            if ok:  # a red run's folders stay, for its logs and artifacts
                for folder in (counted, other):
                    if folder:
                        shutil.rmtree(folder, ignore_errors=True)
    finally:
        if demo:
            demo.terminate()
            demo.wait(timeout=60)
    print(f"{green} of {args.runs} green")
    return 0 if green == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())

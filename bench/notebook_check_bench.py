"""Big notebooks at submit: does one user's 58 MiB notebook stall everyone else?

    python bench/notebook_check_bench.py [--cells 300000] [--users 3] [--repeat 5]

The real job service (``nbjobs service``, SQLite, the local backend) runs as a process
of its own, so that its memory is its own. Each round, ``--users`` users submit at once
a notebook of ``--cells`` small cells (300 000 make 58 MiB: the issue's attack) on a
flavor whose jobs wait for approval (so none runs); meanwhile another user lists their
jobs (``GET api/jobs``) every 20 ms.

Printed, medians over the rounds, each beside what it is compared with:

  idle      GET api/jobs p50 / p99 before the submits; the list's baseline
  storm     GET api/jobs p50 / p99 while the big notebooks are checked: the ratio to
            idle, and the goal (p99 < 100 ms)
  memory    the service's peak RSS (VmHWM) above its RSS when idle; goal < 300 MiB.
            The checks run in worker processes (limits.check_memory each, at most
            limits.checks_at_once of them): their peak is printed apart
  submits   what the big submits got (201: accepted, 4xx: refused) and how long the
            last took, against one check of the same notebook on its own (the same
            worker program, run directly)

The machine's load average is printed with the figures. Exit status 1 when a goal is
missed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # tests/, and this checkout's nbjobs before any other

from tests.job_service.test_notebook_checks import write_cells  # noqa: E402

TOKENS = {f"{u}-token": u for u in ("reader", *(f"u{i}" for i in range(16)))}
#: the checker the service runs for a big notebook, run directly
WORKER = (sys.executable, "-m", "nbjobs.job_service.notebooks")
FLAVORS = [
    {"name": "cpu", "gpus": 0},
    {"name": "held", "gpus": 0, "approval": {"groups": ["students"]}},
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=300_000)
    parser.add_argument("--users", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rounds = []
    with tempfile.TemporaryDirectory(prefix="nbcheck-bench-") as tmp:
        where = Path(tmp)
        source = where / "big.ipynb"
        # 300 000 cells of this width make the 58 MiB of the attack
        write_cells(source, args.cells, width=72, indent=None)
        size = source.stat().st_size
        alone = check_alone(source)
        print(
            f"notebook: {args.cells} cells, {size / 1024**2:.1f} MiB; one check on its own "
            f"{alone:.1f} s; {args.users} users submit it at once; {args.repeat} rounds"
        )
        for n in range(args.repeat):
            rounds.append(asyncio.run(one_round(where / f"r{n}", source, args.users)))
            r = rounds[-1]
            print(
                f"  round {n + 1}: storm p99 {r['storm_p99'] * 1000:.1f} ms, service "
                f"+{r['service_mib']:.0f} MiB, statuses {r['statuses']}",
                flush=True,
            )
    return report(rounds, alone)


def check_alone(source: Path) -> float:
    """The worker program on the notebook, run directly: the floor for one check."""
    started = time.monotonic()
    with source.open("rb") as f:
        subprocess.run(
            [*WORKER, "--memory", str(4 * 1024**3), "--cells", "1000000"],
            stdin=f,
            stdout=subprocess.DEVNULL,
            check=True,
        )
    return time.monotonic() - started


async def one_round(where: Path, source: Path, users: int) -> dict[str, Any]:
    home = where / "home"
    names = [f"u{i}" for i in range(users)]
    for name in names:
        (home / name).mkdir(parents=True)
        os.link(source, home / name / "big.ipynb")
    (home / "reader").mkdir(parents=True)
    config = {
        "backend": {"kind": "local", "local": {"gpus": [], "cpu_slots": 2}},
        "storage": {"root": str(home)},
        "database": {"url": f"sqlite:///{where / 'jobs.sqlite'}"},
        "flavors": FLAVORS,
    }
    (where / "nbjobs.yaml").write_text(yaml.safe_dump(config))
    port = free_port()
    groups = {name: ["students"] for name in [*names, "reader"]}
    service = subprocess.Popen(
        [
            *(sys.executable, "-m", "nbjobs.cli", "service", f"--config={where / 'nbjobs.yaml'}"),
            *(f"--port={port}", "--JobServiceApp.prefix=/", "--JobServiceApp.log_level=WARN"),
            f"--StaticTokenAuth.tokens={TOKENS!r}",
            f"--StaticTokenAuth.user_groups={groups!r}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}/api/"
        await wait_up(url)
        reader = client(url, "reader")
        for _ in range(50):  # warm up: the first requests import and compile
            await reader.get("jobs")
        idle = [await timed_get(reader) for _ in range(200)]
        idle_rss = rss(service.pid)["VmRSS"]
        workers_peak = 0
        done = asyncio.Event()
        storm: list[float] = []

        async def poll() -> None:
            nonlocal workers_peak
            while not done.is_set():
                storm.append(await timed_get(reader))
                workers_peak = max(workers_peak, children_rss(service.pid))
                await asyncio.sleep(0.02)

        async def submit(name: str) -> tuple[int, float]:
            started = time.monotonic()
            async with client(url, name) as c:
                r = await c.post("jobs", json={"path": "big.ipynb", "flavor": "held"})
            return r.status_code, time.monotonic() - started

        poller = asyncio.create_task(poll())
        answers = await asyncio.gather(*(submit(n) for n in names))
        done.set()
        await poller
        await reader.aclose()
        peak = rss(service.pid)["VmHWM"]
    finally:
        service.terminate()
        service.wait(30)
    return {
        "idle_p50": quantile(idle, 0.5),
        "idle_p99": quantile(idle, 0.99),
        "storm_p50": quantile(storm, 0.5),
        "storm_p99": quantile(storm, 0.99),
        "storm_n": len(storm),
        "service_mib": (peak - idle_rss) / 1024,
        "workers_mib": workers_peak / 1024,
        "statuses": sorted(code for code, _ in answers),
        "last_s": max(t for _, t in answers),
    }


def report(rounds: list[dict[str, Any]], alone: float) -> int:
    def med(key: str) -> float:
        return statistics.median(r[key] for r in rounds)

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    ms = 1000
    rows = [
        ("idle GET api/jobs p50", f"{med('idle_p50') * ms:.1f} ms", "", ""),
        ("idle GET api/jobs p99", f"{med('idle_p99') * ms:.1f} ms", "", ""),
        (
            "storm GET api/jobs p50",
            f"{med('storm_p50') * ms:.1f} ms",
            f"{med('storm_p50') / med('idle_p50'):.2f} x idle",
            "",
        ),
        (
            "storm GET api/jobs p99",
            f"{med('storm_p99') * ms:.1f} ms",
            f"{med('storm_p99') / med('idle_p99'):.2f} x idle",
            "goal < 100 ms",
        ),
        ("service peak above idle", f"{med('service_mib'):.0f} MiB", "", "goal < 300 MiB"),
        ("checkers' peak (all at once)", f"{med('workers_mib'):.0f} MiB", "", ""),
        (
            "slowest big submit",
            f"{med('last_s'):.1f} s",
            f"{med('last_s') / alone:.2f} x one check alone",
            "",
        ),
    ]
    print(f"\nmedians of {len(rounds)} rounds; load average {load}; {os.cpu_count()} CPUs")
    for what, value, against, goal in rows:
        print(f"  {what:<30} {value:>10}  {against:<26} {goal}")
    print(f"  big submits' statuses: {[r['statuses'] for r in rounds]}")
    missed = med("storm_p99") >= 0.1 or med("service_mib") >= 300
    print("goals met" if not missed else "GOAL MISSED")
    return 1 if missed else 0


def client(url: str, user: str) -> httpx.AsyncClient:
    token = {u: t for t, u in TOKENS.items()}[user]
    return httpx.AsyncClient(base_url=url, headers={"Authorization": f"token {token}"}, timeout=600)


async def timed_get(c: httpx.AsyncClient) -> float:
    started = time.monotonic()
    r = await c.get("jobs")
    r.raise_for_status()
    return time.monotonic() - started


async def wait_up(url: str) -> None:
    deadline = time.monotonic() + 60
    async with httpx.AsyncClient() as c:
        while True:
            try:
                await c.get(url + "jobs")
                return
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)


def rss(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of ``pid``, in KiB."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0])
    return found


def children_rss(pid: int) -> int:
    """The RSS (KiB) of ``pid``'s children together, now."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes()
            if int(stat.rsplit(b")", 1)[1].split()[1]) == pid:
                total += rss(int(entry)).get("VmRSS", 0)
        except (OSError, ValueError):
            continue
    return total


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


if __name__ == "__main__":
    sys.exit(main())

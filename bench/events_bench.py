"""Pushed changes at the limit: 200 open panels, what they cost the service, how fast a
change reaches them.

    python bench/events_bench.py [--panels 200] [--rounds 5] [--idle-seconds 20]

A real job service (``nbjobs service``, SQLite, the local backend) runs in a process of
its own, so that its CPU is its own; 200 users each hold one ``GET api/events`` stream
open from this process (httpx, one connection each), as 200 Jobs panels do. Changes are
real submissions through the API on a flavor that waits for approval (so nothing runs
and the machine stays quiet): each one turns into an event for its owner's stream.

  idle cpu   the service's CPU (user + system, of one core) over --idle-seconds with
             no stream open, then with every stream open and nothing changing;
             goal: under 5 % with 200 panels
  one        one user's submission -> the event on their stream: from the POST sent to
             the event read, median of --rounds and the worst; goal < 2 s
  burst      every user submits at once (200 changes): each stream's event against its
             own POST; p50 / p95 / max per round, medians of the rounds; goal max < 2 s

Every figure is printed with what it is compared with. The exit status is 1 when an
event never came (within 10 s) or a goal is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import nbformat
import psutil
import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # tests/ (the stream's reader)

from tests.sse import EventLines  # noqa: E402

GOAL_CPU_PERCENT = 5.0
GOAL_SECONDS = 2.0


def config(root: Path) -> dict[str, Any]:
    return {
        "backend": {"kind": "local", "local": {"gpus": [], "cpu_slots": 1}},
        "flavors": [{"name": "cpu", "gpus": 0, "time_limit": "10m", "approval": {}}],
        "quotas": {"default": {"max_queued_jobs": 1000}},
        "storage": {"root": str(root / "home")},
        "database": {"url": f"sqlite:///{root / 'jobs.sqlite'}"},
        "admin": {"users": ["root"]},
    }


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Panel:
    """One open stream: the time each job's first event arrived."""

    def __init__(self, user: str) -> None:
        self.user = user
        self.hello = asyncio.Event()
        self.seen: dict[str, float] = {}
        self.arrived = asyncio.Event()

    async def follow(self, client: httpx.AsyncClient, token: str) -> None:
        headers = {"Authorization": f"token {token}"}
        async with client.stream("GET", "events", headers=headers, timeout=None) as r:
            r.raise_for_status()
            lines = EventLines()
            async for line in r.aiter_lines():
                if (said := lines.feed(line)) is None:
                    continue
                event, data = said
                if event == "hello":
                    self.hello.set()
                elif event == "job" and data["id"] not in self.seen:
                    self.seen[data["id"]] = time.perf_counter()
                    self.arrived.set()


async def submit(client: httpx.AsyncClient, token: str) -> tuple[str, float]:
    sent = time.perf_counter()
    r = await client.post(
        "jobs",
        json={"path": "n.ipynb", "flavor": "cpu"},
        headers={"Authorization": f"token {token}"},
    )
    if r.status_code != 201:
        raise SystemExit(f"submit refused: {r.status_code} {r.text}")
    return r.json()["id"], sent


async def wait_seen(panel: Panel, job_id: str, timeout: float = 10.0) -> float:
    deadline = time.perf_counter() + timeout
    while job_id not in panel.seen:
        panel.arrived.clear()
        left = deadline - time.perf_counter()
        if left <= 0:
            raise SystemExit(f"no event for job {job_id} on {panel.user}'s stream in {timeout} s")
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(panel.arrived.wait(), left)
    return panel.seen[job_id]


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


async def measure_cpu(process: psutil.Process, seconds: float) -> float:
    """The process's CPU over ``seconds``, in percent of one core."""
    before, start = cpu_seconds(process), time.perf_counter()
    await asyncio.sleep(seconds)
    return 100.0 * (cpu_seconds(process) - before) / (time.perf_counter() - start)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def run(args: argparse.Namespace, root: Path) -> int:
    users = [f"u{n:03d}" for n in range(args.panels)]
    tokens = {f"token-{u}": u for u in users}
    for user in users:
        home = root / "home" / user
        home.mkdir(parents=True)
        nbformat.write(
            nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")]), home / "n.ipynb"
        )
    (root / "nbjobs.yaml").write_text(yaml.safe_dump(config(root)))
    port = free_port()
    env = {**os.environ, "NBJOBS_SERVICE_TOKENS": json.dumps(tokens)}
    service = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nbjobs.cli",
            "service",
            f"--config={root / 'nbjobs.yaml'}",
            f"--port={port}",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(root / "service.log", "w"),  # noqa: SIM115
    )
    base = f"http://127.0.0.1:{port}/api/"
    process = psutil.Process(service.pid)
    limits = httpx.Limits(
        max_connections=args.panels + 20, max_keepalive_connections=args.panels + 20
    )
    failed = False
    try:
        async with httpx.AsyncClient(base_url=base, limits=limits, timeout=30) as client:
            for _ in range(200):
                try:
                    if (
                        await client.get(
                            "health", headers={"Authorization": f"token token-{users[0]}"}
                        )
                    ).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
            else:
                raise SystemExit(
                    "the service did not start: " + (root / "service.log").read_text()[-2000:]
                )

            idle_none = await measure_cpu(process, args.idle_seconds)
            panels = {u: Panel(u) for u in users}
            followers = [
                asyncio.ensure_future(panels[u].follow(client, f"token-{u}")) for u in users
            ]
            await asyncio.wait_for(asyncio.gather(*(p.hello.wait() for p in panels.values())), 60)
            await asyncio.sleep(2.0)  # past the feed's first look
            idle_open = await measure_cpu(process, args.idle_seconds)

            singles: list[float] = []
            bursts: list[tuple[float, float, float]] = []
            for n in range(args.rounds):
                user = users[(n * 37) % len(users)]
                job_id, sent = await submit(client, f"token-{user}")
                singles.append(await wait_seen(panels[user], job_id) - sent)
                await asyncio.sleep(1.5)
                submitted = await asyncio.gather(*(submit(client, f"token-{u}") for u in users))
                arrivals = await asyncio.gather(
                    *(
                        wait_seen(panels[u], job_id)
                        for u, (job_id, _) in zip(users, submitted, strict=True)
                    )
                )
                delays = [a - s for a, (_, s) in zip(arrivals, submitted, strict=True)]
                bursts.append((pct(delays, 0.5), pct(delays, 0.95), max(delays)))
                await asyncio.sleep(1.5)
            for follower in followers:
                follower.cancel()
            await asyncio.gather(*followers, return_exceptions=True)
    finally:
        service.terminate()
        try:
            service.wait(20)
        except subprocess.TimeoutExpired:
            service.kill()

    load = os.getloadavg()[0]
    print(
        f"events bench: {args.panels} panels, {args.rounds} rounds, {os.cpu_count()} CPUs, "
        f"load average {load:.2f}"
    )
    ratio = idle_open / idle_none if idle_none > 0 else float("inf")
    print(
        f"  idle cpu    no stream {idle_none:5.2f} %   {args.panels} streams {idle_open:5.2f} % "
        f"of one core ({ratio:.1f}x)   goal < {GOAL_CPU_PERCENT:.0f} %"
    )
    one = statistics.median(singles)
    print(
        f"  one change  median {one * 1000:6.0f} ms   worst {max(singles) * 1000:6.0f} ms   "
        f"goal < {GOAL_SECONDS * 1000:.0f} ms"
    )
    p50 = statistics.median(b[0] for b in bursts)
    p95 = statistics.median(b[1] for b in bursts)
    worst = statistics.median(b[2] for b in bursts)
    print(
        f"  burst of {args.panels}  p50 {p50 * 1000:6.0f} ms   p95 {p95 * 1000:6.0f} ms   "
        f"max {worst * 1000:6.0f} ms (medians of {len(bursts)} rounds; worst round "
        f"{max(b[2] for b in bursts) * 1000:.0f} ms)   goal max < {GOAL_SECONDS * 1000:.0f} ms"
    )
    if idle_open >= GOAL_CPU_PERCENT or max(singles) >= GOAL_SECONDS or worst >= GOAL_SECONDS:
        failed = True
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--panels", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nbjobs-events-bench-") as tmp:
        return asyncio.run(run(args, Path(tmp)))


if __name__ == "__main__":
    sys.exit(main())

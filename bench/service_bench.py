"""Job service benchmark: dispatch latency, packing, a class's GPU use, API paging.

    python bench/service_bench.py [--quick]

A real job service (tornado, SQLite, the local backend) in this process,
called over HTTP on loopback. Jobs run bench/fake_runner.py, which only
sleeps, so what is measured is the service. Every figure is a median or a
ratio against a baseline measured in the same run.

  dispatch  submit -> runner process running, p50/p95, minus the runner's own
            start-up (the same program started directly); goal p50 < 100 ms
  packing   200 jobs of mixed length on 4 GPUs: makespan / (total work / 4);
            goal < 1.05; with a Python stand-in and with a shell one (fake_runner.sh),
            against the FIFO bound of the same jobs
  class     40 users alternating think time and short GPU bursts on 4 GPUs:
            GPU busy fraction with nbjobs vs each user holding a GPU all
            session; p95 queue wait
  api       list a page of jobs with 10,000 in the database vs 100: p50, ratio;
            service memory
  queue     one scheduling pass with 100, 1,000 and 10,000 jobs queued: p50, and
            the cost per queued job against 100 (1.00: linear); a page of one
            user's queued jobs (with their places) at each size, against 100
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
import nbformat
from nbjobs.job_service.app import routes
from nbjobs.job_service.auth import StaticTokenAuth
from nbjobs.job_service.backends.base import LaunchSpec
from nbjobs.job_service.backends.local import LocalBackend
from nbjobs.job_service.db import JobRecord, connect
from nbjobs.job_service.service import JobService
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets

from nbjobs.config import NbjobsConfig
from nbjobs.storage import user_folder

FAKE = Path(__file__).with_name("fake_runner.py")
#: the cheapest stand-in, a shell script: what is left of a job's cost is the queue's
FAKE_SH = Path(__file__).with_name("fake_runner.sh")
FINAL = ("succeeded", "failed", "cancelled", "timed_out")


def stand_in(kind: str) -> list[str]:
    """The stand-in runner's program: ``python`` (as fast as Python starts) or ``sh``."""
    return [sys.executable, "-S", str(FAKE)] if kind == "python" else ["/bin/sh", str(FAKE_SH)]


class FakeRunnerBackend(LocalBackend):
    """The local backend, running the stand-in runner."""

    stand_in = "python"

    def command(self, spec: LaunchSpec) -> list[str]:
        command = [*stand_in(self.stand_in), str(spec.snapshot_file)]
        command += [str(spec.output_file), "--status-file", str(spec.status_file)]
        if spec.parameters:
            command += ["--parameters", json.dumps(spec.parameters)]
        return command


class Bench:
    def __init__(self, work: Path, gpus: int, users: list[str], runner: str = "python") -> None:
        self.work = work
        self.runner = runner
        self.config = NbjobsConfig.model_validate(
            {
                "storage": {"root": str(work / "home")},
                "database": {"url": f"sqlite:///{work / 'jobs.sqlite'}"},
                "backend": {"local": {"gpus": list(range(gpus)), "cpu_slots": 64}},
                "flavors": [{"name": "cpu", "gpus": 0}, {"name": "gpu", "gpus": 1}],
                "quotas": {"default": {}},
            }
        )
        self.users = users
        self.tokens = {f"t-{u}": u for u in users}

    async def __aenter__(self) -> Bench:
        backend = FakeRunnerBackend(self.config)
        backend.stand_in = self.runner
        self.service = JobService(self.config, backend, connect(self.config.database.url))
        await self.service.start()
        auth = StaticTokenAuth(tokens=self.tokens)  # read when it is made
        app_ = __import__("tornado.web", fromlist=["Application"]).Application(
            routes("/"), nbjobs_service=self.service, nbjobs_auth=auth
        )
        sockets = bind_sockets(0, "127.0.0.1")
        self.server = HTTPServer(app_)
        self.server.add_sockets(sockets)
        self.url = f"http://127.0.0.1:{sockets[0].getsockname()[1]}/api/"
        for user in self.users:
            home = user_folder(self.config.storage, user)
            home.mkdir(parents=True, exist_ok=True)
            nb = nbformat.v4.new_notebook()
            nbformat.write(nb, home / "job.ipynb")
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.stop()
        await self.service.stop()

    def client(self, user: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.url, headers={"Authorization": f"token t-{user}"}, timeout=120
        )

    async def submit(self, c: httpx.AsyncClient, flavor: str, seconds: float) -> dict[str, Any]:
        r = await c.post(
            "jobs", json={"path": "job.ipynb", "flavor": flavor, "parameters": {"seconds": seconds}}
        )
        r.raise_for_status()
        return dict(r.json())

    async def wait_all(
        self, c: httpx.AsyncClient, ids: list[str], every: float = 0.05
    ) -> list[dict]:
        # Cheap polls (the client shares the service's event loop): one job by id, or
        # a count of the jobs still to finish.
        if len(ids) == 1:
            while (job := (await c.get(f"jobs/{ids[0]}")).json())["state"] not in FINAL:
                await asyncio.sleep(every)
            return [job]
        unfinished: dict[str, str | int] = {"state": "queued,starting,running", "limit": 1}
        while (await c.get("jobs", params=unfinished)).json()["total"]:
            await asyncio.sleep(every)
        page = (await c.get("jobs", params={"limit": 500})).json()
        by_id = {j["id"]: j for j in page["jobs"]}
        return [by_id[i] for i in ids]


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def runner_lifetime(
    work: Path, rounds: int, runner: str = "python"
) -> tuple[list[float], list[float]]:
    """The stand-in started directly, as the backend would: its start-up (the Python
    one notes it), and its whole life (start-up, no work, exit), each round."""
    startups, lives = [], []
    for i in range(rounds):
        status = work / f"direct-{runner}-{i}.json"
        t0 = time.time()
        command = [*stand_in(runner), "in", "out", "--status-file", str(status)]
        subprocess.run(command, check=True)
        lives.append(time.time() - t0)
        if runner == "python":
            startups.append(float(Path(f"{status}.started").read_text()) - t0)
    return startups, lives


async def dispatch_latencies(bench: Bench, rounds: int) -> list[float]:
    """Submit -> the stand-in runner running, one job at a time, ``rounds`` times."""
    latencies = []
    async with bench.client("ada") as c:
        for _ in range(rounds):
            t0 = time.time()
            job = await bench.submit(c, "cpu", 0)
            started = (
                Path(bench.service.folder_for("ada"))
                / ".nbjobs/jobs"
                / job["id"]
                / "status.json.started"
            )
            while not started.exists():
                await asyncio.sleep(0.001)
            latencies.append(float(started.read_text()) - t0)
            await bench.wait_all(c, [job["id"]])
    return latencies


async def dispatch(work: Path, rounds: int) -> None:
    direct, _ = runner_lifetime(work, rounds)
    async with Bench(work / "dispatch", gpus=1, users=["ada"]) as bench:
        latencies = await dispatch_latencies(bench, rounds)
    base = statistics.median(direct)
    over = [x - base for x in latencies]
    print("== dispatch: submit -> runner running")
    print(f"  runner's own start-up (direct)   p50 {base * 1000:7.1f} ms")
    print(
        f"  through the service              p50 {statistics.median(latencies) * 1000:7.1f} ms"
        f"   p95 {pct(latencies, 95) * 1000:7.1f} ms"
    )
    print(
        f"  service's share (above start-up) p50 {statistics.median(over) * 1000:7.1f} ms"
        f"   p95 {pct(over, 95) * 1000:7.1f} ms   (goal: p50 < 100 ms)"
    )


def list_schedule(lengths: list[float], slots: int, overhead: float = 0.0) -> float:
    """Makespan of first-come-first-served list scheduling: each job, in order, goes to
    the slot that frees first. No service, no start-up: the bound any FIFO queue (and
    nbjobs' queue is FIFO within a priority) can reach on this mix of jobs."""
    free_at = [0.0] * slots
    for length in lengths:
        heapq.heappush(free_at, heapq.heappop(free_at) + length + overhead)
    return max(free_at)


async def packing(work: Path, jobs: int) -> None:
    rng = random.Random(7)
    lengths = [rng.choice([0.2, 0.5, 1.0, 2.0]) for _ in range(jobs)]
    ideal = sum(lengths) / 4
    fifo = list_schedule(lengths, 4)
    print(f"== packing: {jobs} jobs, {sum(lengths):.0f} s of work on 4 GPUs")
    print(
        f"  the same jobs FIFO on 4 slots, no service, no process: / ideal = {fifo / ideal:.3f}"
        "   (the queue's tail: job lengths are not known ahead)"
    )
    for runner in ("python", "sh"):
        folder = work / f"packing-{runner}"
        async with (
            Bench(folder, gpus=4, users=["ada"], runner=runner) as bench,
            bench.client("ada") as c,
        ):
            t0 = datetime.now(timezone.utc)
            ids = [(await bench.submit(c, "gpu", s))["id"] for s in lengths]
            # The end is when the service recorded the last job ended, not when a poll
            # saw it: polls are rare, so the benchmark takes little of the service's CPU.
            done = await bench.wait_all(c, ids, every=1.0)
            end = max(datetime.fromisoformat(j["finished_at"]) for j in done)
            makespan = (end - t0).total_seconds()
        _, lives = runner_lifetime(work, 10, runner)
        life = statistics.median(lives)
        bound = list_schedule(lengths, 4, life)
        print(f"  stand-in runner: {runner} (it lives {life * 1000:.0f} ms doing nothing)")
        print(
            f"    makespan / ideal (work / 4)                   = {makespan / ideal:.3f}"
            "   (goal: < 1.05)"
        )
        print(f"    FIFO with that process per job, no service    = {bound / ideal:.3f}")
        print(f"    nbjobs / that bound (the service's own share) = {makespan / bound:.3f}")


async def class_trace(work: Path, users: int, session: float) -> None:
    rng = random.Random(11)
    names = [f"s{i:02d}" for i in range(users)]
    burst_total = 0.0
    waits: list[float] = []
    async with Bench(work / "class", gpus=4, users=names) as bench:

        async def student(name: str) -> None:
            nonlocal burst_total
            async with bench.client(name) as c:
                end = time.monotonic() + session
                while time.monotonic() < end:
                    await asyncio.sleep(rng.uniform(2.0, 8.0))  # reading, typing
                    seconds = rng.uniform(0.3, 1.5)  # a short GPU burst
                    burst_total += seconds
                    job = await bench.submit(c, "gpu", seconds)
                    (done,) = await bench.wait_all(c, [job["id"]])
                    start = datetime.fromisoformat(done["started_at"])
                    waits.append(
                        (start - datetime.fromisoformat(done["submitted_at"])).total_seconds()
                    )

        t0 = time.monotonic()
        await asyncio.gather(*(student(n) for n in names))
        elapsed = time.monotonic() - t0
    nbjobs_util = burst_total / (4 * elapsed)
    held_util = burst_total / (users * elapsed)
    print(f"== class: {users} users, {elapsed:.0f} s, bursts on 4 GPUs")
    print(f"  GPU busy fraction, nbjobs (4 GPUs shared):          {nbjobs_util:.2f}")
    print(f"  GPU busy fraction, a GPU held per session ({users} GPUs): {held_util:.2f}")
    print(f"  ratio {nbjobs_util / held_util:.1f}x; p95 queue wait {pct(waits, 95):.2f} s")


async def api(work: Path, rounds: int) -> None:
    results = {}
    for count in (100, 10_000):
        async with Bench(work / f"api-{count}", gpus=1, users=["ada", "root"]) as bench:
            now = datetime.now(timezone.utc)
            with bench.service.sessions() as db:
                db.add_all(
                    job_record(
                        i,
                        user="ada" if i % 2 else "root",
                        submitted_at=now - timedelta(seconds=i),
                        started_at=now,
                        finished_at=now,
                    )
                    for i in range(count)
                )
                db.commit()
            async with bench.client("ada") as c:
                samples = []
                for i in range(rounds):
                    t0 = time.perf_counter()
                    r = await c.get("jobs", params={"limit": 50, "offset": (i * 50) % (count // 2)})
                    samples.append(time.perf_counter() - t0)
                    assert r.status_code == 200
            results[count] = statistics.median(samples)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("== api: GET jobs?limit=50")
    print(
        f"  p50 with 100 jobs {results[100] * 1000:.1f} ms, "
        f"with 10,000 {results[10_000] * 1000:.1f} ms; ratio {results[10_000] / results[100]:.2f}"
    )
    print(f"  peak memory of this process (service + benchmark): {rss:.0f} MiB")


def job_record(i: int, **fields: Any) -> JobRecord:
    """Job number ``i`` of a benchmark's database: a finished CPU job unless ``fields``
    say otherwise (its files are never read)."""
    defaults: dict[str, Any] = {
        "id": f"{i:012x}",
        "seq": i,
        "groups": [],
        "name": "job",
        "flavor": "cpu",
        "state": "succeeded",
        "priority": 0,
        "path": "job.ipynb",
        "output_path": "job.out.ipynb",
        "source_file": "x",
        "snapshot_file": "x",
        "output_file": "x",
        "job_dir": "x",
        "parameters": {},
        "gpu_count": 0,
        "gpus": [],
    }
    return JobRecord(**{**defaults, **fields})


def queued_records(count: int, users: int) -> list[JobRecord]:
    """``count`` queued GPU jobs from ``users`` users, oldest first."""
    now = datetime.now(timezone.utc)
    return [
        job_record(
            i,
            user=f"u{i % users:02d}",
            groups=["class-a"] if i % 2 else [],
            flavor="gpu",
            state="queued",
            gpu_count=1,
            submitted_at=now - timedelta(seconds=count - i),
        )
        for i in range(count)
    ]


async def queue(work: Path, rounds: int) -> None:
    """One scheduling pass (run on every submit and every job end) as the queue grows."""
    results, pages = {}, {}
    for count in (100, 1_000, 10_000):
        # no GPU free: every pass orders the whole queue and says why each job waits
        async with Bench(work / f"queue-{count}", gpus=0, users=["u00"]) as bench:
            with bench.service.sessions() as db:
                db.add_all(queued_records(count, users=40))
                db.commit()
            await bench.service.schedule()  # the first pass writes every reason
            samples = []
            for _ in range(rounds):
                t0 = time.perf_counter()
                await bench.service.schedule()
                samples.append(time.perf_counter() - t0)
            results[count] = statistics.median(samples)
            # and what a user's Jobs panel asks for: a page of their jobs, with places
            async with bench.client("u00") as c:
                views = []
                for _ in range(rounds * 3):
                    t0 = time.perf_counter()
                    (await c.get("jobs", params={"limit": 50})).raise_for_status()
                    views.append(time.perf_counter() - t0)
            pages[count] = statistics.median(views)
    print("== queue: 40 users' jobs queued, no GPU free")
    for count, p50 in results.items():
        print(
            f"  {count:>6} queued  scheduling pass p50 {p50 * 1000:6.1f} ms"
            f"   per queued job ÷ at 100: {p50 / count / (results[100] / 100):.2f}"
            f"   a page of one user's jobs p50 {pages[count] * 1000:5.1f} ms"
            f" (÷ at 100: {pages[count] / pages[100]:.2f})"
        )


async def main_async(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="nbjobs-sbench-") as tmp:
        work = Path(tmp)
        everything = {"dispatch", "packing", "class", "api", "queue"}
        only = set(args.only.split(",")) if args.only else everything
        if "dispatch" in only:
            await dispatch(work, 10 if args.quick else 30)
        if "packing" in only:
            await packing(work, 40 if args.quick else 200)
        if "class" in only:
            await class_trace(work, 40, 20 if args.quick else 60)
        if "api" in only:
            await api(work, 20 if args.quick else 100)
        if "queue" in only:
            await queue(work, 3 if args.quick else 9)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, for a smoke run")
    parser.add_argument("--only", help="comma-separated: dispatch, packing, class, api, queue")
    asyncio.run(main_async(parser.parse_args()))
    return 0


if __name__ == "__main__":
    os.environ.pop("JUPYTERHUB_API_TOKEN", None)
    sys.exit(main())

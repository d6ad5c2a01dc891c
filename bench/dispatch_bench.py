"""Dispatch under slow Kubernetes creates: N jobs submitted at once, creates held M ms.

    python bench/dispatch_bench.py [--jobs 200] [--create-ms 200]
                                   [--database sqlite|postgresql|both] [--repeat 5]

The real job service (``nbjobs service`` as JobServiceApp.run serves it: tornado, the
Kubernetes backend, SQLite or a real PostgreSQL server from Debian's package) runs in a
process of its own, one per round; the Kubernetes fake API server
(tests/kubernetes/fake_apiserver.py), in another, holds every Job create for M ms, as
an admission webhook or a busy API server does, and lets creates overlap as the real one
does; the submitting client is this process, and the client that lists jobs during
the burst a third (as another user's browser is). So, as on a cluster, the service
shares its interpreter (and its GIL) with neither the API server nor its clients, and
the lister's figures are not the submitter's own delays. A burst is given up on after
30 s + 3 x N x M; a service that then does not stop within a minute is killed.

Per database and round (a fresh service, database and fake each round):

  idle      200 sequential ``GET /api/jobs`` with no jobs recorded: p50 / p99 / max
  burst     N ``POST /api/jobs`` at once, then wait until the fake holds all N Jobs:
            the time, against N x M (creates one at a time) and against
            ceil(N / concurrent_starts) x M (the service's bounded concurrency);
            meanwhile ``GET /api/jobs`` every 20 ms: p50 / p99 / max, against the
            idle figures and the goal (p99 < 100 ms); the service's loop lag (how
            late a 10 ms sleep wakes), its longest garbage collection, the loop's
            callbacks that ran 20 ms or more (bench/loop_watch.py) and the CPU
            its process used; the machine's load average as it ended

Every figure is printed next to what it is compared with and the ratio, as the median
of the rounds (5 unless ``--repeat`` says otherwise); then each round on a line of its
own, and per database the worst round against the goal, which every round must meet
(bench/dispatch_report.py). The exit status is 1 when a submit was refused or a Job
never created.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # tests/, and this checkout's nbjobs before any other

from nbjobs.job_runner.lean_imports import decline_format_checkers  # noqa: E402

# as in `nbjobs service` itself: each of the bench's processes (the service, the fake
# API server, the lister) would spend 1.4 s of CPU on jsonschema's IRI grammar otherwise
decline_format_checkers()

from nbjobs.job_service.app import JobServiceApp  # noqa: E402

from bench.dispatch_report import (  # noqa: E402
    IDLE_GETS,
    POLL_EVERY,
    Round,
    print_rounds,
    print_table,
)
from bench.loop_watch import LoopWatch  # noqa: E402
from nbjobs.config import parse_config  # noqa: E402
from tests.job_service.conftest import (  # noqa: E402
    GROUPS,
    TOKENS,
    _postgres_bin,
    free_port,
)
from tests.kubernetes.fake_apiserver import FakeApiServer  # noqa: E402

NAMESPACE = "gpu-jobs"
USER = "ada"
#: rounds per database unless --repeat says otherwise
ROUNDS = 5


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=200, help="jobs submitted at once")
    parser.add_argument("--create-ms", type=float, default=200, help="ms every Job create takes")
    parser.add_argument(
        "--database", choices=["sqlite", "postgresql", "both"], default="both", help="which"
    )
    parser.add_argument(
        "--repeat", type=int, default=ROUNDS, help="rounds per database (each printed; medians)"
    )
    # the fake or the service of one round (see Child)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run_child(args.child[0], json.loads(args.child[1]))
        return 0
    if args.jobs < 1 or args.repeat < 1 or args.create_ms < 0:
        parser.error("--jobs and --repeat must be at least 1, --create-ms at least 0")
    databases = ["sqlite", "postgresql"] if args.database == "both" else [args.database]
    results = run_all(databases, args.jobs, args.create_ms / 1000, args.repeat)
    print_table(results, args.jobs, args.create_ms / 1000, args.repeat)
    print_rounds(results, args.jobs)
    complete = all(
        r.accepted == r.jobs and r.created == r.jobs for rs in results.values() for r in rs
    )
    return 0 if complete else 1


# -- rounds ---------------------------------------------------------------------------


def run_all(
    databases: list[str], jobs: int, create_delay: float, repeat: int
) -> dict[str, list[Round]]:
    results: dict[str, list[Round]] = {}
    for database in databases:
        with contextlib.ExitStack() as stack:
            server = stack.enter_context(postgres_server()) if database == "postgresql" else None
            results[database] = []
            for i in range(repeat):
                where = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="nbjobs-")))
                if server is None:
                    url = f"sqlite:///{where / 'jobs.sqlite'}"
                else:
                    url = server.new_database(f"round{i}")
                name = f"{database} round {i + 1}"
                print(f"{name}: {jobs} jobs, {create_delay * 1000:g} ms creates", flush=True)
                results[database].append(run_round(name, where, url, jobs, create_delay))
    return results


def run_round(name: str, where: Path, database_url: str, jobs: int, create_delay: float) -> Round:
    """One round: the fake API server and the service each in a process of their own (as
    on a cluster, where neither shares an interpreter with the other or with a client),
    measured from this process."""
    return asyncio.run(one_round(name, where, database_url, jobs, create_delay))


async def one_round(
    name: str, where: Path, database_url: str, jobs: int, create_delay: float
) -> Round:
    """Start the fake, then the service, measure from here, stop both, read their figures."""
    with contextlib.ExitStack() as stack:
        fake = stack.enter_context(
            Child("fake", where, {"jobs": jobs, "create_delay": create_delay})
        )
        await fake.ready(lambda: (where / "kubeconfig").exists())
        stats_url = (where / "fake-stats-url").read_text()
        port = free_port()
        config = service_config(where, database_url, jobs)
        (where / "nbjobs.yaml").write_text(yaml.safe_dump(config))
        parse_config((where / "nbjobs.yaml").read_text())
        notebook = where / "home" / USER / "work" / "train.ipynb"
        notebook.parent.mkdir(parents=True)
        notebook.write_text(json.dumps(NOTEBOOK))
        argv = [
            f"--config={where / 'nbjobs.yaml'}",
            f"--port={port}",
            "--ip=127.0.0.1",
            "--JobServiceApp.prefix=/services/nbjobs/",
            "--JobServiceApp.log_level=WARN",
            f"--StaticTokenAuth.tokens={TOKENS!r}",
            f"--StaticTokenAuth.user_groups={GROUPS!r}",
            f"--KubernetesBackend.kubeconfig={where / 'kubeconfig'}",
            "--KubernetesBackend.retry_delay=0.05",
        ]
        service = stack.enter_context(Child("service", where, {"argv": argv}))
        url = f"http://127.0.0.1:{port}/services/nbjobs/"
        await service.ready(lambda: answers(url))
        result = Round(jobs, int(config_value(where, "concurrent_starts")))

        async with httpx.AsyncClient(timeout=5) as stats:

            async def jobs_created() -> int:
                return int((await stats.get(stats_url)).json()["jobs"])

            result.idle_began = time.monotonic()
            result.idle = await idle_latencies(url)
            limit = burst_limit(jobs, create_delay)
            process = psutil.Process(service.process.pid)
            await burst(url, where, result, jobs_created, limit, process)
            result.stopped = service.stop(timeout=60)
            fake_stats = (await stats.get(stats_url)).json()
        result.most_in_flight = fake_stats["most_in_flight"]
        fake.stop(timeout=30)
        lags = json.loads((where / "service-lags.json").read_text())
        result.lag_idle = [lag for when, lag in lags if result.idle_began <= when < result.began]
        result.lag_burst = [lag for when, lag in lags if result.began <= when <= result.ended]
        collected = json.loads((where / "service-gc.json").read_text())
        result.gc_burst = [
            took for when, _, took in collected if result.began <= when <= result.ended
        ]
        slow = json.loads((where / "service-callbacks.json").read_text())
        result.slow_burst = [
            (took, what) for when, took, what in slow if result.began <= when <= result.ended
        ]
        text = service.log.read_text(errors="replace")
        result.error_lines = len(re.findall(r"^\[\w+\] (?:ERROR|CRITICAL) ", text, re.MULTILINE))
        result.exceptions = re.findall(r"^[\w.]+(?:Error|Exception): .*$", text, re.MULTILINE)
        return result


#: the notebook every job runs (the runner never starts: the fake runs no pods)
NOTEBOOK = {
    "nbformat": 4,
    "nbformat_minor": 5,
    "metadata": {
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
    },
    "cells": [
        {
            "cell_type": "code",
            "id": "c0",
            "metadata": {},
            "source": "print('hi')",
            "outputs": [],
            "execution_count": None,
        },
    ],
}


def config_value(where: Path, trait: str) -> Any:
    """A JobServiceApp trait as the service child wrote it when it started."""
    return json.loads((where / "service-traits.json").read_text())[trait]


def answers(url: str) -> bool:
    try:
        return httpx.get(url + "api/jobs", headers=auth_header(), timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


class Child:
    """This file run as ``--child KIND PARAMS`` in a process of its own, its output in
    ``where/KIND.log``; stopped with SIGTERM, killed when it does not stop in time."""

    def __init__(self, kind: str, where: Path, params: dict[str, Any]) -> None:
        self.kind = kind
        self.where = where
        self.log = where / f"{kind}.log"
        params = {**params, "where": str(where)}
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--child",
            kind,
            json.dumps(params),
        ]
        self._out = self.log.open("wb")
        self.process = subprocess.Popen(command, stdout=self._out, stderr=subprocess.STDOUT)

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop(timeout=10)

    async def ready(self, check: Callable[[], bool], limit: float = 120) -> bool:
        deadline = time.monotonic() + limit
        while not await asyncio.to_thread(check):
            if self.process.poll() is not None or time.monotonic() > deadline:
                tail = self.log.read_text(errors="replace")[-4000:]
                raise SystemExit(f"the {self.kind} did not start; its log ends:\n{tail}")
            await asyncio.sleep(0.1)
        return True

    def stop(self, timeout: float) -> bool:
        """SIGTERM, then wait; False when it had to be killed."""
        if self.process.poll() is None:
            self.process.terminate()
        try:
            self.process.wait(timeout=timeout)
            stopped = True
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            stopped = False
        self._out.close()
        return stopped


def run_child(kind: str, params: dict[str, Any]) -> None:
    """The fake, the service or the list's poller, in this process until SIGTERM."""
    if kind == "fake":
        asyncio.run(fake_child(**params))
    elif kind == "poller":
        asyncio.run(poller_child(**params))
    else:
        asyncio.run(service_child(**params))


async def fake_child(where: str, jobs: int, create_delay: float) -> None:
    """The fake API server holding each create ``create_delay`` s, with one node for all,
    and beside it a tiny server that says how many Jobs it holds and the most creates
    in flight at once."""
    from aiohttp import web

    folder = Path(where)
    fake = FakeApiServer()
    fake.create_delay = create_delay
    await fake.start()
    # one node with room for every job (a GPU and the flavor's 16Gi each): nothing waits
    allocatable = {
        "nvidia.com/gpu": str(jobs),
        "memory": f"{16 * jobs + 64}Gi",
        "cpu": str(4 * jobs + 16),
        "pods": str(jobs + 110),
    }
    fake.add_node("gpu-0", {"gpu": "a100"}, allocatable)

    async def stats(_: web.Request) -> web.Response:
        held = sum(1 for resource, _, _ in list(fake.objects) if resource == "jobs")
        return web.json_response({"jobs": held, "most_in_flight": fake.most_creates_in_flight})

    app = web.Application()
    app.router.add_get("/stats", stats)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    (folder / "fake-stats-url").write_text(f"http://127.0.0.1:{port}/stats")
    partial = folder / "kubeconfig.part"
    partial.write_text(yaml.safe_dump(fake.kubeconfig()))
    partial.replace(folder / "kubeconfig")
    await stop.wait()
    await runner.cleanup()
    await fake.stop()


async def service_child(where: str, argv: list[str], watched: bool = True) -> None:
    """``nbjobs service`` as JobServiceApp.run serves it, its loop watched (its lags,
    garbage collections and long callbacks written at the end: bench/loop_watch.py)
    unless not ``watched``: the watch wraps every step of the loop, a cost of its own."""
    folder = Path(where)
    app = JobServiceApp()
    app.initialize(argv)
    (folder / "service-traits.json").write_text(
        json.dumps({"concurrent_starts": app.concurrent_starts})
    )
    if not watched:
        await app.run()
        return
    watch = LoopWatch()
    watch.start()
    try:
        await app.run()
    finally:
        watch.write(folder)


def burst_limit(jobs: int, create_delay: float) -> float:
    """How long a burst may take: three times creates one at a time, and then some."""
    return 30 + 3 * jobs * create_delay


def service_config(where: Path, database_url: str, jobs: int) -> dict[str, Any]:
    """nbjobs.yaml as tests/kubernetes/test_service.py's ``settings``, with room for all."""
    return {
        "storage": {
            "root": str(where / "home"),
            "volume": {"nfs": {"server": "nfs.example.org", "path": "/export/home"}},
        },
        "database": {"url": database_url},
        "backend": {
            "kind": "kubernetes",
            "kubernetes": {
                "namespace": NAMESPACE,
                "default_image": "example.org/nbjobs:1",
                "termination_grace_seconds": 2,
            },
        },
        "flavors": [
            {"name": "a100", "gpus": 1, "memory": "16Gi", "node_selector": {"gpu": "a100"}},
        ],
        "quotas": {"default": {"max_running_gpus": jobs, "max_queued_jobs": jobs}},
        "admin": {"users": ["root"]},
    }


# -- the client's side (runs in the client thread) --------------------------------------


def auth_header() -> dict[str, str]:
    token = {user: token for token, user in TOKENS.items()}[USER]
    return {"Authorization": f"token {token}"}


def api_client(url: str, connections: int = 10) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=url + "api/",
        headers=auth_header(),
        timeout=300,
        limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
    )


async def idle_latencies(url: str) -> list[float]:
    """Sequential GETs of the job list while nothing is recorded."""
    latencies = []
    async with api_client(url, 1) as client:
        await client.get("jobs")  # the connection, once
        for _ in range(IDLE_GETS):
            t0 = time.monotonic()
            response = await client.get("jobs")
            latencies.append(time.monotonic() - t0)
            response.raise_for_status()
    return latencies


async def burst(
    url: str,
    where: Path,
    result: Round,
    count_created: Callable[[], Awaitable[int]],
    limit: float,
    service: psutil.Process,
) -> None:
    """Submit ``result.jobs`` at once, while another process GETs the list every 20 ms,
    until all are created; the ``service``'s CPU time (all its threads) meanwhile, and
    the machine's load as it ends.

    The lister is a process of its own, as another user's browser is: in this one its
    GETs waited behind the client's own work of opening 200 connections, which the
    service never saw (its log had no GET over 33 ms when this process measured 218).
    After ``limit`` seconds what is still unanswered is given up on: a service whose
    event loop waits on a database lock answers one request in 30 s (SQLite's busy
    timeout), and the burst would otherwise last for hours."""

    async def submit(client: httpx.AsyncClient) -> None:
        body = {"path": "work/train.ipynb", "flavor": "a100"}
        try:
            response = await client.post("jobs", json=body)
        except httpx.HTTPError as exc:
            result.refused.append(type(exc).__name__)
            return
        result.answered += 1
        if result.answered == result.jobs:
            result.all_submitted = time.monotonic() - t0
        if response.status_code == 201:
            result.accepted += 1
        else:
            result.refused.append(f"{response.status_code} {response.text[:200]}")

    with Child("poller", where, {"url": url}) as poller:
        await poller.ready(lambda: (where / "poller-ready").exists())
        async with api_client(url, result.jobs + 2) as submitter:
            await submitter.get("jobs")  # a connection open before the clock starts
            cpu = sum(service.cpu_times()[:2])
            t0 = result.began = time.monotonic()
            (where / "poller-go").touch()
            submits = [asyncio.ensure_future(submit(submitter)) for _ in range(result.jobs)]
            deadline = t0 + limit
            while time.monotonic() < deadline:
                result.created = await count_created()
                # done when every accepted job is created (a refused one never will be)
                if all(s.done() for s in submits) and result.created >= result.accepted:
                    result.all_created = time.monotonic() - t0
                    break
                await asyncio.sleep(0.005)
            result.ended = time.monotonic()
            result.service_cpu = sum(service.cpu_times()[:2]) - cpu
            result.load = os.getloadavg()[0]
            poller.stop(timeout=30)
            if math.isnan(result.all_created):  # past the limit: give up on what is unanswered
                late = [s for s in submits if not s.done()]
                for task in late:
                    task.cancel()
                result.refused += [f"no answer within {limit:.0f} s"] * len(late)
            await asyncio.gather(*submits, return_exceptions=True)
    for sent, took, ok in json.loads((where / "poller.json").read_text()):
        result.burst.append(took)
        result.burst_sent.append(sent - t0)
        result.burst_errors += not ok


async def poller_child(where: str, url: str) -> None:
    """GET the list every 20 ms from when ``poller-go`` appears until SIGTERM; write
    (when sent, seconds taken, answered 200) of each to ``poller.json``. A GET still
    unanswered 2 s after SIGTERM counts as taking as long as it waited."""
    folder = Path(where)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    took: list[tuple[float, float, bool]] = []
    async with api_client(url, 1) as client:
        await client.get("jobs")  # the connection, before the clock starts
        (folder / "poller-ready").touch()
        while not (folder / "poller-go").exists() and not stop.is_set():
            await asyncio.sleep(0.001)
        while not stop.is_set():
            sent = time.monotonic()
            get = asyncio.ensure_future(client.get("jobs"))
            stopped = asyncio.ensure_future(stop.wait())
            await asyncio.wait({get, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if not get.done():
                await asyncio.wait({get}, timeout=2)
            stopped.cancel()
            if not get.done():
                get.cancel()
                took.append((sent, time.monotonic() - sent, False))
                break
            ok = get.exception() is None and get.result().status_code == 200
            took.append((sent, time.monotonic() - sent, ok))
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), POLL_EVERY)
    (folder / "poller.json").write_text(json.dumps(took))


# -- PostgreSQL ----------------------------------------------------------------


@dataclass
class PostgresServer:
    url: str

    def new_database(self, name: str) -> str:
        """A fresh database on this server, for one round."""
        import sqlalchemy

        engine = sqlalchemy.create_engine(self.url, isolation_level="AUTOCOMMIT")
        with engine.connect() as connection:
            connection.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"'))
        engine.dispose()
        return self.url.rsplit("/", 1)[0] + f"/{name}"


@contextlib.contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    """A real PostgreSQL server on loopback, as tests/job_service/conftest.py's
    ``postgres_url`` starts it (as ``nobody`` when root: PostgreSQL refuses root)."""
    import sqlalchemy

    bindir = _postgres_bin()
    if bindir is None:
        raise SystemExit("PostgreSQL is not installed; scripts/install.sh --dev installs it")
    data = Path(tempfile.mkdtemp(prefix="nbjobs-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(data, "nobody", "nogroup")
        as_user = ["runuser", "-u", "nobody", "--"]
    subprocess.run(
        [*as_user, str(bindir / "initdb"), "-D", str(data / "db"), "-A", "trust", "-U", "nbjobs"],
        check=True,
        capture_output=True,
    )
    port = free_port()
    command = [*as_user, str(bindir / "postgres"), "-D", str(data / "db"), "-p", str(port)]
    command += ["-k", str(data), "-h", "127.0.0.1", "-c", "fsync=off"]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"postgresql+psycopg2://nbjobs@127.0.0.1:{port}/postgres"
        deadline = time.monotonic() + 30
        while True:
            try:
                sqlalchemy.create_engine(url).connect().close()
                break
            except sqlalchemy.exc.OperationalError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield PostgresServer(url)
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

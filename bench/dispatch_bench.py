"""Dispatch under slow Kubernetes creates: N jobs submitted at once, creates held M ms.

    python bench/dispatch_bench.py [--jobs 200] [--create-ms 200]
                                   [--database sqlite|postgresql|both] [--repeat 1]

The real job service (tornado, the Kubernetes backend, SQLite or a real PostgreSQL
server from Debian's package) runs in the bench's own process, one per round; the
Kubernetes fake API server (tests/kubernetes/fake_apiserver.py) holds every Job create
for M ms, as an admission webhook or a busy API server does, and lets creates overlap as
the real one does. The fake and the client each run in a thread of their own with their
own event loop, so a service that blocks its event loop is seen by the client as a real
one would see it, and does not slow the fake's creates down. A burst is given up on after
30 s + 3 x N x M; a service that then does not stop within a minute is killed.

Per database and round (a fresh service, database and fake each round):

  idle      200 sequential ``GET /api/jobs`` with no jobs recorded: p50 / p99 / max
  burst     N ``POST /api/jobs`` at once, then wait until the fake holds all N Jobs:
            the time, against N x M (creates one at a time) and against
            ceil(N / concurrent_starts) x M (the service's bounded concurrency);
            meanwhile ``GET /api/jobs`` every 20 ms: p50 / p99 / max, against the
            idle figures and the goal (p99 < 100 ms)

Every figure is printed next to what it is compared with and the ratio; with
``--repeat`` > 1 each is the median of the rounds. The exit status is 1 when a submit
was refused or a Job never created.
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
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # tests/, and this checkout's nbjobs before any other

from nbjobs.job_service.app import JobServiceApp  # noqa: E402
from tornado.httpserver import HTTPServer  # noqa: E402

from nbjobs.config import parse_config  # noqa: E402
from tests.job_service.conftest import (  # noqa: E402
    GROUPS,
    TOKENS,
    Service,
    _postgres_bin,
    free_port,
    stop_service,
)
from tests.kubernetes.fake_apiserver import FakeApiServer  # noqa: E402

NAMESPACE = "gpu-jobs"
USER = "ada"
#: the API's p99 during a burst should stay under this (issue 15)
GOAL_P99_MS = 100.0
#: sequential GETs for the idle baseline
IDLE_GETS = 200
#: the burst's poller asks this often
POLL_EVERY = 0.02
#: the service's event loop is checked this often
LAG_TICK = 0.01

T = TypeVar("T")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=200, help="jobs submitted at once")
    parser.add_argument("--create-ms", type=float, default=200, help="ms every Job create takes")
    parser.add_argument(
        "--database", choices=["sqlite", "postgresql", "both"], default="both", help="which"
    )
    parser.add_argument("--repeat", type=int, default=1, help="rounds per database (medians)")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # one round (see run_round)
    args = parser.parse_args()
    if args.child:
        asyncio.run(one_round(**json.loads(args.child)))
        return 0
    if args.jobs < 1 or args.repeat < 1 or args.create_ms < 0:
        parser.error("--jobs and --repeat must be at least 1, --create-ms at least 0")
    databases = ["sqlite", "postgresql"] if args.database == "both" else [args.database]
    results = run_all(databases, args.jobs, args.create_ms / 1000, args.repeat)
    print_table(results, args.jobs, args.create_ms / 1000, args.repeat)
    complete = all(
        r.accepted == r.jobs and r.created == r.jobs for rs in results.values() for r in rs
    )
    return 0 if complete else 1


# -- rounds ---------------------------------------------------------------------------


@dataclass
class Round:
    """What one round measured (times in seconds)."""

    jobs: int
    concurrent_starts: int
    idle: list[float] = field(default_factory=list)
    burst: list[float] = field(default_factory=list)
    #: when each of those GETs was sent, from the burst's start
    burst_sent: list[float] = field(default_factory=list)
    #: GETs during the burst that were not answered 200
    burst_errors: int = 0
    #: submits answered 201, and the other answers
    accepted: int = 0
    refused: list[str] = field(default_factory=list)
    #: Jobs the fake holds at the end, and when the last of them was created
    created: int = 0
    all_created: float = math.nan
    #: when the last submit was answered (NaN: some never were)
    all_submitted: float = math.nan
    answered: int = 0
    most_in_flight: int = 0
    #: how late the service's event loop ran a 10 ms sleep's wake-up: while idle, in
    #: the burst (a loop that blocks shows here; a request queued elsewhere does not)
    lag_idle: list[float] = field(default_factory=list)
    lag_burst: list[float] = field(default_factory=list)
    #: the burst's start and end (time.perf_counter)
    began: float = math.nan
    ended: float = math.nan
    #: whether the service stopped within a minute of the burst (else it was killed)
    stopped: bool = True
    #: the service's log: its ERROR and CRITICAL lines, the exceptions it names
    error_lines: int = 0
    exceptions: list[str] = field(default_factory=list)

    def phase(self, while_submitting: bool) -> list[float]:
        """The burst's GET latencies sent while submits were still being answered, or after."""
        cut = self.all_submitted if not math.isnan(self.all_submitted) else math.inf
        return [
            took
            for took, sent in zip(self.burst, self.burst_sent, strict=True)
            if (sent < cut) == while_submitting
        ]


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
    """One round in a process of its own, which writes its figures as soon as the burst
    ends: a service whose event loop hangs on a database lock is killed after that."""
    result_file = where / "round.json"
    log_file = where / "service.log"
    params = {
        "where": str(where),
        "database_url": database_url,
        "jobs": jobs,
        "create_delay": create_delay,
        "result_file": str(result_file),
    }
    command = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(params)]
    stopped = True
    with log_file.open("wb") as log:
        child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        # start-up and the idle GETs come before the burst's own limit
        deadline = time.monotonic() + burst_limit(jobs, create_delay) + 120
        while not result_file.exists():
            if child.poll() is not None or time.monotonic() > deadline:
                child.kill()
                child.wait()
                tail = log_file.read_text(errors="replace")[-4000:]
                raise SystemExit(f"{name}: the round ended without figures; its log ends:\n{tail}")
            time.sleep(0.1)
        try:
            child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            stopped = False
            child.kill()
            child.wait()
    result = Round(**json.loads(result_file.read_text()))
    result.stopped = stopped
    text = log_file.read_text(errors="replace")
    result.error_lines = len(re.findall(r"^\[\w+\] (?:ERROR|CRITICAL) ", text, re.MULTILINE))
    result.exceptions = re.findall(r"^[\w.]+(?:Error|Exception): .*$", text, re.MULTILINE)
    return result


async def one_round(
    where: str, database_url: str, jobs: int, create_delay: float, result_file: str
) -> None:
    """Start a fake and a service, measure from a client thread, write the figures."""
    folder = Path(where)
    fake_loop = LoopThread("fake-apiserver")
    client_loop = LoopThread("client")
    fake = await fake_loop.run(start_fake(jobs, create_delay))
    kubeconfig = folder / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(fake.kubeconfig()))
    svc = await start_service(folder, kubeconfig, service_config(folder, database_url, jobs))
    svc.write(USER, "work/train.ipynb", "print('hi')")
    result = Round(jobs, int(getattr(svc.app, "concurrent_starts", 1)))

    async def jobs_created() -> int:
        return sum(1 for resource, _, _ in list(fake.objects) if resource == "jobs")

    lags: list[tuple[float, float]] = []  # (when the sleep began, how late it woke)
    ticking = [time.perf_counter()]  # when the sleep now running began

    async def watch_loop() -> None:
        while True:
            ticking[0] = time.perf_counter()
            await asyncio.sleep(LAG_TICK)
            lags.append((ticking[0], time.perf_counter() - ticking[0] - LAG_TICK))

    async def measure() -> None:
        # in the client thread: the figures are out even while the service's loop hangs
        result.idle = await idle_latencies(svc)
        limit = burst_limit(jobs, create_delay)
        await burst(svc, result, lambda: fake_loop.run(jobs_created()), limit)
        result.most_in_flight = fake.most_creates_in_flight
        seen = [*lags, (ticking[0], time.perf_counter() - ticking[0] - LAG_TICK)]
        result.lag_idle = [lag for when, lag in seen if when < result.began]
        result.lag_burst = [lag for when, lag in seen if result.began <= when <= result.ended]
        partial = Path(result_file + ".part")
        partial.write_text(json.dumps(asdict(result)))
        partial.replace(result_file)

    watching = asyncio.ensure_future(watch_loop())
    await client_loop.run(measure())
    watching.cancel()
    await stop_service(svc)
    await fake_loop.run(fake.stop())
    client_loop.close()
    fake_loop.close()


def burst_limit(jobs: int, create_delay: float) -> float:
    """How long a burst may take: three times creates one at a time, and then some."""
    return 30 + 3 * jobs * create_delay


async def start_fake(jobs: int, create_delay: float) -> FakeApiServer:
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
    return fake


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


async def start_service(where: Path, kubeconfig: Path, data: dict[str, Any]) -> Service:
    """The service as tests/kubernetes/test_service.py's ``start``, logging warnings only."""
    config_file = where / "nbjobs.yaml"
    config_file.write_text(yaml.safe_dump(data))
    parse_config(config_file.read_text())
    port = free_port()
    app = JobServiceApp()
    app.initialize(
        [
            f"--config={config_file}",
            f"--port={port}",
            "--JobServiceApp.prefix=/services/nbjobs/",
            "--JobServiceApp.log_level=WARN",
            f"--StaticTokenAuth.tokens={TOKENS!r}",
            f"--StaticTokenAuth.user_groups={GROUPS!r}",
            f"--KubernetesBackend.kubeconfig={kubeconfig}",
            "--KubernetesBackend.retry_delay=0.05",
        ]
    )
    service = app.make_service()
    await service.start()
    server = HTTPServer(app.make_web_app(service, app.make_auth()))
    server.listen(port, "127.0.0.1")
    url = f"http://127.0.0.1:{port}/services/nbjobs/"
    return Service(url, where, app, service, server, config_file)


# -- the client's side (runs in the client thread) --------------------------------------


def api_client(svc: Service, connections: int = 10) -> httpx.AsyncClient:
    token = {user: token for token, user in TOKENS.items()}[USER]
    return httpx.AsyncClient(
        base_url=svc.url + "api/",
        headers={"Authorization": f"token {token}"},
        timeout=300,
        limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
    )


async def idle_latencies(svc: Service) -> list[float]:
    """Sequential GETs of the job list while nothing is recorded."""
    latencies = []
    async with api_client(svc, 1) as client:
        await client.get("jobs")  # the connection, once
        for _ in range(IDLE_GETS):
            t0 = time.perf_counter()
            response = await client.get("jobs")
            latencies.append(time.perf_counter() - t0)
            response.raise_for_status()
    return latencies


async def burst(
    svc: Service, result: Round, count_created: Callable[[], Awaitable[int]], limit: float
) -> None:
    """Submit ``result.jobs`` at once; GET the list every 20 ms until all are created.

    After ``limit`` seconds what is still unanswered is given up on: a service whose
    event loop waits on a database lock answers one request in 30 s (SQLite's busy
    timeout), and the burst would otherwise last for hours."""
    done = asyncio.Event()
    asked_at: list[float] = []  # when the poller's GET in flight was sent

    async def poll(client: httpx.AsyncClient) -> None:
        while not done.is_set():
            asked_at[:] = [time.perf_counter()]
            try:
                ok = (await client.get("jobs")).status_code == 200
            except httpx.HTTPError:
                ok = False
            sent = asked_at.pop()
            result.burst.append(time.perf_counter() - sent)
            result.burst_sent.append(sent - t0)
            result.burst_errors += not ok
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(done.wait(), POLL_EVERY)

    async def submit(client: httpx.AsyncClient) -> None:
        body = {"path": "work/train.ipynb", "flavor": "a100"}
        try:
            response = await client.post("jobs", json=body)
        except httpx.HTTPError as exc:
            result.refused.append(type(exc).__name__)
            return
        result.answered += 1
        if result.answered == result.jobs:
            result.all_submitted = time.perf_counter() - t0
        if response.status_code == 201:
            result.accepted += 1
        else:
            result.refused.append(f"{response.status_code} {response.text[:200]}")

    t0 = math.nan  # the burst's start, set below
    async with api_client(svc, 2) as poller, api_client(svc, result.jobs + 2) as submitter:
        await poller.get("jobs")  # connections open before the clock starts
        await submitter.get("jobs")
        t0 = result.began = time.perf_counter()
        polling = asyncio.ensure_future(poll(poller))
        submits = [asyncio.ensure_future(submit(submitter)) for _ in range(result.jobs)]
        deadline = t0 + limit
        while time.perf_counter() < deadline:
            result.created = await count_created()
            # done when every accepted job is created (a refused one never will be)
            if all(s.done() for s in submits) and result.created >= result.accepted:
                result.all_created = time.perf_counter() - t0
                break
            await asyncio.sleep(0.005)
        done.set()
        result.ended = time.perf_counter()
        if math.isnan(result.all_created):  # past the limit: give up on what is unanswered
            late = [s for s in submits if not s.done()]
            for task in [*late, polling]:
                task.cancel()
            result.refused += [f"no answer within {limit:.0f} s"] * len(late)
            if asked_at:  # the GET in flight has waited this long at least
                result.burst.append(time.perf_counter() - asked_at[0])
                result.burst_sent.append(asked_at[0] - t0)
        await asyncio.gather(*submits, return_exceptions=True)
        with contextlib.suppress(asyncio.CancelledError):
            await polling


# -- threads, PostgreSQL ----------------------------------------------------------------


class LoopThread:
    """An event loop in a thread of its own; ``await run(coro)`` runs a coroutine there."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> Awaitable[T]:
        return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=30)
        if not self.thread.is_alive():
            self.loop.close()


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


# -- the table ----------------------------------------------------------------------------


def quantile(values: list[float], q: float) -> float:
    """The q-quantile (nearest rank) of ``values``; NaN for none."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def median(values: list[float]) -> float:
    kept = [v for v in values if not math.isnan(v)]
    return statistics.median(kept) if kept else math.nan


Row = tuple[str, str, str, str]


def rows_for(rounds: list[Round], jobs: int, create_delay: float) -> list[Row]:
    """(what, measured, compared with, ratio) rows: each figure the median of the rounds."""
    concurrency = rounds[0].concurrent_starts
    serial = jobs * create_delay
    ideal = math.ceil(jobs / concurrency) * create_delay

    def row(what: str, measured: str, against: str, a: float, b: float) -> Row:
        ratio = f"{a / b:.2f}" if b and not math.isnan(a) and not math.isnan(b) else "-"
        return (what, measured, against, ratio)

    def of(which: str, q: float) -> float:
        return median([quantile(getattr(r, which), q) for r in rounds])

    def ms(seconds: float) -> str:
        return "none" if math.isnan(seconds) else f"{seconds * 1000:.1f} ms"

    goal = f"goal {GOAL_P99_MS:.0f} ms"
    took = median([r.all_created for r in rounds])
    took_text = "never" if math.isnan(took) else f"{took:.2f} s"
    rows = [
        row(
            f"all {jobs} Jobs created",
            took_text,
            f"serial {jobs} x create {serial:.2f} s",
            took,
            serial,
        ),
        row("", "", f"ideal ceil({jobs}/{concurrency}) x create {ideal:.2f} s", took, ideal),
    ]
    for label, q in (("p50", 0.5), ("p99", 0.99), ("max", 1.0)):
        burst, idle = of("burst", q), of("idle", q)
        rows.append(
            row(f"GET /jobs {label}, burst", ms(burst), f"idle {label} {ms(idle)}", burst, idle)
        )
        if label != "p50":
            rows.append(row("", "", goal, burst, GOAL_P99_MS / 1000))
    # the burst in two parts: while the submits are answered, then while creates go out
    submitted = median([r.all_submitted for r in rounds])
    rows.append(
        row(
            f"all {jobs} submits answered",
            "never" if math.isnan(submitted) else f"{submitted:.2f} s",
            f"all Jobs created {took_text}",
            submitted,
            took,
        )
    )
    for label, before in (("while submitting", True), ("after, until created", False)):
        p99 = median([quantile(r.phase(before), 0.99) for r in rounds])
        rows.append(row(f"GET /jobs p99, {label}", ms(p99), goal, p99, GOAL_P99_MS / 1000))
    for label, q in (("p99", 0.99), ("max", 1.0)):
        burst, idle = of("lag_burst", q), of("lag_idle", q)
        what = f"service loop lag {label}, burst"
        rows.append(row(what, ms(burst), f"idle {label} {ms(idle)}", burst, idle))
    most = median([r.most_in_flight for r in rounds])
    accepted = median([r.accepted for r in rounds])
    created = median([r.created for r in rounds])
    return [
        *rows,
        row(
            "creates in flight, most",
            f"{most:g}",
            f"concurrent_starts {concurrency}",
            most,
            concurrency,
        ),
        row("submits accepted (201)", f"{accepted:g}", f"of {jobs} submitted", accepted, jobs),
        row(
            "Jobs created", f"{created:g} of {jobs}", f"of {accepted:g} accepted", created, accepted
        ),
    ]


def print_table(
    results: dict[str, list[Round]], jobs: int, create_delay: float, rounds: int
) -> None:
    print()
    print(
        f"dispatch under slow creates: {jobs} jobs at once, {create_delay * 1000:g} ms a "
        f"create, {rounds} round(s){', medians' if rounds > 1 else ''}; "
        f"GET /jobs every {POLL_EVERY * 1000:g} ms during the burst, {IDLE_GETS} when idle"
    )
    header = ("database", "what", "measured", "compared with", "ratio")
    lines = [header]
    for database, rs in results.items():
        for i, row in enumerate(rows_for(rs, jobs, create_delay)):
            lines.append((database if i == 0 else "", *row))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for n, line in enumerate(lines):
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))
    for database, rs in results.items():
        for i, r in enumerate(rs):
            name = f"{database} round {i + 1}"
            if r.refused:
                kinds = Counter(r.refused).most_common()
                told = "; ".join(f"{n} x {answer}" for answer, n in kinds)
                print(f"{name}: {len(r.refused)} submit(s) not accepted: {told}")
            if r.burst_errors:
                print(f"{name}: {r.burst_errors} GET(s) during the burst failed")
            if r.error_lines or r.exceptions:
                seen = Counter(line[:120] for line in r.exceptions).most_common(2)
                named = "; ".join(f"{n} x {line}" for line, n in seen)
                print(f"{name}: the service logged {r.error_lines} error(s); exceptions: {named}")
            if not r.stopped:
                print(f"{name}: the service did not stop within 60 s of the burst; it was killed")


if __name__ == "__main__":
    sys.exit(main())

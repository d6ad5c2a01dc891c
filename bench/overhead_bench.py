"""What the job service adds to a job: submit -> done through the API, against the runner alone.

    python bench/overhead_bench.py [--quick] [--rounds N] [--bursts N] [--cases 3,300]
                                   [--cgroups auto|off] [--client watch|poll]
                                   [--peer-python PYTHON]

The same notebooks (3 tiny cells; 300 tiny cells) run two ways, in alternating rounds
so that a busy machine slows both alike:

  direct   the runner as the local backend starts it (``python -m nbjobs.job_runner IN
           OUT --status-file S ...``: the same options and environment, a session of
           its own, its output to a log): from the start of the process to its exit
  service  a real job service (``nbjobs service`` in a process of its own: tornado,
           SQLite, the local backend, control groups as nbjobs ships them) called over
           HTTP on loopback: from ``POST api/jobs`` until the API answers the job
           ``succeeded``. The client learns of the end as the Jobs panel does: it
           watches ``GET api/events`` and asks for the job (``GET api/jobs/ID``) once an
           event says it ended; with ``--client poll`` it asks every 50 ms instead

One job at a time (medians of N rounds), and eight submitted at once (the makespan:
the first submit until the last job is seen done, the list of the caller's jobs asked
for once the events said all ended, or every 50 ms, against eight runners started at
once). Printed per case: both, the
difference (service - direct: what the service adds; goal < 0.15 s for one job) and
the ratio (goal for eight at once: <= 1.1), with the load average while measured;
and for one job where the difference goes, from the times the service records: submit
-> ``started_at`` (dispatch and the runner's start), ``started_at`` -> ``finished_at``
against the runner alone (the runner under the service, and the end being noticed),
``finished_at`` -> seen through the API (the event and the question that follows it, or
the client's polling). Then the same difference with each runner's own run taken out
(its status file's ``started_at`` -> ``finished_at``: the kernel's start, the cells, the
output; the same work both ways, whose time the machine moves by a tenth from one run to
the next on 2 cores, more than the goal), paired by round: what the service adds around
the run, held to the same goal; the own runs are printed both ways beside it, so that a
service that slowed the run itself shows there.

With ``--peer-python`` (a Python that has jupyter-scheduler installed, in a venv of its
own), jupyter-scheduler's submit -> done for the same notebooks is measured beside
nbjobs': ``jupyter server`` with its extension in a process of its own, ``POST
scheduler/jobs`` then ``GET scheduler/jobs/ID`` every 50 ms until ``COMPLETED``, as its
JupyterLab panel does (its default executor: a process per job). Without it the bench
says how to get those figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import nbformat
import yaml

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
for _path in (str(ROOT), str(BENCH)):
    if _path not in sys.path:
        sys.path.insert(0, _path)  # tests/ and bench/, and this checkout's nbjobs first

from dispatch_bench import Child, answers, auth_header  # noqa: E402
from nbjobs.job_runner import read_status  # noqa: E402
from nbjobs.job_service.backends.base import LaunchSpec  # noqa: E402
from nbjobs.job_service.backends.local_job_setup import job_environment, own_account  # noqa: E402
from nbjobs.job_service.live import STATUS_FILE  # noqa: E402
from runner_bench import notebook  # noqa: E402

from nbjobs.cgroups import Cgroups  # noqa: E402
from nbjobs.config import parse_config  # noqa: E402
from nbjobs.storage import JOBS_DIR  # noqa: E402
from tests.job_service.conftest import TOKENS, free_port  # noqa: E402
from tests.sse import EventLines  # noqa: E402

USER = "ada"
#: how often a client asks whether its job is done (nbjobs and the peer alike): a
#: request costs the service a few ms of CPU, which a machine of 2 cores feels
POLL_EVERY = 0.05
#: jobs submitted at once for the makespan (``--at-once``); the service has room for all
AT_ONCE = 8
MOST_AT_ONCE = 16
#: goals (issue 44)
GOAL_SINGLE = 0.15
GOAL_AT_ONCE = 1.1

CASES: dict[str, Callable[[], nbformat.NotebookNode]] = {
    "3": lambda: notebook(["x = 1", "y = x + 1", "print(y)"]),
    "300": lambda: notebook([f"v{i} = {i}" for i in range(300)]),
}

PEER_HOW = (
    "jupyter-scheduler's figures for the same notebooks: install it in a venv of its own\n"
    "  python3 -m venv /tmp/peer-venv && /tmp/peer-venv/bin/pip install "
    "jupyter-scheduler==2.12.1 ipykernel\n"
    "and run this again with --peer-python /tmp/peer-venv/bin/python"
)


def load() -> str:
    """The 1-minute load average now, as printed beside every figure."""
    return f"{os.getloadavg()[0]:.1f}"


# -- nbjobs' job service, in a process of its own ---------------------------------------


def service_settings(where: Path, instance: str, cgroups: str = "auto") -> dict[str, Any]:
    """nbjobs.yaml of the bench's service: the local backend with room for every job at
    once, everything else as nbjobs ships it."""
    return {
        "storage": {"root": str(where / "home")},
        "database": {"url": f"sqlite:///{where / 'jobs.sqlite'}"},
        "backend": {
            "kind": "local",
            "local": {
                "gpus": [],
                "cpu_slots": MOST_AT_ONCE,
                "instance": instance,
                "cgroups": cgroups,
            },
        },
        "flavors": [{"name": "cpu", "gpus": 0}],
        "quotas": {"default": {"max_queued_jobs": 10 * MOST_AT_ONCE}},
    }


class Service:
    """``nbjobs service`` in a child process (dispatch_bench's), on a fresh database."""

    def __init__(self, where: Path, cgroups: str = "auto") -> None:
        self.where = where
        where.mkdir(parents=True)
        self.instance = f"nbjobs-bench-{uuid.uuid4().hex[:8]}"
        settings = service_settings(where, self.instance, cgroups)
        (where / "nbjobs.yaml").write_text(yaml.safe_dump(settings))
        self.config = parse_config((where / "nbjobs.yaml").read_text())
        self.home = where / "home" / USER
        self.home.mkdir(parents=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.child: Child | None = None

    async def __aenter__(self) -> Service:
        argv = [
            f"--config={self.where / 'nbjobs.yaml'}",
            f"--port={self.port}",
            "--ip=127.0.0.1",
            "--JobServiceApp.log_level=WARN",
            f"--StaticTokenAuth.tokens={TOKENS!r}",
        ]
        # unwatched (bench/loop_watch.py): what it adds to every step of the loop is the
        # bench's, not the service's
        self.child = Child("service", self.where, {"argv": argv, "watched": False})
        await self.child.ready(lambda: answers(self.url))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.child is not None:
            self.child.stop(timeout=30)
        # the instance's parent groups, made for this bench's jobs (empty by now)
        for folder in Cgroups(Path("/sys/fs/cgroup"), parent=self.instance).parent_folders():
            with contextlib.suppress(OSError):
                folder.rmdir()

    def client(self, connections: int) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.url + "api/",
            headers=auth_header(),
            timeout=120,
            limits=httpx.Limits(max_connections=connections),
        )


FINAL = ("succeeded", "failed", "cancelled", "timed_out")
FIELDS = ("started_at", "finished_at")


async def nbjobs_submit(c: httpx.AsyncClient, path: str) -> str:
    """Submit ada's notebook ``path``; the job's id."""
    r = await c.post("jobs", json={"path": path, "flavor": "cpu"})
    r.raise_for_status()
    return str(r.json()["id"])


def nbjobs_done(job: dict[str, Any]) -> bool:
    if job["state"] not in FINAL:
        return False
    if job["state"] != "succeeded":
        said = {k: job.get(k) for k in ("message", "error", "exit_code")}
        raise SystemExit(f"the bench's job {job['id']} ended {job['state']}: {said}")
    return True


async def nbjobs_job(c: httpx.AsyncClient, path: str) -> tuple[float, float, float, str]:
    """One job: seconds from its submit until the API said it succeeded, and until the
    ``started_at`` and ``finished_at`` the service recorded (the runner's start, the
    end it noticed); and its id."""
    t0 = time.time()
    job_id = await nbjobs_submit(c, path)
    while not nbjobs_done(job := (await c.get(f"jobs/{job_id}")).json()):
        await asyncio.sleep(POLL_EVERY)
    seen = time.time() - t0
    started, finished = (datetime.fromisoformat(job[k]).timestamp() - t0 for k in FIELDS)
    return seen, started, finished, job_id


async def nbjobs_jobs(c: httpx.AsyncClient, path: str, count: int) -> float:
    """``count`` jobs submitted at once, then one list of the caller's newest jobs asked
    for every poll (as a panel that lists them): seconds until all had succeeded."""
    t0 = time.time()
    ids = set(await asyncio.gather(*(nbjobs_submit(c, path) for _ in range(count))))
    while True:
        page = (await c.get("jobs", params={"limit": 4 * count})).json()["jobs"]
        if sum(1 for job in page if job["id"] in ids and nbjobs_done(job)) == count:
            return time.time() - t0
        await asyncio.sleep(POLL_EVERY)


class Watcher:
    """A client that watches ``GET api/events`` as the Jobs panel does: told of a job's end
    by the stream, it asks the API for the job once, rather than polling it."""

    def __init__(self, service: Service) -> None:
        self.client = service.client(1)
        #: the final state of each job an event said ended
        self.ended: dict[str, str] = {}
        #: how often the stream was opened again (it ends every 5 minutes) or told to
        #: start again (``resync``): what ended meanwhile may not have been said, so at
        #: each the waiters ask the API for their jobs once
        self.reopened = 0
        self.news = asyncio.Condition()
        self._said_hello = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Watcher:
        self._task = asyncio.ensure_future(self._read())
        await asyncio.wait_for(self._said_hello.wait(), 60)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        await self.client.aclose()

    async def _read(self) -> None:
        while True:
            async with self.client.stream("GET", "events", timeout=None) as r:
                r.raise_for_status()
                lines = EventLines()
                async for line in r.aiter_lines():
                    if (said := lines.feed(line)) is not None:
                        await self._heard(*said)

    async def _heard(self, event: str, data: dict[str, Any]) -> None:
        async with self.news:
            if event in ("hello", "resync"):
                if self._said_hello.is_set():
                    self.reopened += 1
                self._said_hello.set()
            elif event == "job" and data.get("state") in FINAL:
                self.ended[data["id"]] = data["state"]
            self.news.notify_all()

    async def until_ended(self, c: httpx.AsyncClient, ids: set[str]) -> None:
        """Until an event said each of ``ids`` ended (or, after the stream was opened
        again, the API did)."""
        async with self.news:
            reopened = self.reopened
            while not ids <= self.ended.keys():
                await self.news.wait()
                if self.reopened != reopened:
                    reopened = self.reopened
                    for job_id in ids - self.ended.keys():
                        job = (await c.get(f"jobs/{job_id}")).json()
                        if job["state"] in FINAL:
                            self.ended[job_id] = job["state"]


async def watched_job(
    w: Watcher, c: httpx.AsyncClient, path: str
) -> tuple[float, float, float, str]:
    """:func:`nbjobs_job` for a client that watches the events (:class:`Watcher`)."""
    t0 = time.time()
    job_id = await nbjobs_submit(c, path)
    await w.until_ended(c, {job_id})
    nbjobs_done(job := (await c.get(f"jobs/{job_id}")).json())
    seen = time.time() - t0
    started, finished = (datetime.fromisoformat(job[k]).timestamp() - t0 for k in FIELDS)
    return seen, started, finished, job_id


async def watched_jobs(w: Watcher, c: httpx.AsyncClient, path: str, count: int) -> float:
    """:func:`nbjobs_jobs` for a client that watches the events: the list asked for once,
    when the events said the last job ended."""
    t0 = time.time()
    ids = set(await asyncio.gather(*(nbjobs_submit(c, path) for _ in range(count))))
    await w.until_ended(c, ids)
    page = (await c.get("jobs", params={"limit": 4 * count})).json()["jobs"]
    if sum(1 for job in page if job["id"] in ids and nbjobs_done(job)) != count:
        raise SystemExit("the events said the jobs ended; the list did not")
    return time.time() - t0


# -- the runner alone, as the local backend starts it -----------------------------------


def direct_command(service: Service, source: Path, work: Path) -> tuple[list[str], dict[str, str]]:
    """The runner's command line and environment for ``source``, as the local backend
    builds them for a job of the bench's flavor (its own files in ``work``)."""
    flavor = service.config.flavor("cpu")
    assert flavor is not None
    spec = LaunchSpec(
        job_id=work.name,
        user=USER,
        flavor=flavor,
        snapshot_file=work / "snapshot.ipynb",
        output_file=work / "out.ipynb",
        status_file=work / STATUS_FILE,
        log_file=work / "log.txt",
        cwd=source.parent,
        source_name=source.name,
    )
    command = spec.runner_command(
        sys.executable, str, service.config.limits, service.config.telemetry
    )
    env = job_environment(
        spec,
        [],
        home=service.home,
        account=own_account(),
        settings=service.config.backend.local,
        service_env=os.environ,
    )
    return command, env


def runner_own_run(status_file: Path) -> float:
    """Seconds of a runner's own run, by its status file: from its ``started_at`` (its
    kernel about to start) to its ``finished_at`` (the output written). The same code and
    work either way; what a machine's speed moves from one run to the next (by a tenth
    on a 2-core VM), which the bench takes out of the difference to see the rest."""
    status = read_status(status_file)
    if status is None or status.started_at is None or status.finished_at is None:
        raise SystemExit(f"{status_file} says no whole run of its runner")
    ended, began = (datetime.fromisoformat(t) for t in (status.finished_at, status.started_at))
    return (ended - began).total_seconds()


async def direct_job(service: Service, source: Path) -> tuple[float, float]:
    """One runner on ``source``: the seconds until it exited, and its own run."""
    took, works = await direct_runs(service, source, 1)
    return took, runner_own_run(works[0] / STATUS_FILE)


async def direct_jobs(service: Service, source: Path, count: int) -> float:
    """Start ``count`` runners on ``source`` at once, as the backend would; the seconds
    until the last one exited."""
    return (await direct_runs(service, source, count))[0]


async def direct_runs(service: Service, source: Path, count: int) -> tuple[float, list[Path]]:
    """:func:`direct_jobs`, and the runners' folders."""
    procs, works = [], []
    t0 = time.time()
    for _ in range(count):
        work = service.where / "direct" / uuid.uuid4().hex[:12]
        works.append(work)
        work.mkdir(parents=True)
        shutil.copy(source, work / "snapshot.ipynb")
        command, env = direct_command(service, source, work)
        with (work / "log.txt").open("ab") as log:
            procs.append(
                subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=source.parent,
                    env=env,
                    start_new_session=True,
                )
            )
    codes = await asyncio.gather(*(asyncio.to_thread(p.wait) for p in procs))
    took = time.time() - t0
    if any(codes):
        raise SystemExit(f"a runner started directly failed ({codes}); see {service.where}")
    return took, works


# -- jupyter-scheduler, for comparison -------------------------------------------------


class Peer:
    """jupyter-scheduler behind a jupyter-server in a process of its own."""

    def __init__(self, python: str, where: Path) -> None:
        self.python = python
        self.where = where
        self.where.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.token = uuid.uuid4().hex
        self.url = f"http://127.0.0.1:{self.port}/"
        self.process: subprocess.Popen[bytes] | None = None

    async def __aenter__(self) -> Peer:
        self.log = (self.where / "peer.log").open("wb")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "VIRTUAL"))}
        root = self.where
        command = [
            str(Path(self.python).parent / "jupyter-server"),
            f"--ServerApp.root_dir={root}",
            f"--ServerApp.port={self.port}",
            "--ServerApp.ip=127.0.0.1",
            f"--IdentityProvider.token={self.token}",
            "--ServerApp.open_browser=False",
            "--ServerApp.allow_root=True",
            f"--SchedulerApp.db_url=sqlite:///{root / 'scheduler.sqlite'}",
        ]
        self.process = subprocess.Popen(
            command,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            cwd=root,
            env={**env, "JUPYTER_CONFIG_DIR": str(root / "config")},
            start_new_session=True,
        )
        deadline = time.monotonic() + 120
        async with self.client() as c:
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if (await c.get("scheduler/jobs")).status_code == 200:
                        return self
                if self.process.poll() is not None or time.monotonic() > deadline:
                    tail = (self.where / "peer.log").read_text(errors="replace")[-3000:]
                    raise SystemExit(f"jupyter-scheduler did not start; its log ends:\n{tail}")
                await asyncio.sleep(0.2)

    async def __aexit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()

    def client(self, connections: int = 10) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.url,
            headers={"Authorization": f"token {self.token}"},
            timeout=120,
            limits=httpx.Limits(max_connections=connections),
        )


async def peer_submit(c: httpx.AsyncClient, path: str) -> str:
    """Submit ``path`` to jupyter-scheduler as its Lab dialog does; the job's id."""
    body = {
        "name": Path(path).stem,
        "input_uri": path,
        "output_formats": ["ipynb"],
        "runtime_environment_name": "",
    }
    r = await c.post("scheduler/jobs", json=body)
    if r.status_code >= 300:
        raise SystemExit(f"jupyter-scheduler refused the job: {r.status_code} {r.text[:300]}")
    return str(r.json()["job_id"])


def peer_done(job: dict[str, Any]) -> bool:
    # a job jupyter-scheduler made and has not started yet is STOPPED too (its table's
    # default) with no start_time: not an end
    if job["status"] not in ("COMPLETED", "FAILED", "STOPPED") or job.get("start_time") is None:
        return False
    if job["status"] != "COMPLETED":
        raise SystemExit(f"jupyter-scheduler's job ended {job['status']}: {job['status_message']}")
    return True


async def peer_job(c: httpx.AsyncClient, path: str) -> float:
    """One job through jupyter-scheduler: seconds until its API says it completed."""
    t0 = time.time()
    job_id = await peer_submit(c, path)
    while not peer_done((await c.get(f"scheduler/jobs/{job_id}")).json()):
        await asyncio.sleep(POLL_EVERY)
    return time.time() - t0


async def peer_jobs(c: httpx.AsyncClient, path: str, count: int) -> float:
    """``count`` jobs at once through jupyter-scheduler, its job list polled."""
    t0 = time.time()
    ids = set(await asyncio.gather(*(peer_submit(c, path) for _ in range(count))))
    while True:
        page = (await c.get("scheduler/jobs", params={"max_items": 4 * count})).json()["jobs"]
        if sum(1 for job in page if job["job_id"] in ids and peer_done(job)) == count:
            return time.time() - t0
        await asyncio.sleep(POLL_EVERY)


# -- the rounds ---------------------------------------------------------------------


async def alternate(rounds: int, runs: dict[str, Callable[[], Any]]) -> dict[str, list[Any]]:
    """``rounds`` rounds of each of ``runs``, their order turned every round (a neighbour's
    burst of work slows each alike); what each returned, and the load after each round."""
    got: dict[str, list[Any]] = {name: [] for name in [*runs, "load"]}
    names = list(runs)
    for i in range(rounds):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            got[name].append(await runs[name]())
        got["load"].append(os.getloadavg()[0])
    return got


async def measure(args: argparse.Namespace, work: Path) -> None:
    # stopped (a timeout's SIGTERM): the services, the jobs' groups and files go too
    main = asyncio.current_task()
    assert main is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main.cancel)
    at_once = args.at_once
    rounds = args.rounds or (2 if args.quick else 7)
    bursts = args.bursts or (1 if args.quick else 2)
    peer_rounds = 1 if args.quick else 3
    cases = args.cases.split(",")
    results: dict[str, dict[str, list[Any]]] = {}
    # each case's rows as soon as it is measured: a run cut short keeps what it measured
    how = (
        "watched through api/events, as the Jobs panel"
        if args.client == "watch"
        else f"asked every {POLL_EVERY * 1000:.0f} ms"
    )
    print(f"== submit -> done through the API ({how}) vs the runner alone")
    print(f"  {'case':<22}{'direct s':>9}{'service s':>10}{'difference':>11}{'ratio':>7}  load")
    async with (
        Service(work / "service", args.cgroups) as service,
        service.client(4) as c,
        contextlib.AsyncExitStack() as stack,
    ):
        one_job, jobs_at_once = partial(nbjobs_job, c), partial(nbjobs_jobs, c)
        if args.client == "watch":
            w = await stack.enter_async_context(Watcher(service))
            one_job, jobs_at_once = partial(watched_job, w, c), partial(watched_jobs, w, c)
        for case in cases:
            source = service.home / f"nb{case}.ipynb"
            nbformat.write(CASES[case](), source)
            name = source.name
            progress(f"{case} cells: {rounds} rounds of one job, {bursts} of {at_once} at once")
            await one_job(name)  # the first job of a service: imports, caches
            one = await alternate(
                rounds,
                {
                    "direct": partial(direct_job, service, source),
                    "service": partial(one_job, name),
                },
            )
            many = await alternate(
                bursts,
                {
                    "direct": partial(direct_jobs, service, source, at_once),
                    "service": partial(jobs_at_once, name, at_once),
                },
            )
            jobs = service.home / JOBS_DIR
            results[case] = r = {
                "direct": [took for took, _ in one["direct"]],
                "direct_own": [own for _, own in one["direct"]],
                "service": [seen for seen, _, _, _ in one["service"]],
                "started": [started for _, started, _, _ in one["service"]],
                "finished": [finished for _, _, finished, _ in one["service"]],
                "service_own": [
                    runner_own_run(jobs / job_id / STATUS_FILE) for *_, job_id in one["service"]
                ],
                "direct8": many["direct"],
                "service8": many["service"],
                "loads": one["load"] + many["load"],
            }
            print_case(case, r, at_once)
    print()
    if not args.peer_python:
        print(PEER_HOW)
        return
    print("== the same notebooks through jupyter-scheduler (its REST API, its local executor)")
    print(f"  {'case':<22}{'nbjobs s':>9}{'j-scheduler s':>14}{'ratio':>7}  load")
    async with Peer(args.peer_python, work / "peer") as p, p.client(4) as pc:
        for case in cases:
            name = f"nb{case}.ipynb"
            nbformat.write(CASES[case](), p.where / name)
            progress(f"{case} cells through jupyter-scheduler")
            await peer_job(pc, name)  # its first job: imports, caches
            # fewer rounds: each of its jobs imports jupyter-server's world afresh
            one = await alternate(peer_rounds, {"single": partial(peer_job, pc, name)})
            many = await alternate(1, {"at_once": partial(peer_jobs, pc, name, at_once)})
            both = {**one, **many, "load": one["load"] + many["load"]}
            print_peer_case(case, results[case], both, at_once)


def progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def loads(values: list[float]) -> str:
    return f"{min(values):.1f}-{max(values):.1f}"


def where_it_goes(r: dict[str, list[Any]], direct: float) -> str:
    """One job's difference in parts (medians, ms), from what the service recorded."""
    med = statistics.median
    started = med(r["started"])
    life = med([f - st for st, f in zip(r["started"], r["finished"], strict=True)])
    seen = med([s - f for s, f in zip(r["service"], r["finished"], strict=True)])
    return (
        f"    where: submit -> started_at {started * 1000:.0f} ms; started_at -> finished_at "
        f"{(life - direct) * 1000:+.0f} ms against the runner alone; finished_at -> seen "
        f"{seen * 1000:.0f} ms"
    )


def outside_the_run(r: dict[str, list[Any]]) -> str:
    """The difference without the runners' own runs (paired by round), held to the goal,
    and the own runs against each other."""
    med = statistics.median
    own_d, own_s = med(r["direct_own"]), med(r["service_own"])
    rest_d = med([t - o for t, o in zip(r["direct"], r["direct_own"], strict=True)])
    rest_s = med([t - o for t, o in zip(r["service"], r["service_own"], strict=True)])
    met = rest_s - rest_d < GOAL_SINGLE
    return (
        f"    the runner's own run (its status file): alone {own_d:.3f} s, under the service "
        f"{own_s:.3f} s ({own_s / own_d:.2f} x)\n"
        f"    around it: alone {rest_d:.3f} s (start-up, exit), through the service "
        f"{rest_s:.3f} s: the service adds {rest_s - rest_d:+.3f} s  goal < {GOAL_SINGLE} s: "
        f"{'met' if met else 'NOT met'}"
    )


def print_case(case: str, r: dict[str, list[Any]], at_once: int) -> None:
    """A case's rows: one job, and ``at_once`` jobs, direct against through the service."""
    med = statistics.median
    d, s = med(r["direct"]), med(r["service"])
    d8, s8 = med(r["direct8"]), med(r["service8"])
    rows = [
        (f"{case} cells, one", d, s, f"goal < {GOAL_SINGLE} s", s - d < GOAL_SINGLE),
        (
            f"{case} cells, {at_once} at once",
            d8,
            s8,
            f"goal <= {GOAL_AT_ONCE}x",
            s8 / d8 <= GOAL_AT_ONCE,
        ),
    ]
    for label, direct, service, goal, met in rows:
        line = f"  {label:<22}{direct:>9.3f}{service:>10.3f}{service - direct:>+11.3f}"
        line += f"{service / direct:>7.2f}  {loads(r['loads'])}"
        print(line + f"  {goal}: {'met' if met else 'NOT met'}", flush=True)
        if label.endswith("one"):
            print(where_it_goes(r, d), flush=True)
            print(outside_the_run(r), flush=True)


def print_peer_case(
    case: str, r: dict[str, list[Any]], p: dict[str, list[Any]], at_once: int
) -> None:
    """A case's rows: nbjobs' submit -> done against jupyter-scheduler's."""
    med = statistics.median
    for label, ours, theirs in (
        (f"{case} cells, one", med(r["service"]), med(p["single"])),
        (f"{case} cells, {at_once} at once", med(r["service8"]), med(p["at_once"])),
    ):
        line = f"  {label:<22}{ours:>9.3f}{theirs:>14.3f}{ours / theirs:>7.2f}  {loads(p['load'])}"
        print(line, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, for a smoke run")
    parser.add_argument("--rounds", type=int, default=0, help="rounds of one job per case")
    parser.add_argument(
        "--bursts", type=int, default=0, help="rounds of the jobs at once per case (default 2)"
    )
    parser.add_argument(
        "--at-once", type=int, default=AT_ONCE, help=f"jobs at once (default {AT_ONCE})"
    )
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated: 3, 300")
    parser.add_argument(
        "--cgroups",
        choices=["auto", "off"],
        default="auto",
        help="the service's backend.local.cgroups (auto: as nbjobs ships it)",
    )
    parser.add_argument(
        "--client",
        choices=["watch", "poll"],
        default="watch",
        help="how nbjobs' client learns a job ended: the events stream, as the Jobs panel "
        f"(watch, the default), or asking every {POLL_EVERY * 1000:.0f} ms (poll)",
    )
    parser.add_argument("--peer-python", help="a Python with jupyter-scheduler installed")
    args = parser.parse_args()
    if not 1 <= args.at_once <= MOST_AT_ONCE:
        parser.error(f"--at-once is between 1 and {MOST_AT_ONCE}")
    os.environ.pop("JUPYTERHUB_API_TOKEN", None)
    with tempfile.TemporaryDirectory(prefix="nbjobs-obench-") as tmp:
        asyncio.run(measure(args, Path(tmp)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

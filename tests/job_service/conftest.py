"""A real job service on loopback: tornado, SQLite in a temp folder, the local backend
running real job_runner processes with real kernels. Tokens stand in for the hub's."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from email import message_from_bytes
from email.message import Message
from pathlib import Path
from typing import Any

import httpx
import nbformat
import psutil
import pytest
import yaml
from aiosmtpd.controller import Controller
from nbjobs.job_service.app import JobServiceApp
from nbjobs.job_service.backends.local import _DETACHED
from nbjobs.job_service.backends.local_unrecorded import job_ref
from nbjobs.job_service.service import JobService
from tornado.httpserver import HTTPServer

from nbjobs.cgroups import Cgroups
from nbjobs.config import parse_config
from nbjobs.storage import user_folder
from tests.machine import INSTANCE, end_runner, scratch_folder, this_runs
from tests.ports import free_port

TOKENS = {
    "ada-token": "ada",
    "bob-token": "bob",
    "root-token": "root",
    "eve-token": "eve",
    "cy-token": "cy",
}
GROUPS = {"ada": ["students"], "bob": ["students"], "eve": ["staff"], "cy": ["staff", "students"]}

BASE_CONFIG: dict[str, Any] = {
    "backend": {
        "kind": "local",
        "local": {"gpus": [0, 1], "slots_per_gpu": 2, "cpu_slots": 2, "instance": INSTANCE},
    },
    "flavors": [
        {"name": "cpu", "gpus": 0, "time_limit": "10m"},
        {"name": "gpu", "display_name": "1 GPU", "gpus": 1, "time_limit": "10m"},
        {"name": "gpu2", "gpus": 2},
        {"name": "slice", "gpus": 1, "shared": True},
        {"name": "staff-only", "gpus": 1, "groups": ["staff"]},
        {"name": "short", "gpus": 0, "time_limit": 3},
    ],
    "quotas": {
        "default": {"max_running_gpus": 2, "max_queued_jobs": 300},
        "users": {"root": {}},  # no limits: tests of capacity use root
    },
    "admin": {"users": ["root"]},
}


def notebook(*cells: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    return nb


@dataclass
class Service:
    url: str
    root: Path
    app: JobServiceApp
    service: JobService
    server: HTTPServer
    config_file: Path

    def home(self, user: str) -> Path:
        folder = user_folder(self.service.config.storage, user)
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def write(self, user: str, relpath: str, *cells: str) -> Path:
        path = self.home(user) / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(notebook(*cells), path)
        return path

    def script(self, user: str, relpath: str, *blocks: str) -> Path:
        """A Python script of ``user``'s, its ``blocks`` one after the other: a job for a
        test whose subject is the queue or the service, not a notebook's run (a script job
        is a real runner and process too, without a kernel's half second of CPU)."""
        path = self.home(user) / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(blocks) + "\n")
        return path

    def gate(self, user: str, name: str = "gate") -> tuple[str, Callable[[], None]]:
        """A cell that holds a job of ``user``'s until the test opens the gate, and the
        call that opens it: a job that must still be running while the test looks holds
        on an event the test sends, not for a time a loaded machine may outlast."""
        mark = self.home(user) / f".{name}-open"
        mark.unlink(missing_ok=True)
        cell = f"import os, time\nwhile not os.path.exists({str(mark)!r}):\n    time.sleep(0.05)"
        return cell, mark.touch

    def client(self, user: str | None, timeout: float | None = 60) -> httpx.AsyncClient:
        token = {v: k for k, v in TOKENS.items()}.get(user or "", "")
        headers = {"Authorization": f"token {token}"} if user else {}
        # plain HTTP: verify=False spares loading the CA bundle for TLS never spoken,
        # 43 ms of CPU a client (and wait() makes one every tenth of a second)
        return httpx.AsyncClient(
            base_url=self.url + "api/", headers=headers, timeout=timeout, verify=False
        )

    async def submit(self, user: str, path: str, flavor: str = "cpu", **extra: Any) -> dict:
        async with self.client(user) as c:
            r = await c.post("jobs", json={"path": path, "flavor": flavor, **extra})
        assert r.status_code == 201, r.text
        return r.json()

    async def job(self, user: str, job_id: str) -> dict:
        async with self.client(user) as c:
            r = await c.get(f"jobs/{job_id}")
        assert r.status_code == 200, r.text
        return r.json()

    async def wait(
        self,
        user: str,
        job_id: str,
        until: Callable[[dict], bool] | None = None,
        timeout: float = 90,
    ) -> dict:
        done = until or (lambda j: j["state"] in ("succeeded", "failed", "cancelled", "timed_out"))
        deadline = time.monotonic() + timeout
        # one client, one connection for every look: a new one each time cost the test's
        # process 8 ms of CPU a look instead of 5, ten looks a second while a job runs
        async with self.client(user) as c:
            while True:
                r = await c.get(f"jobs/{job_id}")
                assert r.status_code == 200, r.text
                job = r.json()
                if done(job):
                    return job
                if time.monotonic() > deadline:
                    raise AssertionError(f"job {job_id} stuck: {job}")
                await asyncio.sleep(0.1)


_TEMPLATE: list[Path] = []


def new_database(path: Path) -> None:
    """Put a job database at the newest schema at ``path`` (which must not exist): a copy
    of one this test worker made once through the service's own code path
    (``job_service.db.connect``, every revision from the base one), where each new
    database would run them all again (a tenth to a third of a second of CPU, and
    Alembic's import). The copy is the schema alone: no instance id, no job."""
    from nbjobs.job_service.db import connect, engine_of

    if not _TEMPLATE:
        made = scratch_folder("nbjobs-template-db-") / "jobs.sqlite"
        engine_of(connect(f"sqlite:///{made}")).dispose()  # the last close ends the WAL
        assert not made.with_name("jobs.sqlite-wal").exists(), "the template's WAL is left"
        _TEMPLATE.append(made)
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_TEMPLATE[0], path)
    path.chmod(0o600)  # as the service makes a new one


async def start_service(
    tmp_path: Path, overrides: dict[str, Any] | None = None, argv: tuple[str, ...] = ()
) -> Service:
    data = this_runs({**BASE_CONFIG, **(overrides or {})})
    data.setdefault("storage", {"root": str(tmp_path / "home")})
    if "database" not in data:  # the test asked for no database of its own
        database = tmp_path / "jobs.sqlite"
        if not database.exists():
            new_database(database)
        data["database"] = {"url": f"sqlite:///{database}"}
    config_file = tmp_path / "nbjobs.yaml"
    config_file.write_text(yaml.safe_dump(data))
    parse_config(config_file.read_text())  # fail early on a bad test config
    port = free_port()
    app = JobServiceApp()
    app.initialize(
        [
            f"--config={config_file}",
            f"--port={port}",
            "--JobServiceApp.prefix=/services/nbjobs/",
            f"--StaticTokenAuth.tokens={TOKENS!r}",
            f"--StaticTokenAuth.user_groups={GROUPS!r}",
            "--LocalBackend.cancel_grace=5",
            "--LocalBackend.poll_interval=0.1",
            *argv,
        ]
    )
    service = app.make_service()
    await service.start()
    server = HTTPServer(app.make_web_app(service, app.make_auth()))
    server.listen(port, "127.0.0.1")
    url = f"http://127.0.0.1:{port}/services/nbjobs/"
    return Service(url, tmp_path, app, service, server, config_file)


async def stop_service(svc: Service) -> None:
    """Stop listening, close the connections clients left open (a socket left to the
    garbage collector warns in whichever test runs next), then stop the service."""
    svc.server.stop()
    await svc.server.close_all_connections()
    await svc.service.stop()


#: a test of what the local backend does with a job's control group
needs_cgroups = pytest.mark.skipif(
    not Cgroups().enforced, reason="needs root and the kernel's control groups (CI has both)"
)


async def stop_all(svc: Service) -> None:
    """Cancel what a test left running, then stop the service."""
    backend = svc.service.backend
    for job in list(backend.running.values()):  # type: ignore[attr-defined]
        await backend.cancel(job_ref(job.job_id, [(job.pid, job.created)]))
    await stop_service(svc)


def record_gpu_time(
    svc: Service,
    user: str,
    *,
    gpus: int,
    started_ago: timedelta,
    finished_ago: timedelta,
    groups: list[str] | None = None,
    node: str | None = None,
) -> str:
    """Record a finished GPU job in the service's database, as if it had run then (on
    ``node``, when given)."""
    from nbjobs.job_service.db import JobRecord

    now = datetime.now(timezone.utc)
    job_id = uuid.uuid4().hex[:12]
    folder = svc.home(user)
    with svc.service.sessions() as db:
        seq = svc.service.submissions.numbers.next()
        db.add(
            JobRecord(
                id=job_id,
                seq=seq,
                user=user,
                groups=groups if groups is not None else GROUPS.get(user, []),
                name="earlier",
                flavor="gpu2" if gpus == 2 else "gpu",
                state="succeeded",
                priority=0,
                path="earlier.ipynb",
                output_path="earlier.out.ipynb",
                source_file=str(folder / "earlier.ipynb"),
                snapshot_file=str(folder / ".nbjobs" / job_id / "input.ipynb"),
                output_file=str(folder / "earlier.out.ipynb"),
                job_dir=str(folder / ".nbjobs" / "jobs" / job_id),
                parameters={},
                gpu_count=gpus,
                gpus=[str(i) for i in range(gpus)],
                submitted_at=now - started_ago,
                started_at=now - started_ago,
                finished_at=now - finished_ago,
                exit_code=0,
                node=node,
            )
        )
        db.commit()
    return job_id


@pytest.fixture
async def svc(tmp_path) -> AsyncIterator[Service]:
    s = await start_service(tmp_path)
    try:
        yield s
    finally:
        # Jobs a test left running would outlive it: cancel them.
        await stop_all(s)


@pytest.fixture(autouse=True)
def _no_runner_outlives_its_test() -> Iterator[None]:
    """A service stopped while its jobs run leaves their runners going, as it should (the
    next service adopts them). When the test that did so ends, nobody will: kill each of
    those runners with its kernels, so that they neither load the machine for the tests
    after nor linger past the test session, and remove its job's temporary folders (the
    job's id names them), which no service will."""
    yield
    while _DETACHED:
        process = _DETACHED.pop()
        if process.poll() is None:
            end_runner(psutil.Process(process.pid), process.args)
            process.wait(timeout=30)
        else:
            end_runner(None, process.args)  # its folders, where its job left them


@pytest.fixture
async def start(tmp_path) -> AsyncIterator[Callable[..., Any]]:
    """Start (another) service over the same folder and database; the ones a failed test
    left running are stopped after it (its sockets would fail the next test)."""
    started: list[Service] = []

    async def start_one(overrides: dict[str, Any] | None = None, argv: tuple[str, ...] = ()):
        started.append(await start_service(tmp_path, overrides, argv))
        return started[-1]

    yield start_one
    for service in started:
        if not service.service.stopping:
            await stop_service(service)


def _postgres_bin() -> Path | None:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    return found[-1].parent if found else None


def new_postgres_database(
    server_url: str, tmp_path: Path, prefix: str = "t", template: str | None = None
) -> str:
    """A new database on the test session's PostgreSQL server, named after the test's
    folder: empty, or a copy of the database named ``template``; its URL."""
    import sqlalchemy

    name = f"{prefix}_{tmp_path.name.lower().replace('-', '_')[:40]}"
    copy = f' TEMPLATE "{template}"' if template else ""
    engine = sqlalchemy.create_engine(server_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"{copy}'))
    engine.dispose()
    return server_url.rsplit("/", 1)[0] + f"/{name}"


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A real PostgreSQL server (Debian's package) on loopback, for this test session.

    PostgreSQL refuses to run as root, so as root it runs as ``nobody``.
    """
    import os
    import shutil
    import subprocess

    bindir = _postgres_bin()
    if bindir is None:
        raise RuntimeError("PostgreSQL is not installed; scripts/install.sh --dev installs it")

    # Not under pytest's tmp folder: it is private to root, and the server runs as nobody.
    data = Path(tempfile.mkdtemp(prefix="nbjobs-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(data, "nobody", "nogroup")
        as_user = ["runuser", "-u", "nobody", "--"]
    run = lambda *cmd: subprocess.run([*as_user, *cmd], check=True, capture_output=True)  # noqa: E731
    run(str(bindir / "initdb"), "-D", str(data / "db"), "-A", "trust", "-U", "nbjobs")
    port = free_port()
    command = [*as_user, str(bindir / "postgres"), "-D", str(data / "db"), "-p", str(port)]
    command += ["-k", str(data), "-h", "127.0.0.1", "-c", "fsync=off"]
    server = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"postgresql+psycopg2://nbjobs@127.0.0.1:{port}/postgres"
    import sqlalchemy

    deadline = time.monotonic() + 30
    while True:
        try:
            sqlalchemy.create_engine(url).connect().close()
            break
        except sqlalchemy.exc.OperationalError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    yield url
    server.terminate()
    server.wait(timeout=30)
    shutil.rmtree(data, ignore_errors=True)


class Inbox:
    """aiosmtpd's handler: keeps every mail it is given."""

    def __init__(self) -> None:
        self.mails: list[Message] = []

    async def handle_DATA(self, server, session, envelope):
        self.mails.append(message_from_bytes(envelope.content))
        return "250 OK"


@pytest.fixture
def smtp():
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    yield controller.port, inbox
    controller.stop()

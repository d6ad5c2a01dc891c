"""A fake Kubernetes API server per test, a KubernetesBackend pointed at it, and a record
of every API call the backend made in this session (checked against the shipped Role)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from nbjobs.job_service.backends.kubernetes import KubernetesBackend

from nbjobs.config import NbjobsConfig
from tests.job_service.conftest import (
    Service,
    new_database,
    new_postgres_database,
    postgres_url,  # noqa: F401 (a fixture)
    stop_service,
)
from tests.machine import scratch_folder

from .fake_apiserver import FakeApiServer

ROOT = Path(__file__).resolve().parents[2]
RBAC_FILE = ROOT / "hub_config" / "examples" / "kubernetes" / "rbac.yaml"
NAMESPACE = "gpu-jobs"
#: the shared storage as the service sees it (the runner writes each job's log there)
STORAGE_ROOT = scratch_folder("nbjobs-k8s-storage-")

#: every (verb, API group, resource) any backend of this session sent
SENT: set[tuple[str, str, str]] = set()


def allowed_by_rbac() -> tuple[set[tuple[str, str, str]], set[tuple[str, str, str]]]:
    """The Role's and the optional ClusterRole's rules in rbac.yaml: (verb, group, resource)."""
    role: set[tuple[str, str, str]] = set()
    cluster: set[tuple[str, str, str]] = set()
    for doc in yaml.safe_load_all(RBAC_FILE.read_text()):
        if not doc or doc.get("kind") not in ("Role", "ClusterRole"):
            continue
        into = role if doc["kind"] == "Role" else cluster
        for rule in doc.get("rules") or []:
            for group in rule.get("apiGroups") or []:
                for resource in rule.get("resources") or []:
                    for verb in rule.get("verbs") or []:
                        into.add((verb, group, resource))
    return role, cluster


@pytest.fixture(scope="session", autouse=True)
def _calls_stay_within_the_shipped_role() -> Any:
    """After the whole session: the backend used nothing the RBAC example does not grant."""
    yield
    role, cluster = allowed_by_rbac()
    outside = SENT - role - cluster
    assert not outside, f"the backend made API calls that rbac.yaml does not allow: {outside}"


def config(**kubernetes: Any) -> NbjobsConfig:
    return NbjobsConfig.model_validate(
        {
            "storage": {
                "root": str(STORAGE_ROOT),
                "user_dir": "home/{username}",
                "volume": {"nfs": {"server": "nfs.example.org", "path": "/export"}},
            },
            "backend": {
                "kind": "kubernetes",
                "kubernetes": {
                    "namespace": NAMESPACE,
                    "default_image": "example.org/nbjobs:1",
                    "termination_grace_seconds": 2,
                    **kubernetes,
                },
            },
            "flavors": [
                {
                    "name": "a100",
                    "gpus": 1,
                    "memory": "16Gi",
                    "cpu": "4",
                    "node_selector": {"gpu": "a100"},
                    "time_limit": 600,
                },
                {"name": "a100-8", "gpus": 8, "node_selector": {"gpu": "a100"}},
                {"name": "cpu", "gpus": 0, "cpu": "1", "memory": "1Gi"},
            ],
        }
    )


@pytest.fixture
async def fake() -> AsyncIterator[FakeApiServer]:
    server = FakeApiServer(bookmark_interval=0.1)
    await server.start()
    try:
        yield server
    finally:
        SENT.update(server.requests)
        await server.stop()


@pytest.fixture
def kubeconfig(fake: FakeApiServer, tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(fake.kubeconfig()))
    return path


@pytest.fixture
async def make_backend(
    kubeconfig: Path,
) -> AsyncIterator[Callable[..., KubernetesBackend]]:
    made: list[KubernetesBackend] = []

    def make(cfg: NbjobsConfig | None = None, **traits: Any) -> KubernetesBackend:
        traits.setdefault("retry_delay", 0.05)
        traits.setdefault("connect_timeout", 5.0)
        backend = KubernetesBackend(cfg or config(), kubeconfig=str(kubeconfig), **traits)
        made.append(backend)
        return backend

    yield make
    for backend in made:
        await backend.shutdown()


async def eventually(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    """Wait until ``check()`` is truthy (the backend follows the cluster asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"still not true after {timeout} s: {check}")
        await asyncio.sleep(0.02)


def runner_writes_log(job_dir: Path, text: str) -> None:
    """Append to a job's log as its runner does in the pod (``--log-file``): no runner
    runs against the fake, so a test writes what it would have."""
    with (job_dir / "log.txt").open("a", encoding="utf-8") as log:
        log.write(text)


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The job database of a service test: each runs on SQLite and on a real PostgreSQL
    server (``postgres_url``, Debian's package), in a database of its own, a copy of one
    the service's migrations brought to the newest schema once per session (migrating
    each test's anew took a quarter of the service tests' CPU; tests/job_service tests
    the migrations themselves)."""
    if request.param == "sqlite":
        new_database(tmp_path / "jobs.sqlite")
        return f"sqlite:///{tmp_path / 'jobs.sqlite'}"
    server = request.getfixturevalue("postgres_url")
    template = request.getfixturevalue("_migrated_postgres")
    return new_postgres_database(server, tmp_path, "d", template)


@pytest.fixture(scope="session")
def _migrated_postgres(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> str:
    """The name of a database at the newest schema, for ``CREATE DATABASE ... TEMPLATE``."""
    server = request.getfixturevalue("postgres_url")
    from nbjobs.job_service.db import connect, engine_of

    url = new_postgres_database(server, tmp_path_factory.mktemp("migrated"), "template")
    engine_of(connect(url)).dispose()  # a template database must have no one connected
    return url.rsplit("/", 1)[1]


#: the job database of the running service test (see ``running_services``)
_DATABASE: dict[str, str] = {}


@pytest.fixture
async def running_services(database: str) -> AsyncIterator[list[Service]]:
    started: list[Service] = []
    _DATABASE["url"] = database  # every test here runs on SQLite and on PostgreSQL
    try:
        yield started
    finally:
        _DATABASE.clear()
        for svc in started:
            await stop_service(svc)

"""``{prefix}metrics``: the job service in Prometheus' text format, read with
prometheus_client's own parser; who may scrape it; the Grafana dashboard's queries."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest
from nbjobs.job_service.auth import HubTokenAuth, StaticTokenAuth
from nbjobs.job_service.metrics import METRICS
from prometheus_client.parser import text_string_to_metric_families

from .conftest import TOKENS, Service, start_service, stop_all
from .telemetry_helpers import GIB, insert_job, sample, write_status

DASHBOARD = Path(__file__).resolve().parents[2] / "hub_config" / "examples" / "grafana-nbjobs.json"
TOKEN = {v: k for k, v in TOKENS.items()}
#: zed may use no GPU at once: his GPU jobs stay queued, whatever else happens
QUOTAS = {
    "default": {"max_running_gpus": 2, "max_queued_jobs": 300},
    "users": {"root": {}, "zed": {"max_running_gpus": 0}},
}


async def scrape(svc: Service, user: str | None) -> httpx.Response:
    headers = {"Authorization": f"token {TOKEN[user]}"} if user else {}
    async with httpx.AsyncClient(headers=headers, timeout=30) as c:
        return await c.get(svc.url + "metrics")


def parsed(response: httpx.Response) -> dict[str, Any]:
    """{family name: family}, through prometheus_client's parser."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=")
    return {f.name: f for f in text_string_to_metric_families(response.text)}


def value(families: dict[str, Any], sample_name: str, **labels: str) -> float:
    """The value of the one sample of this name whose labels include ``labels``."""
    samples = [s for family in families.values() for s in family.samples]
    found = [
        s.value
        for s in samples
        if s.name == sample_name and all(s.labels.get(k) == v for k, v in labels.items())
    ]
    assert len(found) == 1, (sample_name, labels, [s for s in samples if s.name == sample_name])
    return float(found[0])


@pytest.fixture
async def svc(tmp_path):
    s = await start_service(tmp_path, {"quotas": QUOTAS})
    await s.service.telemetry.stop()  # the test runs the collector's passes
    try:
        yield s
    finally:
        await stop_all(s)


async def test_a_scrape_without_a_token_is_401_and_a_plain_users_is_403(svc):
    nobody, plain = await scrape(svc, None), await scrape(svc, "ada")

    assert nobody.status_code == 401
    assert plain.status_code == 403
    assert "custom:nbjobs:metrics" in plain.json()["message"]
    async with httpx.AsyncClient(headers={"Authorization": "token wrong"}) as c:
        assert (await c.get(svc.url + "metrics")).status_code == 401
    async with svc.client("ada") as c:  # the API's own paths answer as before
        assert (await c.get("health")).status_code == 200


async def test_an_admins_scrape_counts_the_jobs_the_database_holds(svc):
    for _ in range(3):
        insert_job(svc.service, "zed", state="queued", flavor="gpu", submitted_ago=600)
    insert_job(svc.service, "zed", state="queued", flavor="slice")
    for state in ("succeeded", "succeeded", "failed"):
        insert_job(svc.service, "ada", state=state, flavor="cpu", gpu_count=0, finished_ago=5)
    busy, busy_dir = insert_job(svc.service, "ada", flavor="gpu2", gpu_count=2, node="gpu-a")
    write_status(busy_dir / "status.json", telemetry=sample(datetime.now(timezone.utc), [80, 40]))
    idle, idle_dir = insert_job(svc.service, "bob", flavor="gpu", gpu_count=1, node="gpu-a")
    write_status(idle_dir / "status.json", telemetry=sample(datetime.now(timezone.utc), [5]))
    _, stale_dir = insert_job(svc.service, "cy", flavor="gpu", gpu_count=1, node="gpu-b")
    long_ago = datetime.now(timezone.utc) - timedelta(hours=1)
    write_status(stale_dir / "status.json", "running", telemetry=sample(long_ago, [99]))
    await svc.service.telemetry.collect()

    families = parsed(await scrape(svc, "root"))

    assert value(families, "nbjobs_jobs", state="queued", flavor="gpu") == 3
    assert value(families, "nbjobs_jobs", state="succeeded", flavor="cpu") == 2
    assert value(families, "nbjobs_jobs", state="failed", flavor="cpu") == 1
    assert value(families, "nbjobs_jobs", state="cancelled", flavor="gpu") == 0
    # the started jobs' runners say they run (the records still say starting or running)
    assert value(families, "nbjobs_jobs", state="running", flavor="gpu") == 2
    assert value(families, "nbjobs_queue_length", flavor="gpu") == 3
    assert value(families, "nbjobs_queue_length", flavor="slice") == 1
    assert value(families, "nbjobs_queue_length", flavor="cpu") == 0
    assert 590 < value(families, "nbjobs_queue_oldest_wait_seconds", flavor="gpu") < 700
    # the backend's GPUs (the local one's: 0 and 1), and what the jobs hold and use
    assert value(families, "nbjobs_gpus_total", flavor="gpu") == 2
    assert value(families, "nbjobs_gpus_allocated", flavor="gpu2", node="gpu-a") == 2
    assert value(families, "nbjobs_gpus_busy", flavor="gpu2", node="gpu-a") == 1.2
    assert value(families, "nbjobs_gpus_allocated", flavor="gpu", node="gpu-a") == 1
    assert value(families, "nbjobs_gpus_busy", flavor="gpu", node="gpu-a") == 0.05
    # a sample an hour old is a runner that stopped sampling: not what the GPU does now
    assert value(families, "nbjobs_gpus_allocated", flavor="gpu", node="gpu-b") == 1
    assert value(families, "nbjobs_gpus_busy", flavor="gpu", node="gpu-b") == 0
    # each running job, by name
    job = {"job": busy, "user": "ada", "flavor": "gpu2", "node": "gpu-a"}
    assert value(families, "nbjobs_job_gpu_utilization_ratio", **job) == 0.6
    assert value(families, "nbjobs_job_gpu_memory_used_bytes", **job) == 4 * GIB
    assert value(families, "nbjobs_job_gpu_memory_total_bytes", **job) == 80 * GIB
    assert value(families, "nbjobs_job_gpu_utilization_ratio", job=idle, user="bob") == 0.05
    assert value(families, "nbjobs_jobs_unlisted") == 0
    assert value(families, "nbjobs_backend_start_failures_total", flavor="gpu") == 0
    assert value(families, "nbjobs_notification_errors_total") == 0
    assert set(families) == set(METRICS)  # every family, each named in METRICS
    assert families["nbjobs_queue_wait_seconds"].type == "histogram"
    assert families["nbjobs_backend_start_failures"].type == "counter"


async def test_a_started_job_is_observed_in_the_wait_and_dispatch_histograms(svc):
    svc.script("ada", "a.py", "1")
    job = await svc.submit("ada", "a.py", "cpu")
    await svc.wait("ada", job["id"])

    families = parsed(await scrape(svc, "root"))

    assert value(families, "nbjobs_queue_wait_seconds_count", flavor="cpu") == 1
    assert value(families, "nbjobs_queue_wait_seconds_bucket", flavor="cpu", le="+Inf") == 1
    assert value(families, "nbjobs_queue_wait_seconds_sum", flavor="cpu") < 60
    assert value(families, "nbjobs_dispatch_latency_seconds_count", flavor="cpu") == 1
    assert value(families, "nbjobs_jobs", state="succeeded", flavor="cpu") == 1


async def test_a_start_the_backend_refuses_is_counted(svc):
    async def refuse(spec: Any) -> Any:
        raise RuntimeError("the cluster said no")

    svc.service.backend.start = refuse  # type: ignore[method-assign]
    svc.script("ada", "a.py", "1")
    job = await svc.submit("ada", "a.py", "gpu")
    assert (await svc.wait("ada", job["id"]))["state"] == "failed"

    families = parsed(await scrape(svc, "root"))

    assert value(families, "nbjobs_backend_start_failures_total", flavor="gpu") == 1
    assert value(families, "nbjobs_backend_start_failures_total", flavor="cpu") == 0


async def test_per_job_series_are_bounded_the_largest_jobs_first(svc):
    svc.service.metrics.max_jobs = 2
    now = datetime.now(timezone.utc)
    jobs = {}
    for user, gpus in (("ada", 1), ("bob", 2), ("cy", 1), ("eve", 1)):
        job_id, jobdir = insert_job(svc.service, user, flavor="gpu", gpu_count=gpus)
        write_status(jobdir / "status.json", telemetry=sample(now, [50.0] * gpus))
        jobs[user] = job_id
    await svc.service.telemetry.collect()

    families = parsed(await scrape(svc, "root"))

    listed = {s.labels["user"] for s in families["nbjobs_job_gpu_utilization_ratio"].samples}
    assert len(listed) == 2
    assert "bob" in listed  # two GPUs
    assert value(families, "nbjobs_jobs_unlisted") == 2
    # all of them, on the one machine they run on
    node = svc.service.backend.node
    assert value(families, "nbjobs_gpus_busy", flavor="gpu", node=node) == 2.5


async def test_an_admin_grants_scraping_to_a_user_or_a_group(tmp_path):
    svc = await start_service(
        tmp_path,
        argv=("--Authenticator.metrics_users=eve", "--Authenticator.metrics_groups=ops"),
    )
    try:
        assert (await scrape(svc, "eve")).status_code == 200
        assert (await scrape(svc, "bob")).status_code == 403
        auth = svc.app.make_auth()
        assert isinstance(auth, StaticTokenAuth)
        auth.user_groups = {"cy": ["ops"]}
        assert await auth.may_scrape(TOKEN["cy"]) is True
        assert await auth.may_scrape("nobody's") is None
        async with svc.client("eve") as eve:  # scraping grants nothing else
            assert (await eve.get("jobs", params={"user": "ada"})).status_code == 403
    finally:
        await stop_all(svc)


async def test_in_a_hub_the_metrics_scope_grants_scraping_to_a_service_or_user():
    auth = HubTokenAuth()  # no hub here: its answers for each token stand in below
    answers = {
        "prometheus": {
            "kind": "service",
            "name": "prometheus",
            "scopes": ["custom:nbjobs:metrics"],
        },
        "other-service": {"kind": "service", "name": "x", "scopes": ["read:users"]},
        "watcher": {"kind": "user", "name": "w", "scopes": ["custom:nbjobs:metrics"]},
        "hub-admin": {"kind": "user", "name": "boss", "admin": True, "scopes": []},
        "student": {"kind": "user", "name": "ada", "groups": ["students"], "scopes": []},
    }

    async def hub_model(token: str) -> dict[str, Any] | None:
        return answers.get(token)

    auth._hub_model = hub_model  # type: ignore[method-assign]

    assert await auth.may_scrape("prometheus") is True
    assert await auth.may_scrape("watcher") is True
    assert await auth.may_scrape("hub-admin") is True
    assert await auth.may_scrape("other-service") is False
    assert await auth.may_scrape("student") is False
    assert await auth.may_scrape("revoked") is None


def dashboard_metric_names() -> set[str]:
    board = json.loads(DASHBOARD.read_text())
    exprs = [
        target["expr"]
        for panel in board["panels"]
        for target in panel.get("targets", [])
        if "expr" in target
    ]
    exprs += [v.get("query", "") for v in board.get("templating", {}).get("list", [])]
    assert exprs
    return {name for expr in exprs for name in re.findall(r"\bnbjobs_[a-z_]+", str(expr))}


async def test_the_grafana_dashboard_queries_only_what_the_service_exports(svc):
    svc.script("ada", "a.py", "1")
    await svc.wait("ada", (await svc.submit("ada", "a.py", "cpu"))["id"])
    _, jobdir = insert_job(svc.service, "ada", flavor="gpu")
    write_status(jobdir / "status.json", telemetry=sample(datetime.now(timezone.utc), [50.0]))
    await svc.service.telemetry.collect()
    families = parsed(await scrape(svc, "root"))
    family_of = {s.name: name for name, f in families.items() for s in f.samples}
    family_of.update({name: name for name in families})  # a family with no series yet

    queried = dashboard_metric_names()

    assert queried - set(family_of) == set()  # every name it queries is exported
    assert {family_of[n] for n in queried} == set(METRICS)  # and it shows every family

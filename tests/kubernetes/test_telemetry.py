"""A GPU job's telemetry on the Kubernetes backend, against the fake API server: the
series while it runs, the Prometheus view of its node, its summary when it ends.

The runner does not run here (there are no pods): the test writes the status file
with the telemetry a runner in the pod writes, and plays the kubelet."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import httpx
from nbjobs.job_service.db import JobRecord
from prometheus_client.parser import text_string_to_metric_families

from tests.job_service.conftest import TOKENS, Service
from tests.job_service.telemetry_helpers import GIB, sample, summary, write_status

from .conftest import NAMESPACE, eventually
from .test_service import settings, start, status_file

ROOT_TOKEN = {v: k for k, v in TOKENS.items()}["root"]


async def scrape(svc: Service) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an admin's scrape: (name, sorted labels) -> value."""
    async with httpx.AsyncClient(headers={"Authorization": f"token {ROOT_TOKEN}"}) as c:
        response = await c.get(svc.url + "metrics")
    assert response.status_code == 200, response.text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


async def job_metrics(svc: Service, job_id: str) -> dict:
    async with svc.client("ada") as c:
        r = await c.get(f"jobs/{job_id}/metrics")
    assert r.status_code == 200, r.text
    return r.json()


async def test_a_gpu_jobs_telemetry_from_its_pod_to_the_api_and_prometheus(
    fake, kubeconfig, tmp_path, running_services
):
    fake.add_node("gpu-0", {"gpu": "a100"}, {"nvidia.com/gpu": "2"})
    svc = await start(tmp_path, kubeconfig, settings(tmp_path))
    running_services.append(svc)
    await svc.service.telemetry.stop()  # the test runs the collector's passes
    svc.write("ada", "train.ipynb", "import time; time.sleep(3600)")
    job = await svc.submit("ada", "train.ipynb", "a100")
    name = f"nbjobs-{job['id']}"
    await eventually(lambda: fake.get("jobs", NAMESPACE, name))
    pod = fake.start_pod(name, NAMESPACE, "gpu-0")["metadata"]["name"]
    fake.run_pod(pod, NAMESPACE)

    # The runner in the pod samples its GPU: busy 4 % for ten minutes so far.
    status = status_file(svc, "ada", job["id"])
    now = datetime.now(timezone.utc)
    write_status(
        status,
        "running",
        telemetry=sample(now - timedelta(seconds=10), [4.0]),
        telemetry_summary=summary([4.0], 600.0),
        cells_total=1,
    )
    await svc.wait("ada", job["id"], lambda j: j["state"] == "running")
    assert await svc.service.telemetry.collect() == 1

    live = await job_metrics(svc, job["id"])
    assert [s["gpu_utilization_percent"] for s in live["samples"]] == [4.0]
    assert live["summary"]["gpu_allocated_seconds"] == 600.0
    assert live["hint"] == (
        "GPU busy 4 % on average: a CPU or a smaller GPU flavor would do "
        "(its GPU memory peaked at 2.0 GiB of 40.0 GiB)"
    )
    metrics = await scrape(svc)
    labels = (("flavor", "a100"), ("job", job["id"]), ("node", "gpu-0"), ("user", "ada"))
    assert metrics[("nbjobs_job_gpu_utilization_ratio", labels)] == 0.04
    assert metrics[("nbjobs_job_gpu_memory_used_bytes", labels)] == 2 * GIB
    on_node = (("flavor", "a100"), ("node", "gpu-0"))
    assert metrics[("nbjobs_gpus_allocated", on_node)] == 1
    assert metrics[("nbjobs_gpus_busy", on_node)] == 0.04
    assert metrics[("nbjobs_gpus_total", (("flavor", "a100"),))] == 2  # the node's, as watched
    assert metrics[("nbjobs_gpus_free", (("flavor", "a100"),))] == 1
    assert metrics[("nbjobs_jobs", (("flavor", "a100"), ("state", "running")))] == 1

    # It ends; the final status carries the whole run's summary and the last sample.
    write_status(
        status,
        "succeeded",
        telemetry=sample(now, [6.0]),
        telemetry_summary=summary([5.0], 900.0),
        cells_total=1,
        cells_done=1,
        exit_code=0,
    )
    fake.finish_pod(pod, NAMESPACE, exit_code=0)
    done = await svc.wait("ada", job["id"], timeout=20)
    assert done["state"] == "succeeded"

    ended = await job_metrics(svc, job["id"])
    assert [s["gpu_utilization_percent"] for s in ended["samples"]] == [4.0, 6.0]
    assert ended["summary"]["gpu_busy_seconds"] == 45.0
    assert ended["hint"].startswith("GPU busy 5 % on average")
    with svc.service.sessions() as db:
        record = db.get(JobRecord, job["id"])
        assert record is not None
        assert (record.gpu_busy_seconds, record.gpu_allocated_seconds) == (45.0, 900.0)
        assert record.gpu_memory_peak_bytes == 2 * GIB  # BIGINT on PostgreSQL too
    metrics = await scrape(svc)
    assert metrics[("nbjobs_jobs", (("flavor", "a100"), ("state", "succeeded")))] == 1
    assert ("nbjobs_gpus_allocated", on_node) not in metrics
    assert not [k for k in metrics if k[0] == "nbjobs_job_gpu_utilization_ratio"]
    assert metrics[("nbjobs_queue_wait_seconds_count", (("flavor", "a100"),))] == 1


async def test_an_evicted_attempts_summary_is_not_kept_when_the_job_runs_again(
    fake, kubeconfig, tmp_path, running_services
):
    fake.add_node("gpu-0", {"gpu": "a100"}, {"nvidia.com/gpu": "1"})
    data = settings(tmp_path)
    data["flavors"][0]["requeue_on_eviction"] = 1
    svc = await start(tmp_path, kubeconfig, data)
    running_services.append(svc)
    await svc.service.telemetry.stop()
    svc.write("ada", "long.ipynb", "1")
    job = await svc.submit("ada", "long.ipynb", "a100")
    first = f"nbjobs-{job['id']}"
    await eventually(lambda: fake.get("jobs", NAMESPACE, first))
    pod = fake.start_pod(first, NAMESPACE, "gpu-0")["metadata"]["name"]
    fake.run_pod(pod, NAMESPACE)
    write_status(
        status_file(svc, "ada", job["id"]),
        "running",
        telemetry=sample(datetime.now(timezone.utc), [70.0]),
        telemetry_summary=summary([70.0], 300.0),
    )
    await svc.service.telemetry.collect()
    assert (await job_metrics(svc, job["id"]))["summary"]["gpu_busy_seconds"] == 210.0

    fake.finish_pod(pod, NAMESPACE, exit_code=143, disruption=("EvictionByEvictionAPI", "x"))
    await eventually(lambda: fake.get("jobs", NAMESPACE, f"{first}-r1"))

    again = await job_metrics(svc, job["id"])
    assert again["summary"] is None  # the cluster cut it short: not charged, not summarised
    assert len(again["samples"]) == 1  # what it did then stays in its series

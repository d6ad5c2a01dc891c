"""The job service with the Kubernetes backend, over its REST API, against the fake API server.

The runner does not run here (there are no pods): the test writes its status file and
plays the kubelet, as a real job pod would."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy
import yaml
from nbjobs.job_runner import RunStatus
from nbjobs.job_runner.status import write_status
from nbjobs.job_service.app import JobServiceApp
from tornado.httpserver import HTTPServer

from nbjobs.config import parse_config
from tests.job_service.conftest import GROUPS, TOKENS, Service, free_port, stop_service

from .conftest import _DATABASE, NAMESPACE, eventually, runner_writes_log
from .fake_apiserver import FakeApiServer


def settings(tmp_path: Path, **kubernetes: Any) -> dict[str, Any]:
    return {
        "storage": {
            "root": str(tmp_path / "home"),
            "volume": {"nfs": {"server": "nfs.example.org", "path": "/export/home"}},
        },
        "database": {"url": _DATABASE.get("url") or f"sqlite:///{tmp_path / 'jobs.sqlite'}"},
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
            {"name": "a100", "gpus": 1, "memory": "16Gi", "node_selector": {"gpu": "a100"}},
        ],
        "quotas": {"default": {"max_running_gpus": 4, "max_queued_jobs": 10}},
        "admin": {"users": ["root"]},
    }


async def start(tmp_path: Path, kubeconfig: Path, data: dict[str, Any]) -> Service:
    config_file = tmp_path / "nbjobs.yaml"
    config_file.write_text(yaml.safe_dump(data))
    parse_config(config_file.read_text())
    port = free_port()
    app = JobServiceApp()
    app.initialize(
        [
            f"--config={config_file}",
            f"--port={port}",
            "--JobServiceApp.prefix=/services/nbjobs/",
            f"--StaticTokenAuth.tokens={TOKENS!r}",
            f"--StaticTokenAuth.user_groups={GROUPS!r}",
            f"--KubernetesBackend.kubeconfig={kubeconfig}",
            "--KubernetesBackend.retry_delay=0.05",
            "--KubernetesBackend.events_interval=0.1",
        ]
    )
    service = app.make_service()
    await service.start()
    server = HTTPServer(app.make_web_app(service, app.make_auth()))
    server.listen(port, "127.0.0.1")
    url = f"http://127.0.0.1:{port}/services/nbjobs/"
    return Service(url, tmp_path, app, service, server, config_file)


def status_file(svc: Service, user: str, job_id: str) -> Path:
    return svc.home(user) / ".nbjobs" / "jobs" / job_id / "status.json"


async def running_on_a_pod(
    svc: Service, fake: FakeApiServer, path: str, flavor: str = "a100", *, kueue: bool = False
) -> tuple[dict, str]:
    """ada's ``path`` submitted, its Job made (and, with ``kueue``, admitted by Kueue),
    its pod running on gpu-0 and its runner saying so: the job, and its pod's name."""
    job = await svc.submit("ada", path, flavor)
    name = f"nbjobs-{job['id']}"
    await eventually(lambda: fake.get("jobs", NAMESPACE, name))
    if kueue:
        fake.admit(name, NAMESPACE)
    pod = fake.start_pod(name, NAMESPACE, "gpu-0")["metadata"]["name"]
    fake.run_pod(pod, NAMESPACE)
    write_status(status_file(svc, "ada", job["id"]), RunStatus("running", 1, 0, 0))
    await svc.wait("ada", job["id"], lambda j: j["state"] == "running")
    return job, pod


def the_pod(fake: FakeApiServer, job_id: str) -> str:
    return fake.pods_of(f"nbjobs-{job_id}", NAMESPACE)[0]["metadata"]["name"]


async def test_submit_creates_the_job_follows_the_cluster_and_records_success(
    fake, kubeconfig, tmp_path, running_services
):
    fake.add_node("gpu-0", {"gpu": "a100"}, {"nvidia.com/gpu": "1"})
    svc = await start(tmp_path, kubeconfig, settings(tmp_path))
    running_services.append(svc)
    svc.write("ada", "work/train.ipynb", "print('hi')", "1 + 1")

    job = await svc.submit("ada", "work/train.ipynb", "a100")
    name = f"nbjobs-{job['id']}"
    created = await eventually(lambda: fake.get("jobs", NAMESPACE, name))
    container = created["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][:4] == [
        "python",
        "-m",
        "nbjobs.job_runner",
        f"/home/jovyan/.nbjobs/jobs/{job['id']}/input.ipynb",
    ]
    assert container["command"][4] == "/home/jovyan/" + job["output_path"]
    assert container["volumeMounts"][0]["subPath"] == "ada"
    assert created["metadata"]["labels"]["nbjobs.io/owner"] == "ada"

    # The scheduler finds no room: the user sees a queued job and why.
    pod = fake.start_pod(name, NAMESPACE)["metadata"]["name"]
    fake.unschedulable(pod, NAMESPACE, "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")
    waiting = await svc.wait("ada", job["id"], lambda j: j["state"] == "queued")
    assert waiting["waiting_reason"] == (
        "waiting for 1 × nvidia.com/gpu on nodes with gpu=a100 (0 free)"  # noqa: RUF001
    )

    # Then it runs; the runner reports progress and writes the log into the job's folder.
    fake.bind(pod, NAMESPACE, "gpu-0")
    fake.run_pod(pod, NAMESPACE)
    write_status(status_file(svc, "ada", job["id"]), RunStatus("running", 2, 1, 1))
    runner_writes_log(status_file(svc, "ada", job["id"]).parent, "[nbjobs] cell 1 of 2\n")
    running = await svc.wait("ada", job["id"], lambda j: j["state"] == "running")
    assert running["progress"]["cells_done"] == 1
    assert running["node"] == "gpu-0"  # which jobs run where, for maintenance
    async with svc.client("root") as admin:  # an admin's list: every job and its node
        listed = (await admin.get("jobs", params={"state": "running"})).json()["jobs"]
    assert [(j["id"], j["user"], j["node"]) for j in listed] == [(job["id"], "ada", "gpu-0")]
    # recorded while it runs: the usage by node counts it under its pod's node, not
    # "(none)" until it ends (read until the service's next look for its placement)
    async with svc.client("root") as admin:

        async def by_node() -> list[str]:
            report = (await admin.get("usage", params={"by": "node"})).json()
            return [line["name"] for line in report["breakdown"]]

        deadline = asyncio.get_running_loop().time() + 10
        while (nodes := await by_node()) != ["gpu-0"]:
            assert asyncio.get_running_loop().time() < deadline, nodes
            await asyncio.sleep(0.1)
    async with svc.client("ada") as client:
        log = await eventually_text(client, f"jobs/{job['id']}/logs", "cell 1 of 2")
    assert log == "[nbjobs] cell 1 of 2\n"

    write_status(status_file(svc, "ada", job["id"]), RunStatus("succeeded", 2, 2, exit_code=0))
    fake.finish_pod(pod, NAMESPACE, exit_code=0)
    done = await svc.wait("ada", job["id"], timeout=20)
    assert done["state"] == "succeeded"
    assert done["progress"]["cells_done"] == 2
    assert done["node"] == "gpu-0"  # kept after the pod is gone


async def eventually_text(client: httpx.AsyncClient, url: str, wanted: str) -> str:
    for _ in range(200):
        response = await client.get(url)
        if wanted in response.text:
            return response.text
        await asyncio.sleep(0.05)
    raise AssertionError(f"{url} never said {wanted!r}: {response.text!r}")


async def test_out_of_memory_and_deadline_reach_the_user_as_such(
    fake, kubeconfig, tmp_path, running_services
):
    fake.add_node("gpu-0", {"gpu": "a100"}, {"nvidia.com/gpu": "2"})
    svc = await start(tmp_path, kubeconfig, settings(tmp_path))
    running_services.append(svc)
    svc.write("ada", "big.ipynb", "x = bytearray(10**12)")
    oom = await svc.submit("ada", "big.ipynb", "a100")
    slow = await svc.submit("ada", "big.ipynb", "a100")
    for job in (oom, slow):
        await eventually(lambda j=job: fake.get("jobs", NAMESPACE, f"nbjobs-{j['id']}"))
        fake.run_pod(
            fake.start_pod(f"nbjobs-{job['id']}", NAMESPACE, "gpu-0")["metadata"]["name"],
            NAMESPACE,
        )
    fake.finish_pod(the_pod(fake, oom["id"]), NAMESPACE, exit_code=137, reason="OOMKilled")
    # at the deadline the runner is stopped by SIGTERM and reports "cancelled"
    write_status(status_file(svc, "ada", slow["id"]), RunStatus("cancelled", 1, 0, exit_code=4))
    fake.job_condition(f"nbjobs-{slow['id']}", NAMESPACE, "Failed", "DeadlineExceeded")

    failed = await svc.wait("ada", oom["id"], timeout=20)
    assert (failed["state"], failed["message"]) == ("failed", "out of memory (limit 16Gi)")
    timed_out = await svc.wait("ada", slow["id"], timeout=20)
    assert timed_out["state"] == "timed_out"
    assert timed_out["message"] == "stopped by Kubernetes at its time limit (14520 s)"


@pytest.mark.parametrize("deleted_first", [False, True], ids=["pod-kept", "pod-deleted-first"])
async def test_an_evicted_job_goes_back_to_the_queue_as_often_as_its_flavor_allows(
    fake, kubeconfig, tmp_path, running_services, deleted_first
):
    """Also when the pod's DELETED event comes before the Job's Failed condition, as
    real clusters send them with pod-tracking finalizers (the job was failed then)."""
    fake.add_node("gpu-0", {"gpu": "a100"}, {"nvidia.com/gpu": "1"})
    data = settings(tmp_path)
    data["flavors"][0]["requeue_on_eviction"] = 1
    svc = await start(tmp_path, kubeconfig, data)
    running_services.append(svc)
    svc.write("ada", "long.ipynb", "import time; time.sleep(3600)")
    job = await svc.submit("ada", "long.ipynb", "a100")
    first = f"nbjobs-{job['id']}"
    await eventually(lambda: fake.get("jobs", NAMESPACE, first))
    pod = fake.start_pod(first, NAMESPACE, "gpu-0")["metadata"]["name"]
    fake.run_pod(pod, NAMESPACE)
    runner_writes_log(status_file(svc, "ada", job["id"]).parent, "epoch 1 of 90\n")
    write_status(status_file(svc, "ada", job["id"]), RunStatus("running", 1, 0, 0))
    await svc.wait("ada", job["id"], lambda j: j["state"] == "running")
    async with svc.client("ada") as client:
        await eventually_text(client, f"jobs/{job['id']}/logs", "epoch 1")

    # The node is drained: the pod is evicted, the runner saves what it has on SIGTERM.
    write_status(status_file(svc, "ada", job["id"]), RunStatus("cancelled", 1, 0, exit_code=4))
    fake.finish_pod(
        pod,
        NAMESPACE,
        exit_code=143,
        disruption=("EvictionByEvictionAPI", "Eviction API"),
        pod_deleted_first=deleted_first,
    )
    # Back in the queue (not failed), then a second Job for the second attempt.
    second = f"{first}-r1"
    await eventually(lambda: fake.get("jobs", NAMESPACE, second))
    again = await svc.job("ada", job["id"])
    assert again["state"] in ("queued", "starting")
    assert again["requeues"] == 1
    assert again["message"].startswith(
        "re-queued (1 of 1 allowed) after the job's pod was evicted (the node is being "
        "drained or scaled down) on node gpu-0"
    )
    jobdir = status_file(svc, "ada", job["id"]).parent
    assert (jobdir / "log.attempt-1.txt").read_text() == "epoch 1 of 90\n"
    assert not (jobdir / "status.json").exists()  # the first run's verdict does not linger

    # Evicted again: the flavor allows one re-queue only, so now it fails with the reason.
    pod = fake.start_pod(second, NAMESPACE, "gpu-0")["metadata"]["name"]
    fake.run_pod(pod, NAMESPACE)
    fake.finish_pod(
        pod, NAMESPACE, exit_code=143, disruption=("PreemptionByScheduler", "a higher priority")
    )
    done = await svc.wait("ada", job["id"], timeout=20)
    assert done["state"] == "failed"
    assert done["requeues"] == 1
    assert "preempted by a higher-priority pod" in done["message"]
    assert fake.get("jobs", NAMESPACE, f"{first}-r2") is None


async def test_a_job_evicted_without_requeue_fails_with_the_reason(
    fake, kubeconfig, tmp_path, running_services
):
    fake.add_node("gpu-0", {"gpu": "a100"}, {"nvidia.com/gpu": "1"})
    svc = await start(tmp_path, kubeconfig, settings(tmp_path))
    running_services.append(svc)
    svc.write("ada", "e.ipynb", "1")
    job = await svc.submit("ada", "e.ipynb", "a100")
    name = f"nbjobs-{job['id']}"
    await eventually(lambda: fake.get("jobs", NAMESPACE, name))
    pod = fake.start_pod(name, NAMESPACE, "gpu-0")["metadata"]["name"]
    fake.run_pod(pod, NAMESPACE)
    fake.finish_pod(pod, NAMESPACE, exit_code=143, pod_reason="Evicted", pod_message="low disk")
    done = await svc.wait("ada", job["id"], timeout=20)
    assert (done["state"], done["requeues"]) == ("failed", 0)
    assert done["message"] == "the job's pod was evicted from node gpu-0: low disk; re-run it"


async def test_cancel_deletes_the_job_and_the_runners_partial_result_is_kept(
    fake, kubeconfig, tmp_path, running_services
):
    fake.add_node("gpu-0", {"gpu": "a100"}, {"nvidia.com/gpu": "2"})
    svc = await start(tmp_path, kubeconfig, settings(tmp_path))
    running_services.append(svc)
    svc.write("ada", "c.ipynb", "import time; time.sleep(100)")
    job, pod = await running_on_a_pod(svc, fake, "c.ipynb")
    name = f"nbjobs-{job['id']}"
    # the runner saves its partial output on SIGTERM before its pod goes away
    write_status(status_file(svc, "ada", job["id"]), RunStatus("cancelled", 1, 0, exit_code=4))
    async with svc.client("ada") as client:
        response = await client.post(f"jobs/{job['id']}/cancel")
    assert response.status_code == 200, response.text
    done = await svc.wait("ada", job["id"], timeout=20)
    assert done["state"] == "cancelled"
    assert fake.get("jobs", NAMESPACE, name) is None
    assert fake.get("pods", NAMESPACE, pod) is None


async def test_a_restart_adopts_running_jobs_and_stops_what_the_database_finished(
    fake, kubeconfig, tmp_path, running_services
):
    fake.add_node("gpu-0", {"gpu": "a100"}, {"nvidia.com/gpu": "2"})
    first = await start(tmp_path, kubeconfig, settings(tmp_path))
    first.write("ada", "r.ipynb", "1")
    keep = await first.submit("ada", "r.ipynb", "a100")
    stale = await first.submit("ada", "r.ipynb", "a100")
    for job in (keep, stale):
        await eventually(lambda j=job: fake.get("jobs", NAMESPACE, f"nbjobs-{j['id']}"))
        fake.run_pod(
            fake.start_pod(f"nbjobs-{job['id']}", NAMESPACE, "gpu-0")["metadata"]["name"],
            NAMESPACE,
        )
    await stop_service(first)
    # While the service was down its database came to hold one job finished (say, an
    # admin cancelled it while the API server was unreachable).
    engine = sqlalchemy.create_engine(first.app.nbjobs_config.database.url)
    with engine.begin() as db:
        db.execute(
            sqlalchemy.text("UPDATE nbjobs_jobs SET state = 'cancelled' WHERE id = :id"),
            {"id": stale["id"]},
        )
    engine.dispose()

    second = await start(tmp_path, kubeconfig, settings(tmp_path))
    running_services.append(second)
    await eventually(lambda: fake.get("jobs", NAMESPACE, f"nbjobs-{stale['id']}") is None)
    adopted = await second.job("ada", keep["id"])
    assert adopted["state"] == "starting"
    assert len(fake.list("jobs", NAMESPACE)) == 1  # nothing created twice

    write_status(status_file(second, "ada", keep["id"]), RunStatus("succeeded", 1, 1, exit_code=0))
    fake.finish_pod(the_pod(fake, keep["id"]), NAMESPACE, exit_code=0)
    done = await second.wait("ada", keep["id"], timeout=20)
    assert done["state"] == "succeeded"


async def test_with_kueue_every_job_goes_to_the_cluster_at_once(
    fake, kubeconfig, tmp_path, running_services
):
    fake.add_node("gpu-0", {"gpu": "a100"}, {"nvidia.com/gpu": "1"})
    data = settings(tmp_path, kueue={"queue_name": "team-a"})
    svc = await start(tmp_path, kubeconfig, data)
    running_services.append(svc)
    svc.write("ada", "k.ipynb", "1")
    jobs = [await svc.submit("ada", "k.ipynb", "a100") for _ in range(3)]
    # one GPU, three jobs: all handed to Kueue, which admits them when it decides
    await eventually(lambda: len(fake.list("jobs", NAMESPACE)) == 3)
    for job in jobs:
        seen = await svc.wait("ada", job["id"], lambda j: j["waiting_reason"] is not None)
        assert seen["state"] == "queued"
        assert seen["waiting_reason"] == "waiting for Kueue to admit it (queue team-a)"
    assert all(j["spec"]["suspend"] for j in fake.list("jobs", NAMESPACE))
    # The list filters by what the user sees: held by Kueue is queued, not starting.
    async with svc.client("ada") as client:
        queued = (await client.get("jobs", params={"state": "queued"})).json()
        starting = (await client.get("jobs", params={"state": "starting"})).json()
    assert sorted(j["id"] for j in queued["jobs"]) == sorted(j["id"] for j in jobs)
    assert queued["total"] == 3
    assert (starting["jobs"], starting["total"]) == ([], 0)


async def test_a_job_kueue_preempts_is_queued_again_saying_so_whatever_its_flavor_allows(
    fake, kubeconfig, tmp_path, running_services
):
    """Kueue takes a running job's quota back (a reclaim in the cohort, a higher
    priority): it suspends the Job again and its pods go. Not a failure, not a cancel:
    the job is queued again (its flavor allows no re-queue on eviction), counted, its
    log kept, and a new Job waits for Kueue to admit it."""
    fake.add_node("gpu-0", {"gpu": "a100"}, {"nvidia.com/gpu": "1"})
    data = settings(tmp_path, kueue={"queue_name": "team-a"})
    assert "requeue_on_eviction" not in data["flavors"][0]
    svc = await start(tmp_path, kubeconfig, data)
    running_services.append(svc)
    svc.write("ada", "long.ipynb", "import time; time.sleep(3600)")
    job, _ = await running_on_a_pod(svc, fake, "long.ipynb", kueue=True)
    first = f"nbjobs-{job['id']}"
    runner_writes_log(status_file(svc, "ada", job["id"]).parent, "epoch 1 of 90\n")

    # the runner is stopped with SIGTERM as its pod goes, and saves what it has
    write_status(status_file(svc, "ada", job["id"]), RunStatus("cancelled", 1, 0, exit_code=4))
    fake.suspend_again(first, NAMESPACE)
    second = f"{first}-r1"
    await eventually(lambda: fake.get("jobs", NAMESPACE, second))
    assert fake.get("jobs", NAMESPACE, first) is None  # Kueue would have run it again
    again = await svc.wait("ada", job["id"], lambda j: j["waiting_reason"] is not None)
    assert again["state"] == "queued"
    assert again["requeues"] == 1
    assert again["message"].startswith(
        "Kueue preempted it from queue team-a to give its GPUs back (to another queue of "
        "the cohort reclaiming what it lent, or to a job of higher priority); queued again "
        "(preempted 1 time(s))"
    )
    assert again["waiting_reason"] == "waiting for Kueue to admit it (queue team-a)"
    jobdir = status_file(svc, "ada", job["id"]).parent
    assert (jobdir / "log.attempt-1.txt").read_text() == "epoch 1 of 90\n"
    assert fake.get("jobs", NAMESPACE, second)["spec"]["suspend"] is True

    # admitted again, it runs to the end
    fake.admit(second, NAMESPACE)
    pod = fake.start_pod(second, NAMESPACE, "gpu-0")["metadata"]["name"]
    fake.run_pod(pod, NAMESPACE)
    write_status(status_file(svc, "ada", job["id"]), RunStatus("succeeded", 1, 1, exit_code=0))
    fake.finish_pod(pod, NAMESPACE, exit_code=0)
    done = await svc.wait("ada", job["id"], timeout=20)
    assert (done["state"], done["requeues"]) == ("succeeded", 1)


async def test_a_preempted_job_says_why_in_kueues_words_from_its_workload(
    fake, kubeconfig, tmp_path, running_services
):
    fake.add_node("gpu-0", {"gpu": "a100"}, {"nvidia.com/gpu": "1"})
    svc = await start(tmp_path, kubeconfig, settings(tmp_path, kueue={"queue_name": "team-a"}))
    running_services.append(svc)
    svc.write("ada", "long.ipynb", "import time; time.sleep(3600)")
    job, _ = await running_on_a_pod(svc, fake, "long.ipynb", kueue=True)
    name = f"nbjobs-{job['id']}"
    uid = fake.get("jobs", NAMESPACE, name)["metadata"]["uid"]
    # Kueue's Workload of the Job, as Kueue writes it when it preempts for a reclaim
    said = "Preempted to accommodate a workload (UID: w-7) due to reclamation within the cohort"
    workload = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": f"job-{name}-1a2b3",
            "namespace": NAMESPACE,
            "labels": {"kueue.x-k8s.io/job-uid": uid},
        },
        "status": {
            "conditions": [
                {"type": "Evicted", "status": "True", "reason": "Preempted", "message": said},
                {
                    "type": "Preempted",
                    "status": "True",
                    "reason": "InCohortReclamation",
                    "message": said,
                },
            ]
        },
    }
    fake.put("workloads", workload, "ADDED")
    write_status(status_file(svc, "ada", job["id"]), RunStatus("cancelled", 1, 0, exit_code=4))
    fake.suspend_again(name, NAMESPACE)
    again = await svc.wait("ada", job["id"], lambda j: j["requeues"] == 1)
    assert again["message"].startswith(
        "Kueue preempted it from queue team-a: another queue of its cohort took back the "
        f"GPUs it had lent (Kueue: {said}); queued again (preempted 1 time(s))"
    )


async def test_a_job_suspended_by_hand_without_kueue_fails_saying_so(
    fake, kubeconfig, tmp_path, running_services
):
    """No Kueue here: a Job someone suspended on the cluster is not told it was
    preempted by Kueue; its flavor re-queues no eviction, so it fails with the cause."""
    fake.add_node("gpu-0", {"gpu": "a100"}, {"nvidia.com/gpu": "1"})
    svc = await start(tmp_path, kubeconfig, settings(tmp_path))
    running_services.append(svc)
    svc.write("ada", "long.ipynb", "import time; time.sleep(3600)")
    job, _ = await running_on_a_pod(svc, fake, "long.ipynb")
    write_status(status_file(svc, "ada", job["id"]), RunStatus("cancelled", 1, 0, exit_code=4))
    fake.suspend_again(f"nbjobs-{job['id']}", NAMESPACE)
    done = await svc.wait("ada", job["id"], timeout=20)
    assert done["state"] == "failed"
    assert done["message"].startswith("its Job was suspended outside nbjobs")
    assert "Kueue" not in done["message"]
    assert done["requeues"] == 0


async def test_times_are_the_clusters_not_when_the_service_noticed(
    fake, kubeconfig, tmp_path, running_services
):
    """After a restart the end was recorded 14 s late (GPU-hours charged for the downtime):
    the job's start and end come from the container and the Job's completion."""
    fake.add_node("gpu-0", {"gpu": "a100"}, {"nvidia.com/gpu": "1"})
    svc = await start(tmp_path, kubeconfig, settings(tmp_path))
    running_services.append(svc)
    svc.write("ada", "t.ipynb", "print(1)")
    job = await svc.submit("ada", "t.ipynb", "a100")
    name = f"nbjobs-{job['id']}"
    await eventually(lambda: fake.get("jobs", NAMESPACE, name))
    pod = fake.start_pod(name, NAMESPACE, "gpu-0")["metadata"]["name"]
    # what the cluster recorded: a run of 25 minutes that ended 5 minutes ago
    began = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(minutes=30)
    ended = began + timedelta(minutes=25)
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    fake.run_pod(pod, NAMESPACE, started_at=began.strftime(stamp))
    write_status(status_file(svc, "ada", job["id"]), RunStatus("succeeded", 1, 1, exit_code=0))
    fake.finish_pod(pod, NAMESPACE, exit_code=0, finished_at=ended.strftime(stamp))
    done = await svc.wait("ada", job["id"], timeout=20)
    assert done["state"] == "succeeded"
    assert datetime.fromisoformat(done["started_at"]) == began
    assert datetime.fromisoformat(done["finished_at"]) == ended
    async with svc.client("root") as admin:
        usage = (await admin.get("usage")).json()
    ada = next(u for u in usage["users"] if u["name"] == "ada")
    assert abs(ada["gpu_hours"] - 25 / 60) < 0.001  # metered on the cluster's times


@pytest.mark.parametrize("deleted_first", [False, True], ids=["pod-kept", "pod-deleted-first"])
async def test_a_pod_stopped_outside_nbjobs_is_no_cancel(
    fake, kubeconfig, tmp_path, running_services, deleted_first
):
    """``kubectl delete pod``, or a drain on a cluster before 1.26 (no DisruptionTarget):
    the runner gets SIGTERM, saves what it has and says "cancelled by SIGTERM"; nobody
    cancelled it through nbjobs, so the job is re-queued as an eviction is where its
    flavor allows, and otherwise fails saying its pod was stopped outside nbjobs."""
    fake.add_node("gpu-0", {"gpu": "a100"}, {"nvidia.com/gpu": "1"})
    data = settings(tmp_path)
    data["flavors"].append({**data["flavors"][0], "name": "again", "requeue_on_eviction": 1})
    svc = await start(tmp_path, kubeconfig, data)
    running_services.append(svc)
    svc.write("ada", "long.ipynb", "import time; time.sleep(3600)")

    async def stopped_outside(flavor: str) -> dict:
        job, pod = await running_on_a_pod(svc, fake, "long.ipynb", flavor)
        # deleted behind nbjobs' back: SIGTERM, the runner's partial output and its word
        status = RunStatus("cancelled", 1, 0, exit_code=4, message="cancelled by SIGTERM")
        write_status(status_file(svc, "ada", job["id"]), status)
        fake.finish_pod(pod, NAMESPACE, exit_code=4, pod_deleted_first=deleted_first)
        return job

    job = await stopped_outside("a100")
    done = await svc.wait("ada", job["id"], timeout=20)
    assert (done["state"], done["requeues"]) == ("failed", 0)
    assert done["message"] == (
        "its pod was stopped outside nbjobs on node gpu-0 (SIGTERM): deleted, or its node "
        "drained or shut down; nobody cancelled it here; re-run it"
    )

    job = await stopped_outside("again")
    await eventually(lambda: fake.get("jobs", NAMESPACE, f"nbjobs-{job['id']}-r1"))
    again = await svc.job("ada", job["id"])
    assert again["state"] in ("queued", "starting")
    assert again["requeues"] == 1
    assert again["message"].startswith(
        "re-queued (1 of 1 allowed) after its pod was stopped outside nbjobs on node gpu-0"
    )


async def test_users_are_told_where_on_the_share_their_results_go(
    fake, kubeconfig, tmp_path, running_services
):
    """The Submit dialog's "where": the NFS export and the user's folder on it, as users
    and their admins name it, not the service's own mount point."""
    svc = await start(tmp_path, kubeconfig, settings(tmp_path))
    running_services.append(svc)
    svc.home("ada")
    async with svc.client("ada") as client:
        outputs = (await client.get("me")).json()["outputs"]
    assert outputs["where"] == "nfs.example.org:/export/home/ada"
    assert outputs["free_bytes"] > 0


async def test_a_second_service_on_the_namespace_leaves_the_first_ones_job_running(
    fake, kubeconfig, tmp_path, running_services, capfd
):
    """A staging copy (a database of its own) started on the same jobs' namespace: it
    says another nbjobs's Jobs are there, and leaves them be."""
    fake.add_node("gpu-0", {"gpu": "a100"}, {"nvidia.com/gpu": "2"})
    first = await start(tmp_path, kubeconfig, settings(tmp_path))
    running_services.append(first)
    first.write("ada", "train.ipynb", "print('hi')")
    job, pod = await running_on_a_pod(first, fake, "train.ipynb")

    staging = tmp_path / "staging"
    staging.mkdir()
    data = settings(staging)
    data["database"] = {"url": f"sqlite:///{staging / 'jobs.sqlite'}"}
    capfd.readouterr()
    second = await start(staging, kubeconfig, data)
    running_services.append(second)
    logged = capfd.readouterr().err  # the service's log (its own handler, on stderr)

    assert [q for v, r, q in fake.queries if v == "delete" and r == "jobs"] == []
    assert fake.get("jobs", NAMESPACE, f"nbjobs-{job['id']}") is not None
    said = [line for line in logged.splitlines() if "another nbjobs" in line]
    assert len(said) == 1
    assert f"] 1 Job(s) in namespace {NAMESPACE} were made by another nbjobs" in said[0]
    # the first's job goes on to its end
    write_status(status_file(first, "ada", job["id"]), RunStatus("succeeded", 1, 1, exit_code=0))
    fake.finish_pod(pod, NAMESPACE, exit_code=0)
    assert (await first.wait("ada", job["id"], timeout=20))["state"] == "succeeded"

"""The job service on clusters that share GPUs, against the fake API server: four 0.25
HAMi jobs on one GPU run at once and are charged 0.25 each; a KAI flavor goes to KAI at
once, says who queues it and in which (class) queue, and names KAI when nothing answers."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from nbjobs.job_runner import RunStatus
from nbjobs.job_runner.status import write_status

from .conftest import NAMESPACE, eventually
from .test_service import settings, start, status_file

STAMP = "%Y-%m-%dT%H:%M:%SZ"

QUARTER = {
    "name": "a100-quarter",
    "gpus": 1,
    "fraction": 0.25,
    "gpu_sharing": "hami",
    "resources": {"nvidia.com/gpumem": 10240},
    "memory": "4Gi",
}


async def flavor_info(svc: Any, user: str, name: str) -> dict[str, Any]:
    async with svc.client(user) as client:
        flavors = (await client.get("flavors")).json()
    return next(f for f in flavors if f["name"] == name)


async def test_four_quarter_gpu_jobs_share_one_gpu_and_are_charged_a_quarter_each(
    fake, kubeconfig, tmp_path, running_services
):
    # one 40 GB A100 under HAMi: 10 split slots, 40960 MiB of GPU memory
    fake.hami_webhook = True
    fake.schedulers.add("hami-scheduler")
    fake.add_node("gpu-0", {}, {"nvidia.com/gpu": "10", "nvidia.com/gpumem": "40960"})
    data = settings(tmp_path)
    data["flavors"] = [QUARTER]
    data["quotas"] = {"default": {"max_running_gpus": 1, "max_queued_jobs": 10}}
    svc = await start(tmp_path, kubeconfig, data)
    running_services.append(svc)
    info = await flavor_info(svc, "ada", "a100-quarter")
    assert (info["fraction"], info["free_gpus"], info["total_gpus"]) == (0.25, 4, 4)

    svc.write("ada", "q.ipynb", "print('a quarter')")
    jobs = [await svc.submit("ada", "q.ipynb", "a100-quarter") for _ in range(5)]
    names = [f"nbjobs-{j['id']}" for j in jobs]
    # four fit the GPU's memory (and ada's quota of 1 GPU); the fifth waits
    await eventually(lambda: all(fake.get("jobs", NAMESPACE, n) for n in names[:4]))
    pods = [fake.start_pod(n, NAMESPACE)["metadata"]["name"] for n in names[:4]]
    assert sorted(fake.schedule_pending()) == sorted(pods)
    began = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(hours=1)
    for job, pod in zip(jobs[:4], pods, strict=True):
        fake.run_pod(pod, NAMESPACE, started_at=began.strftime(STAMP))
        write_status(status_file(svc, "ada", job["id"]), RunStatus("running", 1, 0, 0))
    for job in jobs[:4]:
        await svc.wait("ada", job["id"], lambda j: j["state"] == "running")
    fifth = await svc.wait("ada", jobs[4]["id"], lambda j: j["waiting_reason"] is not None)
    assert fifth["state"] == "queued"
    assert fifth["waiting_reason"] == (
        "waiting for ada's running jobs: ada may use 1 GPU(s) at once and uses 1"
    )
    assert fake.get("jobs", NAMESPACE, names[4]) is None
    info = await flavor_info(svc, "ada", "a100-quarter")
    assert (info["free_gpus"], info["total_gpus"]) == (0, 4)

    # each ran 40 minutes: a quarter of a GPU for 40 minutes is 1/6 GPU-hour
    ended = began + timedelta(minutes=40)
    for job, pod in zip(jobs[:4], pods, strict=True):
        write_status(status_file(svc, "ada", job["id"]), RunStatus("succeeded", 1, 1, exit_code=0))
        fake.finish_pod(pod, NAMESPACE, exit_code=0, finished_at=ended.strftime(STAMP))
    for job in jobs[:4]:
        assert (await svc.wait("ada", job["id"], timeout=20))["state"] == "succeeded"
    # the fifth starts now that the quarters are free (and counts from now on)
    await eventually(lambda: fake.get("jobs", NAMESPACE, names[4]))
    async with svc.client("root") as admin:
        usage = (await admin.get("usage")).json()
        report = (await admin.get("usage", params={"by": "flavor"})).json()
    ada = next(u for u in usage["users"] if u["name"] == "ada")
    assert abs(ada["gpu_hours"] - 4 * 0.25 * 40 / 60) < 0.002
    [line] = report["breakdown"]
    assert (line["name"], line["jobs"]) == ("a100-quarter", 5)
    assert abs(line["gpu_hours_allocated"] - 4 * 0.25 * 40 / 60) < 0.002


async def test_a_kai_job_goes_to_its_class_queue_and_says_who_queues_it(
    fake, kubeconfig, tmp_path, running_services
):
    fake.add_node("gpu-0", {}, {"nvidia.com/gpu": "1"})
    data = settings(tmp_path)
    data["flavors"] = [
        {
            "name": "gpu-half",
            "gpus": 1,
            "fraction": 0.5,
            "scheduler": "kai",
            "queue": "research",
            "memory": "4Gi",
        }
    ]
    data["classes"] = [{"name": "physics-101", "students": ["ada"], "queue": "physics-101"}]
    svc = await start(tmp_path, kubeconfig, data)
    running_services.append(svc)
    info = await flavor_info(svc, "ada", "gpu-half")
    assert info["placement"] == (
        "queued by KAI Scheduler, queue physics-101: it decides when a job starts"
    )
    assert (info["free_gpus"], info["total_gpus"]) == (None, None)  # no made-up number

    svc.write("ada", "k.ipynb", "print('half')")
    jobs = [await svc.submit("ada", "k.ipynb", "gpu-half") for _ in range(3)]
    names = [f"nbjobs-{j['id']}" for j in jobs]
    # all three go to KAI at once (ada's quota of 4 GPUs allows 1.5): KAI decides
    await eventually(lambda: all(fake.get("jobs", NAMESPACE, n) for n in names))
    for job in [fake.get("jobs", NAMESPACE, n) for n in names]:
        assert job is not None
        assert job["spec"]["template"]["metadata"]["labels"]["kai.scheduler/queue"] == (
            "physics-101"
        )
    pods = [fake.start_pod(n, NAMESPACE)["metadata"]["name"] for n in names]
    # KAI is not running: the pods stay Pending without a word from any scheduler
    assert fake.schedule_pending() == []
    waiting = await svc.wait("ada", jobs[0]["id"], lambda j: j["waiting_reason"] is not None)
    assert waiting["waiting_reason"] == "queued by KAI Scheduler, queue physics-101"

    fake.schedulers.add("kai-scheduler")
    assert fake.schedule_pending() == pods[:2]  # two halves on the one GPU
    third = await svc.wait(
        "ada", jobs[2]["id"], lambda j: "Resources were not found" in (j["waiting_reason"] or "")
    )
    assert third["waiting_reason"] == (
        "queued by KAI Scheduler, queue physics-101: Resources were not found for pod "
        "group: not enough GPUs in queue physics-101"
    )


VOLCANO = {
    "name": "gpu-volcano",
    "gpus": 1,
    "scheduler": "volcano",
    "queue": "ml-201",
    "memory": "4Gi",
}


async def volcano_job(
    fake: Any, kubeconfig: Any, tmp_path: Any, running_services: list[Any]
) -> tuple[Any, dict[str, Any], str]:
    """A service whose one flavor Volcano queues, a job of ada's on it, and its pod."""
    data = settings(tmp_path)
    data["flavors"] = [VOLCANO]
    svc = await start(tmp_path, kubeconfig, data)
    running_services.append(svc)
    svc.write("ada", "v.ipynb", "print('volcano')")
    job = await svc.submit("ada", "v.ipynb", "gpu-volcano")
    name = f"nbjobs-{job['id']}"
    await eventually(lambda: fake.get("jobs", NAMESPACE, name))
    return svc, job, str(fake.start_pod(name, NAMESPACE)["metadata"]["name"])


async def test_a_volcano_job_shows_the_engines_latest_warning_event(
    fake, kubeconfig, tmp_path, running_services
):
    fake.add_node("gpu-0", {}, {"nvidia.com/gpu": "1"})
    svc, job, pod = await volcano_job(fake, kubeconfig, tmp_path, running_services)
    name = f"nbjobs-{job['id']}"
    waiting = await svc.wait("ada", job["id"], lambda j: j["waiting_reason"] is not None)
    assert waiting["waiting_reason"] == "queued by Volcano, queue ml-201"

    # Volcano writes why on the PodGroup it made for the Job (named after the Job's uid),
    # not on the pod: nbjobs shows it, the engine's own words
    uid = fake.get("jobs", NAMESPACE, name)["metadata"]["uid"]  # type: ignore[index]
    fake.add_event(NAMESPACE, "PodGroup", f"podgroup-{uid}", "Scheduled", "fine", type="Normal")
    fake.add_event(
        NAMESPACE,
        "PodGroup",
        f"podgroup-{uid}",
        "Unschedulable",
        "queue resource quota insufficient",
        last="2026-11-25T10:00:00Z",
    )
    # another Job's group says nothing about this one
    fake.add_event(NAMESPACE, "PodGroup", "podgroup-someone-else", "Unschedulable", "not yours")
    said = await svc.wait(
        "ada", job["id"], lambda j: "insufficient" in (j["waiting_reason"] or ""), timeout=10
    )
    assert said["waiting_reason"] == (
        "queued by Volcano, queue ml-201: queue resource quota insufficient"
    )
    # a newer warning on the pod itself wins
    fake.add_event(
        NAMESPACE,
        "Pod",
        pod,
        "FailedScheduling",
        "all nodes are unavailable: 1 node(s) resource fit failed",
        last="2026-11-25T10:05:00Z",
    )
    newer = await svc.wait(
        "ada", job["id"], lambda j: "resource fit" in (j["waiting_reason"] or ""), timeout=10
    )
    assert newer["waiting_reason"] == (
        "queued by Volcano, queue ml-201: all nodes are unavailable: 1 node(s) resource fit failed"
    )
    # the pod's own condition, once Volcano writes one, says what is true now
    fake.unschedulable(pod, NAMESPACE, "0/1 nodes are unavailable: 1 Insufficient nvidia.com/gpu.")
    now = await svc.wait(
        "ada", job["id"], lambda j: "Insufficient" in (j["waiting_reason"] or ""), timeout=10
    )
    assert now["state"] == "queued"


async def test_without_leave_to_list_events_a_job_still_says_who_queues_it(
    fake, kubeconfig, tmp_path, running_services, capfd
):
    fake.forbidden.add("events")
    svc, job, _ = await volcano_job(fake, kubeconfig, tmp_path, running_services)
    await eventually(lambda: not svc.service.backend.mirror.events_readable)
    assert "may not list events" in capfd.readouterr().err
    waiting = await svc.wait("ada", job["id"], lambda j: j["waiting_reason"] is not None)
    assert waiting["waiting_reason"] == "queued by Volcano, queue ml-201"

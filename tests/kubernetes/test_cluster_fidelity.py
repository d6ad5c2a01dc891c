"""The job service on Kubernetes where real clusters differ from a tidy one: a job that
ends, and whose Job is deleted at its TTL, while the service is stopped; failures only
the cluster knows; where a stopped job ran.

Real service over its REST API, the fake API server as the cluster. No runner runs (there
are no pods): the test writes the runner's status file and log into the job's folder,
as the runner in a job pod does (``--status-file``, ``--log-file``), and plays the
kubelet and the controllers."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from nbjobs.job_runner import RunStatus
from nbjobs.job_runner.status import write_status

from tests.job_service.conftest import Service, start_service, stop_service

from .conftest import NAMESPACE, eventually, runner_writes_log
from .fake_apiserver import FakeApiServer


def settings(tmp_path: Path) -> dict[str, Any]:
    return {
        "storage": {
            "root": str(tmp_path / "home"),
            "volume": {"nfs": {"server": "nfs.example.org", "path": "/export/home"}},
        },
        "backend": {
            "kind": "kubernetes",
            "kubernetes": {
                "namespace": NAMESPACE,
                "default_image": "example.org/nbjobs:1",
                "termination_grace_seconds": 2,
            },
        },
        "flavors": [
            {
                "name": "a100",
                "gpus": 1,
                "memory": "16Gi",
                "node_selector": {"gpu": "a100"},
                "time_limit": 600,
            },
        ],
        "quotas": {"default": {"max_running_gpus": 4, "max_queued_jobs": 10}},
        "admin": {"users": ["root"]},
    }


async def start(tmp_path: Path, kubeconfig: Path) -> Service:
    return await start_service(
        tmp_path,
        settings(tmp_path),
        argv=(
            f"--KubernetesBackend.kubeconfig={kubeconfig}",
            "--KubernetesBackend.retry_delay=0.05",
        ),
    )


@pytest.fixture
async def services():
    """Services a test starts; each stopped at the end if the test has not."""
    started: list[Service] = []
    yield started
    for svc in started:
        await stop_service(svc)
    started.clear()


def job_dir(svc: Service, user: str, job_id: str) -> Path:
    return svc.home(user) / ".nbjobs" / "jobs" / job_id


async def read_until(stream: Any, wanted: str, timeout: float = 10) -> str:
    """Text of a streamed answer until ``wanted`` has come."""
    text = ""

    async def read() -> str:
        nonlocal text
        async for chunk in stream:
            text += chunk
            if wanted in text:
                break
        return text

    return await asyncio.wait_for(read(), timeout)


async def started_job(
    svc: Service, fake: FakeApiServer, notebook: str = "train.ipynb"
) -> tuple[dict[str, Any], str, str]:
    """A job submitted and its pod running on gpu-0: (job, Job name, pod name)."""
    svc.write("ada", notebook, "print('epoch 1')", "print('epoch 2')")
    job = await svc.submit("ada", notebook, "a100")
    name = f"nbjobs-{job['id']}"
    await eventually(lambda: fake.get("jobs", NAMESPACE, name))
    pod = fake.start_pod(name, NAMESPACE, "gpu-0")["metadata"]["name"]
    fake.run_pod(pod, NAMESPACE)
    return job, name, pod


async def test_a_job_that_ended_and_was_deleted_while_the_service_was_stopped_has_its_log(
    fake, kubeconfig, tmp_path, services
):
    """The runner writes the log into the job's folder itself: followed live while the
    service runs, and whole after a restart, though the Job and its pod (and the pod's
    log) were gone by then."""
    fake.add_node("gpu-0", {"gpu": "a100"}, {"nvidia.com/gpu": "1"})
    svc = await start(tmp_path, kubeconfig)
    services.append(svc)
    job, name, pod = await started_job(svc, fake)
    folder = job_dir(svc, "ada", job["id"])
    command = fake.get("jobs", NAMESPACE, name)["spec"]["template"]["spec"]["containers"][0][
        "command"
    ]
    assert command[command.index("--log-file") + 1] == (
        f"/home/jovyan/.nbjobs/jobs/{job['id']}/log.txt"  # the same file, in the pod
    )
    write_status(folder / "status.json", RunStatus("running", 2, 0, 0))
    runner_writes_log(folder, "[nbjobs] cell 1/2 (notebook cell 0)\nepoch 1\n")
    await svc.wait("ada", job["id"], lambda j: j["state"] == "running")

    # followed live, through the API, as the runner writes it
    async with (
        svc.client("ada") as client,
        client.stream("GET", f"jobs/{job['id']}/logs", params={"follow": "1"}) as response,
    ):
        assert response.status_code == 200
        chunks = response.aiter_text()
        assert "epoch 1" in await read_until(chunks, "epoch 1")
        runner_writes_log(folder, "[nbjobs] cell 2/2 (notebook cell 1)\n")
        assert "cell 2/2" in await read_until(chunks, "cell 2/2")

    await stop_service(services.pop())
    # While nobody watches: the job ends, and the TTL controller deletes its Job and pod.
    runner_writes_log(folder, "epoch 2\n[nbjobs] done: succeeded\n")
    write_status(folder / "status.json", RunStatus("succeeded", 2, 2, exit_code=0))
    fake.finish_pod(pod, NAMESPACE, exit_code=0)
    fake.expire_ttl(name, NAMESPACE)
    assert fake.get("jobs", NAMESPACE, name) is None
    assert fake.pods_of(name, NAMESPACE) == []

    svc = await start(tmp_path, kubeconfig)
    services.append(svc)
    done = await svc.wait("ada", job["id"], timeout=20)
    async with svc.client("ada") as client:
        log = await client.get(f"jobs/{job['id']}/logs")
    assert done["state"] == "succeeded"
    assert done["progress"]["cells_done"] == 2
    assert log.status_code == 200
    assert log.text == (
        "[nbjobs] cell 1/2 (notebook cell 0)\nepoch 1\n[nbjobs] cell 2/2 (notebook cell 1)\n"
        "epoch 2\n[nbjobs] done: succeeded\n"
    )
    assert ("get", "", "pods/log") not in fake.requests  # nothing was copied from the pod
    assert fake.list("jobs", NAMESPACE) == []  # and nothing was started again


@pytest.mark.parametrize(
    ("reason", "detail", "message"),
    [
        (
            "ImagePullBackOff",
            'Back-off pulling image "example.org/nbjobs:1"',
            "could not pull image example.org/nbjobs:1 (ImagePullBackOff: "
            'Back-off pulling image "example.org/nbjobs:1")',
        ),
        (
            "CreateContainerConfigError",
            'secret "hf-token" not found',
            "the container could not be configured (CreateContainerConfigError: "
            'secret "hf-token" not found)',
        ),
    ],
)
async def test_what_only_the_cluster_knows_is_the_jobs_message(
    fake, kubeconfig, tmp_path, services, reason, detail, message
):
    """The runner never starts, so it writes no log and no status: the cluster's words
    are all the user gets, and they name the image."""
    fake.add_node("gpu-0", {"gpu": "a100"}, {"nvidia.com/gpu": "1"})
    svc = await start(tmp_path, kubeconfig)
    services.append(svc)
    svc.write("ada", "img.ipynb", "1")
    job = await svc.submit("ada", "img.ipynb", "a100")
    name = f"nbjobs-{job['id']}"
    await eventually(lambda: fake.get("jobs", NAMESPACE, name))
    pod = fake.start_pod(name, NAMESPACE, "gpu-0")["metadata"]["name"]
    fake.waiting(pod, NAMESPACE, reason, detail)

    done = await svc.wait("ada", job["id"], timeout=20)
    assert (done["state"], done["message"]) == ("failed", message)
    assert done["node"] == "gpu-0"
    assert fake.get("jobs", NAMESPACE, name) is None  # it would wait for ever: deleted


async def test_where_a_cancelled_or_deadline_stopped_job_ran_is_kept(
    fake, kubeconfig, tmp_path, services
):
    fake.add_node("gpu-0", {"gpu": "a100"}, {"nvidia.com/gpu": "2"})
    svc = await start(tmp_path, kubeconfig)
    services.append(svc)
    cancelled, _, _ = await started_job(svc, fake, "c.ipynb")
    slow, slow_name, _ = await started_job(svc, fake, "s.ipynb")
    for job in (cancelled, slow):
        write_status(job_dir(svc, "ada", job["id"]) / "status.json", RunStatus("running", 2, 0, 0))
        await svc.wait("ada", job["id"], lambda j: j["state"] == "running" and j["node"])

    # the runner saves its partial output on SIGTERM before its pod goes
    for job in (cancelled, slow):
        status = job_dir(svc, "ada", job["id"]) / "status.json"
        write_status(status, RunStatus("cancelled", 2, 1, exit_code=4))
    async with svc.client("ada") as client:
        answer = await client.post(f"jobs/{cancelled['id']}/cancel")
    assert answer.status_code == 200, answer.text
    fake.job_condition(slow_name, NAMESPACE, "Failed", "DeadlineExceeded")

    stopped = await svc.wait("ada", cancelled["id"], timeout=20)
    timed_out = await svc.wait("ada", slow["id"], timeout=20)
    assert (stopped["state"], stopped["node"]) == ("cancelled", "gpu-0")
    assert (timed_out["state"], timed_out["node"]) == ("timed_out", "gpu-0")
    await eventually(lambda: not fake.list("pods", NAMESPACE))  # both pods are gone
    async with svc.client("root") as admin:
        listed = (await admin.get("jobs")).json()["jobs"]
    assert {(j["id"], j["node"]) for j in listed} == {
        (cancelled["id"], "gpu-0"),
        (slow["id"], "gpu-0"),
    }

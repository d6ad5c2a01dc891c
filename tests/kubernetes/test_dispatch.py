"""The dispatcher against a cluster whose creates are slow (admission webhooks), on SQLite
and PostgreSQL: starts overlap, the API keeps answering, a cancel during a start wins,
and a start the service did not record before it stopped is neither lost nor doubled.

The fake API server holds every create for ``create_delay`` seconds, as a validating
webhook or a busy API server does; it runs on the test's event loop, like the service,
so a service that blocked its loop would hold the fake's answers up too."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import nbformat
import yaml
from nbjobs.job_runner import RunStatus
from nbjobs.job_runner.status import write_status

from tests.job_service.conftest import free_port, stop_service

from .conftest import NAMESPACE, eventually
from .fake_apiserver import FakeApiServer
from .test_service import settings, start, status_file


def config(tmp_path: Path, database: str, gpus: int = 8) -> dict[str, Any]:
    data = settings(tmp_path)
    data["database"] = {"url": database}
    data["quotas"] = {"default": {"max_running_gpus": gpus, "max_queued_jobs": 50}}
    return data


async def finish(fake: FakeApiServer, svc: Any, user: str, job_id: str) -> None:
    """Play the pod of a job: it runs, the runner reports success, the pod ends."""
    pod = fake.start_pod(f"nbjobs-{job_id}", NAMESPACE, "gpu-0")["metadata"]["name"]
    fake.run_pod(pod, NAMESPACE)
    write_status(status_file(svc, user, job_id), RunStatus("succeeded", 1, 1, exit_code=0))
    fake.finish_pod(pod, NAMESPACE, exit_code=0)


async def test_slow_creates_overlap_and_the_api_keeps_answering(
    fake, kubeconfig, tmp_path, database
):
    fake.add_node("gpu-0", {"gpu": "a100"}, {"nvidia.com/gpu": "8", "memory": "256Gi"})
    # Every Job create is held by a webhook until the test lets them all answer: the
    # starts overlap when all six are held at once, which a dispatcher that started one
    # job after the other could never reach, however quick or loaded the machine.
    fake.create_gate = asyncio.Event()
    svc = await start(tmp_path, kubeconfig, config(tmp_path, database))
    try:
        svc.write("ada", "w.ipynb", "1")
        answered = 0  # GET /jobs answers so far
        stop = asyncio.Event()

        async def poll() -> None:
            nonlocal answered
            async with svc.client("ada") as client:
                while not stop.is_set():
                    response = await client.get("jobs")
                    assert response.status_code == 200
                    answered += 1
                    await asyncio.sleep(0.02)

        poller = asyncio.ensure_future(poll())
        async with svc.client("ada") as client:
            answers = await asyncio.gather(
                *(client.post("jobs", json={"path": "w.ipynb", "flavor": "a100"}) for _ in range(6))
            )
        assert [a.status_code for a in answers] == [201] * 6
        jobs = [a.json() for a in answers]
        # all six creates held at once: the dispatcher hands the later ones over while
        # the earlier ones wait
        await eventually(lambda: fake.creates_in_flight == 6, timeout=60)
        # and the API answers all along: a request that waited for a create would wait
        # until the gate opens (how fast it answers is bench/dispatch_bench.py's to
        # measure, not a test's on a busy CI machine)
        before = answered
        await eventually(lambda: answered >= before + 5, timeout=60)
        assert fake.list("jobs", NAMESPACE) == []  # nothing was stored meanwhile
        fake.create_gate.set()

        await eventually(lambda: len(fake.list("jobs", NAMESPACE)) == 6, timeout=60)
        for job in jobs:  # every job handed over
            await svc.wait("ada", job["id"], lambda j: j["state"] == "starting", timeout=60)
        stop.set()
        await poller
        assert fake.most_creates_in_flight == 6

        for job in jobs:
            await finish(fake, svc, "ada", job["id"])
        for job in jobs:
            done = await svc.wait("ada", job["id"], timeout=60)
            assert done["state"] == "succeeded"
        assert len(fake.list("jobs", NAMESPACE)) <= 6  # nothing created twice
    finally:
        await stop_service(svc)


async def test_a_cancel_while_the_job_is_being_created_wins(fake, kubeconfig, tmp_path, database):
    fake.add_node("gpu-0", {"gpu": "a100"}, {"nvidia.com/gpu": "2"})
    fake.create_delay = 1.0
    svc = await start(tmp_path, kubeconfig, config(tmp_path, database))
    try:
        svc.write("ada", "c.ipynb", "1")
        job = await svc.submit("ada", "c.ipynb", "a100")
        await eventually(lambda: fake.creates_in_flight == 1)  # the webhook holds it
        async with svc.client("ada") as client:
            began = time.monotonic()
            response = await client.post(f"jobs/{job['id']}/cancel")
            answered = time.monotonic() - began
        assert response.status_code == 200, response.text
        assert answered < 5.0
        # What the create made is deleted; the job never runs.
        await eventually(lambda: fake.get("jobs", NAMESPACE, f"nbjobs-{job['id']}") is None)
        done = await svc.wait("ada", job["id"], timeout=20)
        assert done["state"] == "cancelled"
        assert done["message"].startswith("cancelled by ada")
        creates = [q for q in fake.queries if q[0] == "create" and q[1] == "jobs"]
        assert len(creates) == 1
    finally:
        await stop_service(svc)


async def test_a_start_cut_short_by_a_stop_is_adopted_not_doubled(
    fake, kubeconfig, tmp_path, database
):
    fake.add_node("gpu-0", {"gpu": "a100"}, {"nvidia.com/gpu": "2"})
    fake.create_delay = 8.0  # far longer than a stop takes, even on a loaded machine
    data = config(tmp_path, database)
    first = await start(tmp_path, kubeconfig, data)
    first.write("ada", "s.ipynb", "1")
    job = await first.submit("ada", "s.ipynb", "a100")
    await eventually(lambda: fake.creates_in_flight == 1)
    first.service.dispatcher.stop_grace = 0.2  # the create outlasts the stop's patience
    began = time.monotonic()
    await stop_service(first)  # SIGTERM while the create is held: the start is not recorded
    assert time.monotonic() - began < 5  # it did not wait for the create
    # the API server stores the Job all the same, when its webhook lets it through
    await eventually(lambda: fake.get("jobs", NAMESPACE, f"nbjobs-{job['id']}"), timeout=30)

    fake.create_delay = 0.2
    second = await start(tmp_path, kubeconfig, data)
    try:
        # queued again and started again: the create is answered 409 and the Job adopted
        started = await second.wait("ada", job["id"], lambda j: j["state"] == "starting")
        assert started["state"] == "starting"
        await finish(fake, second, "ada", job["id"])
        done = await second.wait("ada", job["id"], timeout=20)
        assert done["state"] == "succeeded"
        assert [j["metadata"]["name"] for j in fake.list("jobs", NAMESPACE)] in (
            [],  # deleted by the TTL after it ended
            [f"nbjobs-{job['id']}"],
        )
    finally:
        await stop_service(second)


async def test_overlapping_starts_never_fill_a_node_past_its_gpus(
    fake, kubeconfig, tmp_path, database
):
    fake.add_node("gpu-0", {"gpu": "a100"}, {"nvidia.com/gpu": "3", "memory": "256Gi"})
    fake.create_gate = asyncio.Event()  # every create hangs until the test answers it
    svc = await start(tmp_path, kubeconfig, config(tmp_path, database))
    try:
        svc.write("ada", "f.ipynb", "1")
        svc.write("bob", "f.ipynb", "1")
        jobs = [await svc.submit(user, "f.ipynb", "a100") for user in ["ada", "bob"] * 4]
        # three creates go out together and none is answered yet
        await eventually(lambda: fake.creates_in_flight == 3)
        dispatcher = svc.service.dispatcher
        passed = dispatcher.passes
        dispatcher.wake()
        await eventually(lambda: dispatcher.passes >= passed + 2)
        assert fake.creates_in_flight == 3  # more passes while they hang: no fourth
        fake.create_gate.set()
        await eventually(lambda: len(fake.list("jobs", NAMESPACE)) == 3)
        # every create answered, then two more passes over the queue: still three
        await eventually(lambda: fake.creates_in_flight == 0)
        passed = dispatcher.passes
        dispatcher.wake()
        await eventually(lambda: dispatcher.passes >= passed + 2)
        assert len(fake.list("jobs", NAMESPACE)) == 3
        assert fake.most_creates_in_flight == 3
        views = [await svc.job(j["user"], j["id"]) for j in jobs]
        waiting = [v for v in views if v["state"] == "queued"]
        assert len(waiting) == 5
        assert {v["waiting_reason"] for v in waiting} == {"waiting for a free GPU for a100"}
        # fair share: both users got a GPU
        started = {v["user"] for v in views if v["state"] == "starting"}
        assert started == {"ada", "bob"}
    finally:
        await stop_service(svc)


async def test_sigterm_stops_the_service_in_seconds_while_a_create_hangs(
    fake, kubeconfig, tmp_path
):
    """A real `nbjobs service` process, its Job create held by the API server: SIGTERM
    ends it within seconds, and the next start makes the job's one Job."""
    fake.add_node("gpu-0", {"gpu": "a100"}, {"nvidia.com/gpu": "2"})
    fake.create_delay = 30.0
    config_file = tmp_path / "nbjobs.yaml"
    config_file.write_text(yaml.safe_dump(settings(tmp_path)))
    home = tmp_path / "home" / "ada"
    home.mkdir(parents=True)
    cells = [nbformat.v4.new_code_cell("1")]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), home / "t.ipynb")
    headers = {"Authorization": "token ada-token"}

    def service() -> tuple[subprocess.Popen[bytes], str]:
        port = free_port()
        command = [sys.executable, "-m", "nbjobs.cli", "service", f"--config={config_file}"]
        command += [f"--port={port}", f"--KubernetesBackend.kubeconfig={kubeconfig}"]
        command += ["--KubernetesBackend.retry_delay=0.05", "--JobServiceApp.lease_seconds=3"]
        env = {**os.environ, "NBJOBS_SERVICE_TOKENS": json.dumps({"ada-token": "ada"})}
        with (tmp_path / f"service-{port}.log").open("wb") as log:
            proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        return proc, f"http://127.0.0.1:{port}/api/"

    async def wait_up(client: httpx.AsyncClient) -> None:
        for _ in range(600):
            with contextlib.suppress(httpx.TransportError):
                if (await client.get("health")).is_success:
                    return
            await asyncio.sleep(0.1)
        raise AssertionError("the service did not come up")

    proc, url = service()
    try:
        async with httpx.AsyncClient(base_url=url, headers=headers) as client:
            await wait_up(client)
            answer = await client.post("jobs", json={"path": "t.ipynb", "flavor": "a100"})
            assert answer.status_code == 201, answer.text
            job = answer.json()
            await eventually(lambda: fake.creates_in_flight == 1, timeout=20)
        began = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            await asyncio.to_thread(proc.wait, 20)
        took = time.monotonic() - began
        assert proc.returncode == 0, proc.returncode
        assert took < 20.0, f"SIGTERM took {took:.1f} s (the create is held 30 s)"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    fake.create_delay = 0.0  # the held create is still held; the next one goes through
    proc, url = service()
    try:
        async with httpx.AsyncClient(base_url=url, headers=headers) as client:
            await wait_up(client)
            name = f"nbjobs-{job['id']}"
            await eventually(lambda: fake.get("jobs", NAMESPACE, name), timeout=20)
            for _ in range(100):
                state = (await client.get(f"jobs/{job['id']}")).json()["state"]
                if state == "starting":
                    break
                await asyncio.sleep(0.1)
            assert state == "starting"
        assert [j["metadata"]["name"] for j in fake.list("jobs", NAMESPACE)] == [name]
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.to_thread(proc.wait, 20)

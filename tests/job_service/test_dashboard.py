"""The dashboard as the job service serves it: the page (no data in it, a strict
Content-Security-Policy), its built files, who the caller is (api/me), and the admins'
overview of GPUs, queues, failures and the backend (api/dashboard/overview)."""

from __future__ import annotations

import asyncio
import socket

import httpx
from nbjobs.job_service.db import JobSample, utcnow


def running(job: dict) -> bool:
    return job["state"] == "running"


async def page(svc, path: str = "") -> httpx.Response:
    async with httpx.AsyncClient(base_url=svc.url, timeout=30) as c:
        return await c.get(path)


async def test_the_page_is_served_at_the_prefix_with_no_data_and_a_strict_policy(svc):
    for path in ("", "dashboard", "dashboard/"):
        r = await page(svc, path)
        assert r.status_code == 200, path
        assert r.headers["Content-Type"].startswith("text/html")
        policy = r.headers["Content-Security-Policy"]
        assert "script-src 'self'" in policy
        assert "default-src 'none'" in policy
        assert "frame-ancestors 'self'" in policy
        assert r.headers["Cache-Control"] == "no-store"
        # standalone: no token in the page (it asks for one); the API's place is named
        assert '<meta name="nbjobs-token" content="">' in r.text
        assert '<meta name="nbjobs-api" content="/services/nbjobs/api/">' in r.text
    script = await page(svc, "dashboard/static/dashboard.js")
    assert script.status_code == 200
    assert "javascript" in script.headers["Content-Type"]
    assert "nbjobs-dashboard" in script.text  # the page's own code, bundled with its charts
    # a path out of the built files is refused, however it is spelled
    escape = await page(svc, "dashboard/static/..%2F..%2F..%2Fnbjobs.yaml")
    assert escape.status_code in (403, 404)
    assert "storage" not in escape.text


async def test_me_says_who_the_caller_is_and_what_the_page_may_offer(svc):
    async with svc.client("root") as c:
        root = (await c.get("me")).json()
    async with svc.client("ada") as c:
        ada = (await c.get("me")).json()
    async with svc.client(None) as c:
        nobody = await c.get("me")
    assert (root["name"], root["admin"]) == ("root", True)
    assert (ada["name"], ada["admin"], ada["teacher"], ada["classes"]) == ("ada", False, False, [])
    assert ada["groups"] == ["students"]
    assert nobody.status_code in (401, 403)


async def test_the_overview_is_for_admins_only(svc):
    async with svc.client("ada") as c:
        r = await c.get("dashboard/overview")
    assert r.status_code == 403
    assert r.json()["message"] == (
        "the overview of GPUs and queues is for nbjobs admins; your usage is under api/usage"
    )


async def test_the_overview_counts_gpus_held_and_busy_jobs_per_flavor_waits_and_failures(svc):
    # two GPUs of two slots each: a whole-GPU job and a slice run; a two-GPU job waits
    svc.script("root", "long.py", "import time; time.sleep(30)")
    svc.script("root", "bad.py", "raise ValueError('broken on purpose')")
    whole = await svc.submit("root", "long.py", "gpu")
    part = await svc.submit("root", "long.py", "slice")
    await svc.wait("root", whole["id"], running)
    await svc.wait("root", part["id"], running)
    waiting = await svc.submit("root", "long.py", "gpu2")  # needs both GPUs: waits
    failed = await svc.submit("root", "bad.py", "cpu")
    assert (await svc.wait("root", failed["id"]))["state"] == "failed"
    # the running GPU job's runner said its GPU was 50 % busy
    with svc.service.sessions() as db:
        db.add(JobSample(job_id=whole["id"], at=utcnow(), gpu_utilization_percent=50.0, gpus=[]))
        db.commit()
    await asyncio.sleep(1.1)

    async with svc.client("root") as c:
        r = await c.get("dashboard/overview")
    assert r.status_code == 200, r.text
    view = r.json()
    [node] = view["nodes"]
    # the whole GPU, and half of the other (one of its two slots)
    assert (node["total"], node["allocated"]) == (2.0, 1.5)
    assert node["busy"] == 0.5  # 50 % of one GPU; the slice reported nothing
    assert sorted(node["jobs"]) == sorted([whole["id"], part["id"]])
    assert node["drained"] is False
    assert view["gpus"] == {"total": 2.0, "allocated": 1.5, "busy": 0.5}
    flavors = {f["name"]: f for f in view["flavors"]}
    assert (flavors["gpu"]["running"], flavors["slice"]["running"]) == (1, 1)
    assert flavors["gpu2"]["queued"] == 1
    assert flavors["gpu2"]["longest_wait_seconds"] >= 1
    assert flavors["cpu"]["longest_wait_seconds"] is None
    assert view["longest_wait"]["id"] == waiting["id"]
    assert view["longest_wait"]["reason"]  # why it waits, in the service's words
    [failure] = view["recent_failures"]
    assert (failure["id"], failure["user"], failure["state"]) == (failed["id"], "root", "failed")
    assert "ValueError" in failure["message"]
    assert view["backend"]["kind"] == "local"
    assert view["backend"]["ok"] is True
    assert "2 GPU(s), 2 running" in view["backend"]["detail"]

    async with svc.client("root") as c:
        for job in (whole, part, waiting):
            await c.post(f"jobs/{job['id']}/cancel")


async def queue(svc, user: str = "root") -> list[dict]:
    async with svc.client(user) as c:
        r = await c.get("dashboard/queue")
    assert r.status_code == 200, r.text
    return r.json()


async def move(svc, job_id: str, to: str, user: str = "root") -> httpx.Response:
    async with svc.client(user) as c:
        return await c.post(f"dashboard/queue/{job_id}/move", json={"to": to})


async def test_admins_see_the_queue_in_dispatch_order_and_move_jobs_saying_who_did(svc):
    svc.script("root", "hold.py", "import time; time.sleep(60)")
    holder = await svc.submit("root", "hold.py", "gpu2")  # both GPUs: everything waits
    await svc.wait("root", holder["id"], running)
    svc.script("ada", "w.py", "1")
    svc.script("bob", "w.py", "1")
    ada1 = await svc.submit("ada", "w.py", "gpu", name="ada-1")
    ada2 = await svc.submit("ada", "w.py", "gpu", name="ada-2")
    bob1 = await svc.submit("bob", "w.py", "gpu", name="bob-1")
    # once the dispatcher has looked, it has written why each waits
    await svc.wait("ada", ada1["id"], lambda j: j["waiting_reason"] is not None)

    before = await queue(svc)
    # fair share: bob's one job comes before ada's second
    assert [j["id"] for j in before] == [ada1["id"], bob1["id"], ada2["id"]]
    assert [j["place"] for j in before] == [1, 2, 3]
    assert all(j["moved_by"] is None for j in before)
    assert before[0]["reason"]  # e.g. waiting for a free GPU

    after = await move(svc, ada2["id"], "front")
    assert after.status_code == 200, after.text
    moved = after.json()
    # ada's moved job first; then fair share puts bob's before her other one
    assert [j["id"] for j in moved] == [ada2["id"], bob1["id"], ada1["id"]]
    assert (moved[0]["moved_by"], moved[0]["priority"]) == ("root", 1)
    assert moved[0]["moved_at"] is not None
    # the job itself shows its new place to its owner
    assert (await svc.job("ada", ada2["id"]))["queue_position"] == 1

    # down: one priority below the job behind it, so behind that job (and its equals)
    down = [j["id"] for j in (await move(svc, ada2["id"], "down")).json()]
    assert down.index(ada2["id"]) > down.index(ada1["id"])
    back = (await move(svc, ada2["id"], "back")).json()
    assert back[-1]["id"] == ada2["id"]
    # up: one priority above the job ahead of it, so ahead of that job
    ahead = back[-2]["id"]
    up = [j["id"] for j in (await move(svc, ada2["id"], "up")).json()]
    assert up.index(ada2["id"]) < up.index(ahead)
    # already first: front changes nothing (and records nothing new)
    first = (await move(svc, up[0], "front")).json()
    assert [j["id"] for j in first] == up

    # what may not be done is refused in words
    refused = await move(svc, ada1["id"], "front", user="ada")
    assert refused.status_code == 403
    assert refused.json()["message"] == "the queue of everyone's jobs is for nbjobs admins"
    running_one = await move(svc, holder["id"], "front")
    assert running_one.status_code == 409
    assert "only a queued job can move" in running_one.json()["message"]
    bad = await move(svc, ada1["id"], "sideways")
    assert bad.status_code == 400
    async with svc.client("ada") as c:
        assert (await c.get("dashboard/queue")).status_code == 403

    async with svc.client("root") as c:
        for job in (holder, ada1, ada2, bob1):
            await c.post(f"jobs/{job['id']}/cancel")


async def drain(svc, node: str, user: str = "root", **body) -> httpx.Response:
    async with svc.client(user) as c:
        return await c.post(f"dashboard/nodes/{node}/drain", json=body)


async def test_a_drained_machine_starts_no_gpu_job_says_why_and_undrains(svc):
    node = socket.gethostname()
    r = await drain(svc, node, reason="new fans")
    assert r.status_code == 200, r.text
    [view] = r.json()
    assert (view["node"], view["drained"]) == (node, True)
    assert (view["drain"]["by"], view["drain"]["reason"]) == ("root", "new fans")

    svc.script("ada", "g.py", "1")
    gpu = await svc.submit("ada", "g.py", "gpu")
    cpu = await svc.submit("ada", "g.py", "cpu")
    waiting = await svc.wait("ada", gpu["id"], lambda j: j["waiting_reason"] is not None)
    assert waiting["waiting_reason"] == (
        "waiting for a free GPU for 1 GPU (this machine's GPUs are in maintenance: GPU jobs "
        "wait until an admin undrains it)"
    )
    assert (await svc.wait("ada", cpu["id"]))["state"] == "succeeded"  # CPU jobs go on
    async with svc.client("ada") as c:
        flavors = {f["name"]: f for f in (await c.get("flavors")).json()}
    assert flavors["gpu"]["maintenance"].startswith("this machine's GPUs are in maintenance")
    assert flavors["gpu"]["free_gpus"] == 0
    assert flavors["cpu"]["maintenance"] is None
    async with svc.client("root") as c:
        overview = (await c.get("dashboard/overview")).json()
    assert overview["nodes"][0]["drained"] is True

    async with svc.client("root") as c:
        undrained = await c.delete(f"dashboard/nodes/{node}/drain")
    assert undrained.status_code == 200, undrained.text
    assert undrained.json()[0]["drain"] is None
    assert (await svc.wait("ada", gpu["id"]))["state"] == "succeeded"


async def test_draining_with_cancel_stops_the_gpu_jobs_there_saying_why(svc):
    node = socket.gethostname()
    svc.script("ada", "long.py", "import time; time.sleep(60)")
    gpu = await svc.submit("ada", "long.py", "gpu")
    cpu = await svc.submit("ada", "long.py", "cpu")
    await svc.wait("ada", gpu["id"], running)
    await svc.wait("ada", cpu["id"], running)
    async with svc.client("root") as c:
        [before] = (await c.get("dashboard/nodes")).json()
    assert {j["id"] for j in before["jobs"]} == {gpu["id"], cpu["id"]}

    r = await drain(svc, node, reason="disk swap", cancel_running=True)
    assert r.status_code == 200, r.text
    stopped = await svc.wait("ada", gpu["id"])
    assert stopped["state"] == "cancelled"
    assert stopped["message"].startswith(
        f"cancelled by root: node {node} was drained for maintenance (disk swap)"
    )
    assert (await svc.job("ada", cpu["id"]))["state"] == "running"  # a CPU job holds no GPU
    async with svc.client("root") as c:
        await c.post(f"jobs/{cpu['id']}/cancel")
        await c.delete(f"dashboard/nodes/{node}/drain")


async def test_drains_are_for_admins_and_name_real_nodes(svc):
    refused = await drain(svc, socket.gethostname(), user="ada")
    assert refused.status_code == 403
    assert refused.json()["message"] == "only nbjobs admins drain and undrain nodes"
    unknown = await drain(svc, "gpu-99")
    assert unknown.status_code == 404
    assert unknown.json()["message"] == (
        f"no node 'gpu-99' with GPUs here; the nodes are: {socket.gethostname()}"
    )
    async with svc.client("root") as c:
        not_drained = await c.delete("dashboard/nodes/gpu-99/drain")
        too_long = await c.post(
            f"dashboard/nodes/{socket.gethostname()}/drain", json={"reason": "x" * 501}
        )
    async with svc.client("ada") as c:
        nodes = await c.get("dashboard/nodes")
    assert not_drained.status_code == 404
    assert not_drained.json()["message"] == "node 'gpu-99' is not drained"
    assert too_long.status_code == 400
    assert nodes.status_code == 403


async def drain_gpu(svc, gpu: str, user: str = "root", **body) -> httpx.Response:
    async with svc.client(user) as c:
        return await c.post(f"dashboard/nodes/{socket.gethostname()}/gpus/{gpu}/drain", json=body)


async def undrain_gpu(svc, gpu: str) -> httpx.Response:
    async with svc.client("root") as c:
        return await c.delete(f"dashboard/nodes/{socket.gethostname()}/gpus/{gpu}/drain")


async def test_one_gpu_of_the_machine_is_drained_alone_and_the_other_goes_on(svc):
    node = socket.gethostname()
    cell, open_gate = svc.gate("ada", "one-gpu")
    svc.write("ada", "held.ipynb", cell)
    svc.write("ada", "quick.ipynb", "1")
    first = await svc.submit("ada", "held.ipynb", "gpu")
    first = await svc.wait("ada", first["id"], running)
    [held] = first["gpus"]
    other = "1" if held == "0" else "0"
    try:
        # the GPU no job holds: nothing stops, the machine stays open, its users are told
        r = await drain_gpu(svc, other, reason="fan noise")
        assert r.status_code == 200, r.text
        [view] = r.json()
        assert (view["drained"], view["drain"]) == (False, None)
        slots = {s["id"]: s for s in view["gpu_slots"]}
        assert (slots[other]["drained"], slots[other]["drain"]["reason"]) == (True, "fan noise")
        assert (slots[held]["drained"], slots[held]["jobs"]) == (False, [first["id"]])
        async with svc.client("ada") as c:
            flavors = {f["name"]: f for f in (await c.get("flavors")).json()}
        assert flavors["gpu"]["maintenance"] == f"1 of 2 GPUs in maintenance (GPU {other})"
        assert flavors["cpu"]["maintenance"] is None
        # the Overview's row of the machine says which GPU is out, not plainly "open"
        async with svc.client("root") as c:
            [row] = (await c.get("dashboard/overview")).json()["nodes"]
        assert (row["drained"], row["drained_gpus"]) == (False, [other])
        # the open GPU is held: a second GPU job waits rather than taking the drained one
        second = await svc.submit("ada", "quick.ipynb", "gpu")
        waiting = await svc.wait("ada", second["id"], lambda j: j["waiting_reason"] is not None)
        assert waiting["state"] == "queued"

        # the held one, cancelling what runs there: only its job stops, saying why
        r = await drain_gpu(svc, held, reason="swap", cancel_running=True)
        assert r.status_code == 200, r.text
        stopped = await svc.wait("ada", first["id"])
        assert stopped["state"] == "cancelled"
        assert stopped["message"].startswith(
            f"cancelled by root: GPU {held} of node {node} was drained for maintenance (swap)"
        )
        assert (await svc.job("ada", second["id"]))["state"] == "queued"

        # a GPU opened again takes the waiting job
        assert (await undrain_gpu(svc, other)).status_code == 200
        ran = await svc.wait("ada", second["id"])
        assert (ran["state"], ran["gpus"]) == ("succeeded", [other])
    finally:
        open_gate()
        await undrain_gpu(svc, other)
        await undrain_gpu(svc, held)


async def test_a_gpu_drain_names_a_gpu_of_the_machine(svc):
    unknown = await drain_gpu(svc, "7")
    assert unknown.status_code == 404
    assert unknown.json()["message"] == (
        f"no GPU '7' on node '{socket.gethostname()}'; its GPUs are: 0, 1"
    )
    assert (await drain_gpu(svc, "0", user="ada")).status_code == 403
    not_drained = await undrain_gpu(svc, "1")
    assert not_drained.status_code == 404
    assert not_drained.json()["message"] == (
        f"GPU 1 of node '{socket.gethostname()}' is not drained"
    )

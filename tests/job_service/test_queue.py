"""The queue: GPUs never doubly booked, quotas, priority, fair share, cancel, many submissions.

Where the subject is the queue, not a notebook's run, the jobs are scripts (a real runner and
process without a kernel), as users submit them too."""

from __future__ import annotations

import asyncio
import os
import signal

import httpx
import nbformat
import psutil

from .conftest import stop_all, stop_service

SHOW_GPUS = "import os; print('GPUS=' + os.environ['CUDA_VISIBLE_DEVICES'], flush=True)"


def running(job):
    return job["state"] == "running"


def gpus_printed(svc, user, job):
    out = nbformat.read(svc.home(user) / job["output_path"], as_version=4)
    texts = [o.get("text", "") for c in out.cells for o in c.get("outputs", [])]
    (line,) = [t for t in texts if t.startswith("GPUS=")]
    return line.strip().removeprefix("GPUS=")


async def test_each_job_gets_its_own_gpus_and_the_rest_wait(svc):
    hold, release = svc.gate("root")
    svc.write("root", "g.ipynb", SHOW_GPUS, hold)
    first = await svc.submit("root", "g.ipynb", "gpu")
    second = await svc.submit("root", "g.ipynb", "gpu")
    third = await svc.submit("root", "g.ipynb", "gpu")

    a = await svc.wait("root", first["id"], running)
    b = await svc.wait("root", second["id"], running)
    waiting = await svc.job("root", third["id"])

    assert {tuple(a["gpus"]), tuple(b["gpus"])} == {("0",), ("1",)}
    assert waiting["state"] == "queued"
    assert waiting["queue_position"] == 1
    assert waiting["waiting_reason"] == "waiting for a free GPU for 1 GPU"
    release()
    done = [await svc.wait("root", j["id"]) for j in (first, second, third)]
    assert [j["state"] for j in done] == ["succeeded"] * 3
    assert {gpus_printed(svc, "root", j) for j in done[:2]} == {"0", "1"}


async def test_cpu_flavors_see_no_gpu(svc):
    svc.write("ada", "c.ipynb", SHOW_GPUS)

    done = await svc.wait("ada", (await svc.submit("ada", "c.ipynb", "cpu"))["id"])

    assert done["gpus"] == []
    assert gpus_printed(svc, "ada", done) == ""


async def test_shared_slices_fill_one_gpu_before_the_next_and_block_whole_gpus(svc):
    hold, release = svc.gate("root")
    svc.script("root", "s.py", SHOW_GPUS, hold)
    slices = [await svc.submit("root", "s.py", "slice") for _ in range(3)]
    started = [await svc.wait("root", j["id"], running) for j in slices]
    whole = await svc.submit("root", "s.py", "gpu")

    gpus = sorted(j["gpus"][0] for j in started)
    assert gpus == ["0", "0", "1"]  # two share GPU 0, the third opens GPU 1
    looked_at = await svc.wait("root", whole["id"], lambda j: j["waiting_reason"] is not None)
    assert looked_at["state"] == "queued"
    release()
    assert (await svc.wait("root", whole["id"]))["state"] == "succeeded"


async def test_running_gpu_quota_makes_jobs_wait_with_the_reason(svc):
    hold, release = svc.gate("ada")
    svc.script("ada", "q.py", hold)
    big = await svc.submit("ada", "q.py", "gpu2")
    await svc.wait("ada", big["id"], running)
    svc.script("bob", "q.py", "1")

    more = await svc.submit("ada", "q.py", "gpu")
    waiting = await svc.wait("ada", more["id"], lambda j: j["waiting_reason"] is not None)

    assert waiting["state"] == "queued"
    assert waiting["waiting_reason"] == (
        "waiting for ada's running jobs: ada may use 2 GPU(s) at once and uses 2"
    )
    release()
    assert (await svc.wait("ada", more["id"]))["state"] == "succeeded"


async def test_queued_job_limit_refuses_with_429(start):
    svc = await start({"quotas": {"default": {"max_queued_jobs": 1}}})
    try:
        hold, _ = svc.gate("ada")  # the two running stay so to the end (cancelled below)
        svc.script("ada", "l.py", hold)
        for _ in range(2):  # two run (cpu_slots: 2)
            await svc.wait("ada", (await svc.submit("ada", "l.py"))["id"], running)
        await svc.submit("ada", "l.py")  # one waits

        async with svc.client("ada") as c:
            r = await c.post("jobs", json={"path": "l.py", "flavor": "cpu"})

        assert r.status_code == 429
        assert r.json()["message"] == (
            "you have 1 jobs waiting, the most you may have queued; "
            "wait for some to start or cancel some"
        )
    finally:
        for job in list(svc.service.backend.running.values()):
            await svc.service.backend.cancel(f"{job.job_id}:{job.pid}:{job.created:.3f}")
        await stop_service(svc)


async def test_used_up_gpu_hours_refuse_gpu_flavors_but_not_cpu(start):
    svc = await start({"quotas": {"default": {"gpu_hours": 0}}})
    try:
        svc.script("ada", "h.py", "1")
        async with svc.client("ada") as c:
            gpu = await c.post("jobs", json={"path": "h.py", "flavor": "gpu"})
            cpu = await c.post("jobs", json={"path": "h.py", "flavor": "cpu"})

        assert gpu.status_code == 429
        assert "you have used 0 of your 0 GPU-hours in the last 7 days" in gpu.json()["message"]
        assert cpu.status_code == 201
    finally:
        await stop_service(svc)


async def test_cancel_stops_the_whole_process_tree_and_keeps_partial_output(svc):
    svc.write(
        "ada", "c.ipynb", "print('before', flush=True)", "import time\nwhile True: time.sleep(0.1)"
    )
    job = await svc.submit("ada", "c.ipynb")
    await svc.wait("ada", job["id"], lambda j: j["progress"]["cells_done"] == 1)
    backend = svc.service.backend
    runner = backend.running[job["id"]]
    tree = [*psutil.Process(runner.pid).children(recursive=True), psutil.Process(runner.pid)]

    async with svc.client("ada") as c:
        r = await c.post(f"jobs/{job['id']}/cancel")

    assert r.status_code == 200
    done = await svc.wait("ada", job["id"])
    assert done["state"] == "cancelled"
    assert done["message"] == "cancelled by ada; the output keeps the cells that ran"
    out = nbformat.read(svc.home("ada") / done["output_path"], as_version=4)
    assert out.cells[1].outputs[0]["text"] == "before\n"
    # the output's banner says who cancelled it, as the panel does (not "SIGTERM")
    banner = out.cells[0].source
    assert "cancelled by ada" in banner
    assert "SIGTERM" not in banner
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in tree)
    async with svc.client("ada") as c:
        again = await c.post(f"jobs/{job['id']}/cancel")
    assert again.status_code == 409


async def test_a_runner_killed_from_outside_nbjobs_fails_saying_so_not_cancelled(svc):
    """A SIGTERM nbjobs did not send (an admin's kill, the machine shutting down): the
    runner saves the cells that ran, but the job is no cancel: it fails in those words."""
    svc.write(
        "ada", "k.ipynb", "print('before', flush=True)", "import time\nwhile True: time.sleep(0.1)"
    )
    job = await svc.submit("ada", "k.ipynb")
    await svc.wait("ada", job["id"], lambda j: j["progress"]["cells_done"] == 1)
    os.kill(svc.service.backend.running[job["id"]].pid, signal.SIGTERM)

    done = await svc.wait("ada", job["id"])
    assert done["state"] == "failed"
    assert done["message"] == (
        "its process was stopped outside nbjobs (SIGTERM): killed, or the machine shut "
        "down; nobody cancelled it here; re-run it"
    )
    out = nbformat.read(svc.home("ada") / done["output_path"], as_version=4)
    assert out.cells[1].outputs[0]["text"] == "before\n"  # what ran is kept


async def test_cancel_a_queued_job_at_once(svc):
    hold, _ = svc.gate("root")  # the fixture's end cancels it
    svc.script("root", "w.py", hold)
    hog = await svc.submit("root", "w.py", "gpu2")
    await svc.wait("root", hog["id"], running)
    queued = await svc.submit("root", "w.py", "gpu")

    async with svc.client("root") as c:
        r = await c.post(f"jobs/{queued['id']}/cancel")

    assert r.json()["state"] == "cancelled"
    assert r.json()["message"] == "cancelled by root before it started"
    assert r.json()["started_at"] is None


async def test_admin_priority_jumps_the_queue(svc):
    hold, release = svc.gate("root")
    svc.script("root", "p.py", hold)
    hog = await svc.submit("root", "p.py", "gpu2")
    await svc.wait("root", hog["id"], running)
    svc.script("ada", "p.py", "1")
    early = await svc.submit("ada", "p.py", "gpu2")
    late = await svc.submit("ada", "p.py", "gpu2")

    async with svc.client("ada") as c:
        refused = await c.patch(f"jobs/{late['id']}", json={"priority": 10})
    async with svc.client("root") as c:
        bumped = await c.patch(f"jobs/{late['id']}", json={"priority": 10})

    assert refused.status_code == 403
    assert bumped.json()["queue_position"] == 1
    assert (await svc.job("ada", early["id"]))["queue_position"] == 2
    release()
    first, second = await svc.wait("ada", late["id"]), await svc.wait("ada", early["id"])
    assert first["started_at"] < second["started_at"]


async def test_fair_share_lets_a_second_user_in_before_the_first_users_backlog(start):
    svc = await start({"backend": {"kind": "local", "local": {"gpus": [0], "cpu_slots": 1}}})
    try:
        # ada's first job holds the one slot until bob's job is queued behind her three
        hold, release = svc.gate("ada")
        svc.script("ada", "f.py", hold)
        svc.script("bob", "f.py", "1")
        ada = [await svc.submit("ada", "f.py") for _ in range(3)]
        bob = await svc.submit("bob", "f.py")
        release()

        done = [await svc.wait("root", j["id"], timeout=120) for j in [*ada, bob]]

        order = sorted(done, key=lambda j: j["started_at"])
        assert [j["user"] for j in order][:2] == ["ada", "bob"]
    finally:
        await stop_service(svc)


async def test_two_hundred_submissions_at_once_are_each_recorded_once(start):
    # the subject is that each is recorded once, however long 200 checks take on a busy
    # machine: no submit is sent back to come again later
    svc = await start({"limits": {"check_wait": "5m"}})
    try:
        svc.write("ada", "many.ipynb", "1")  # each submit's notebook is checked
        hold, _ = svc.gate("root")  # held until the end: the rest stay queued
        svc.script("root", "hog.py", hold)
        hog = await svc.submit("root", "hog.py", "gpu2")  # holds both GPUs: the rest queue
        await svc.wait("root", hog["id"], running)

        async with svc.client("ada") as c:
            c.timeout = httpx.Timeout(300)
            responses = await asyncio.gather(
                *(c.post("jobs", json={"path": "many.ipynb", "flavor": "gpu"}) for _ in range(200))
            )
            listed = (await c.get("jobs", params={"limit": 500})).json()
    finally:
        await stop_all(svc)

    refused = {r.text for r in responses if r.status_code != 201}
    assert [r.status_code for r in responses] == [201] * 200, refused
    ids = {r.json()["id"] for r in responses}
    assert len(ids) == 200
    assert listed["total"] == 200
    assert {j["id"] for j in listed["jobs"]} == ids
    assert sorted(j["queue_position"] for j in listed["jobs"]) == list(range(1, 201))


async def test_queue_positions_are_the_order_the_scheduler_starts_jobs_in(start):
    svc = await start({"backend": {"kind": "local", "local": {"gpus": [0], "cpu_slots": 1}}})
    try:
        hog_holds, release_hog = svc.gate("root")
        ada_holds, release_ada = svc.gate("ada")
        svc.script("root", "hog.py", hog_holds)
        svc.script("ada", "f.py", ada_holds)
        svc.script("bob", "f.py", "1")
        hog = await svc.submit("root", "hog.py")
        await svc.wait("root", hog["id"], running)
        ada = [await svc.submit("ada", "f.py") for _ in range(2)]
        bob = await svc.submit("bob", "f.py")

        async def positions() -> dict[str, int]:
            async with svc.client("root") as c:
                listed = (await c.get("jobs", params={"state": "queued"})).json()
            return {j["id"]: j["queue_position"] for j in listed["jobs"]}

        # Fair share: once ada's first job starts, bob's one job goes before her second.
        before = await positions()
        assert [before[j["id"]] for j in [*ada, bob]] == [1, 3, 2]
        release_hog()
        await svc.wait("ada", ada[0]["id"], running)
        # ada runs a job and bob none: bob's job is next, though ada submitted first
        assert (await svc.job("bob", bob["id"]))["queue_position"] == 1
        assert (await svc.job("ada", ada[1]["id"]))["queue_position"] == 2
        release_ada()
        done = [await svc.wait("root", j["id"], timeout=120) for j in [*ada, bob]]
        started = sorted(done, key=lambda j: j["started_at"])
        assert [before[j["id"]] for j in started] == [1, 2, 3]
    finally:
        await stop_all(svc)


async def test_an_admin_submitting_with_a_priority_jumps_the_queue(svc):
    hold, release = svc.gate("root")
    svc.script("root", "p.py", hold)
    hog = await svc.submit("root", "p.py", "gpu2")
    await svc.wait("root", hog["id"], running)
    svc.script("ada", "p.py", "1")
    early = await svc.submit("ada", "p.py", "gpu2")

    urgent = await svc.submit("root", "p.py", "gpu2", priority=10)

    assert urgent["priority"] == 10
    assert urgent["queue_position"] == 1
    assert (await svc.job("ada", early["id"]))["queue_position"] == 2
    release()
    first, second = await svc.wait("root", urgent["id"]), await svc.wait("ada", early["id"])
    assert first["started_at"] < second["started_at"]


async def test_list_filters_by_state_and_flavor_return_exactly_the_matching_jobs(svc):
    svc.script("ada", "quick.py", "1")
    svc.script("ada", "slow.py", "import time; time.sleep(30)")
    svc.script("root", "hog.py", "import time; time.sleep(30)")
    gpu_done = await svc.wait("ada", (await svc.submit("ada", "quick.py", "gpu"))["id"])
    cpu_done = await svc.wait("ada", (await svc.submit("ada", "quick.py", "cpu"))["id"])
    hog = await svc.submit("root", "hog.py", "gpu2")  # holds both GPUs: ada's GPU jobs wait
    await svc.wait("root", hog["id"], running)
    cpu_running = await svc.submit("ada", "slow.py", "cpu")
    await svc.wait("ada", cpu_running["id"], running)
    gpu_queued = await svc.submit("ada", "quick.py", "gpu")
    gpu2_queued = await svc.submit("ada", "quick.py", "gpu2")

    async def ids(who: str, **params: str) -> list[str]:
        async with svc.client(who) as c:
            listed = (await c.get("jobs", params=params)).json()
        assert listed["total"] == len(listed["jobs"])
        return [j["id"] for j in listed["jobs"]]  # newest first

    assert await ids("ada", state="queued,running") == [
        gpu2_queued["id"],
        gpu_queued["id"],
        cpu_running["id"],
    ]
    assert await ids("ada", state="running") == [cpu_running["id"]]
    assert await ids("ada", state="succeeded") == [cpu_done["id"], gpu_done["id"]]
    assert await ids("ada", flavor="gpu") == [gpu_queued["id"], gpu_done["id"]]
    assert await ids("ada", flavor="gpu", state="queued") == [gpu_queued["id"]]
    assert await ids("root", state="running") == [cpu_running["id"], hog["id"]]
    assert await ids("root", state="running", user="root") == [hog["id"]]
    assert await ids("bob", state="queued,running") == []


async def test_queue_positions_follow_every_change_of_the_queue(svc):
    # positions are worked out once per change of the queue: each change must show
    svc.script("root", "hog.py", "import time; time.sleep(60)")
    svc.script("ada", "w.py", "1")
    svc.script("bob", "w.py", "1")
    hog = await svc.submit("root", "hog.py", "gpu2")  # both GPUs: the rest wait
    await svc.wait("root", hog["id"], running)

    async def places(*jobs):
        return [(await svc.job("root", j["id"]))["queue_position"] for j in jobs]

    ada1 = await svc.submit("ada", "w.py", "gpu")
    ada2 = await svc.submit("ada", "w.py", "gpu")
    assert await places(ada1, ada2) == [1, 2]
    bob = await svc.submit("bob", "w.py", "gpu")  # fair share: after ada's first
    assert await places(ada1, bob, ada2) == [1, 2, 3]
    async with svc.client("ada") as c:
        assert (await c.post(f"jobs/{ada1['id']}/cancel")).status_code == 200
    assert await places(ada2, bob) == [1, 2]  # submission order between equals
    async with svc.client("root") as c:
        assert (await c.patch(f"jobs/{bob['id']}", json={"priority": 5})).status_code == 200
    assert await places(bob, ada2) == [1, 2]
    async with svc.client("root") as c:
        assert (await c.post(f"jobs/{hog['id']}/cancel")).status_code == 200
    done = [await svc.wait("root", j["id"]) for j in (bob, ada2)]
    assert [j["queue_position"] for j in done] == [None, None]
    assert done[0]["started_at"] <= done[1]["started_at"]


async def test_a_local_fraction_flavor_counts_free_slices_and_charges_its_share(start):
    config = {"flavors": [{"name": "half", "gpus": 1, "shared": True, "fraction": 0.5}]}
    svc = await start({**config, "quotas": {"default": {"max_running_gpus": 1}}})
    try:

        async def half() -> dict:
            async with svc.client("ada") as c:
                return next(f for f in (await c.get("flavors")).json() if f["name"] == "half")

        info = await half()
        # two GPUs of two slots each: four slices, each half a GPU
        assert (info["fraction"], info["free_gpus"], info["total_gpus"]) == (0.5, 4, 4)
        hold, release = svc.gate("ada")
        svc.script("ada", "h.py", hold)
        jobs = [await svc.submit("ada", "h.py", "half") for _ in range(3)]
        for job in jobs[:2]:
            await svc.wait("ada", job["id"], running)
        # two halves make the one GPU ada's quota allows: the third waits for them
        waiting = await svc.wait("ada", jobs[2]["id"], lambda j: j["waiting_reason"] is not None)
        assert waiting["waiting_reason"] == (
            "waiting for ada's running jobs: ada may use 1 GPU(s) at once and uses 1"
        )
        assert ((await half())["free_gpus"], (await half())["total_gpus"]) == (2, 4)
        release()
        assert (await svc.wait("ada", jobs[2]["id"]))["state"] == "succeeded"
    finally:
        await stop_all(svc)

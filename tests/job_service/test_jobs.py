"""Submitting, following and finishing jobs through the real API."""

from __future__ import annotations

from datetime import timedelta

import nbformat
import psutil
import pytest

from nbjobs.storage import job_folder

from .conftest import BASE_CONFIG, record_gpu_time, stop_all

HOUR = timedelta(hours=1)


async def test_submit_runs_the_notebook_and_writes_output_next_to_it(svc):
    svc.write("ada", "work/train.ipynb", "print('trained')", "21 * 2")

    job = await svc.submit("ada", "work/train.ipynb", "cpu", parameters={"epochs": 3})

    assert job["state"] == "queued"
    assert job["user"] == "ada"
    assert job["name"] == "train"
    assert job["path"] == "work/train.ipynb"
    assert job["output_path"].startswith("work/train.")
    assert job["output_path"].endswith(f".{job['id'][:8]}.ipynb")
    done = await svc.wait("ada", job["id"])
    assert done["state"] == "succeeded", done
    assert done["exit_code"] == 0
    # the user's two cells (the injected parameters cell is not theirs to count);
    # current_cell is the output notebook's index, where the injected cell is the first
    assert done["progress"] == {"cells_done": 2, "cells_total": 2, "current_cell": 2}
    assert done["started_at"] <= done["finished_at"]
    out = nbformat.read(svc.home("ada") / done["output_path"], as_version=4)
    assert out.metadata["nbjobs"]["parameters"] == {"epochs": 3}
    assert out.cells[1].outputs[0]["text"] == "trained\n"


async def test_later_edits_do_not_change_a_submitted_job(svc):
    source = svc.write("ada", "nb.ipynb", "import time; time.sleep(1)", "print('original')")
    job = await svc.submit("ada", "nb.ipynb")

    nbformat.write(nbformat.v4.new_notebook(), source)  # the user keeps editing

    done = await svc.wait("ada", job["id"])
    assert done["state"] == "succeeded"
    out = nbformat.read(svc.home("ada") / done["output_path"], as_version=4)
    assert out.cells[-1].outputs[0]["text"] == "original\n"


async def test_a_failing_cell_is_reported_with_partial_output(svc):
    svc.write("ada", "bad.ipynb", "print('ok')", "raise RuntimeError('no data')", "print('x')")

    job = await svc.submit("ada", "bad.ipynb")
    done = await svc.wait("ada", job["id"])

    assert done["state"] == "failed"
    assert done["exit_code"] == 1
    assert done["message"] == "code cell 2 of 3 raised RuntimeError: no data"
    assert done["error"]["ename"] == "RuntimeError"
    out = nbformat.read(svc.home("ada") / done["output_path"], as_version=4)
    assert out.cells[done["error"]["cell_index"]].outputs[0]["evalue"] == "no data"


async def test_kernel_death_is_a_failure_with_a_reason(svc):
    svc.write("ada", "die.ipynb", "import os; os._exit(1)")

    job = await svc.submit("ada", "die.ipynb")
    done = await svc.wait("ada", job["id"])

    assert done["state"] == "failed"
    assert "kernel died" in done["message"]


async def test_flavor_time_limit_stops_the_job(svc):
    svc.write("ada", "slow.ipynb", "print('start', flush=True)", "import time; time.sleep(60)")

    job = await svc.submit("ada", "slow.ipynb", "short")
    done = await svc.wait("ada", job["id"])

    assert done["state"] == "timed_out"
    assert done["time_limit"] == 3
    assert (svc.home("ada") / done["output_path"]).exists()


async def test_the_service_stops_a_runner_that_overruns_its_time_limit(start):
    # The runner stops a notebook at its time limit itself; one that cannot (hung,
    # stopped) is stopped by the service once the limit and its grace have passed.
    six = {"name": "six", "gpus": 0, "time_limit": 6}
    svc = await start(
        {"flavors": [*BASE_CONFIG["flavors"], six], "limits": {"time_limit_grace": 0.5}}
    )
    svc.service.backend.cancel_grace = 1  # a stopped runner ignores SIGTERM: kill it soon
    try:
        svc.write("ada", "hang.ipynb", "print('start', flush=True)", "import time; time.sleep(60)")
        job = await svc.submit("ada", "hang.ipynb", "six")
        await svc.wait("ada", job["id"], lambda j: j["progress"]["cells_done"] >= 1)
        runner = psutil.Process(svc.service.backend.running[job["id"]].pid)
        runner.suspend()  # a hung runner: it cannot enforce its own limit

        done = await svc.wait("ada", job["id"], timeout=30)

        assert done["state"] == "timed_out"
        assert done["message"] == "stopped by the job service after its time limit (6 s)"
        assert not runner.is_running() or runner.status() == psutil.STATUS_ZOMBIE
    finally:
        await stop_all(svc)


async def test_logs_hold_the_cell_output_and_follow_streams_until_the_end(svc):
    svc.write(
        "ada",
        "log.ipynb",
        "import time\nfor i in range(3):\n    print('tick', i, flush=True)\n    time.sleep(0.5)",
    )
    job = await svc.submit("ada", "log.ipynb")

    async with svc.client("ada") as c:
        followed = await c.get(f"jobs/{job['id']}/logs", params={"follow": "1"}, timeout=90)
        whole = await c.get(f"jobs/{job['id']}/logs")
        tail = await c.get(f"jobs/{job['id']}/logs", params={"offset": len(whole.content) - 20})

    assert followed.status_code == 200
    for i in range(3):
        assert f"tick {i}" in followed.text
    assert "[nbjobs] done: succeeded" in followed.text
    assert whole.text == followed.text
    assert tail.content == whole.content[-20:]
    assert (await svc.job("ada", job["id"]))["state"] == "succeeded"


async def test_rerun_queues_the_same_notebook_again(svc):
    svc.write("ada", "again.ipynb", "x = 1")
    first = await svc.submit("ada", "again.ipynb", parameters={"x": 2})
    await svc.wait("ada", first["id"])

    async with svc.client("ada") as c:
        r = await c.post(f"jobs/{first['id']}/rerun")

    assert r.status_code == 201
    second = r.json()
    assert second["id"] != first["id"]
    assert second["rerun_of"] == first["id"]
    assert second["parameters"] == {"x": 2}
    assert second["output_path"] != first["output_path"]
    assert (await svc.wait("ada", second["id"]))["state"] == "succeeded"


async def test_rerun_of_an_unfinished_job_is_a_conflict(svc):
    svc.script("ada", "long.py", "import time; time.sleep(30)")  # a script: no kernel
    job = await svc.submit("ada", "long.py")

    async with svc.client("ada") as c:
        r = await c.post(f"jobs/{job['id']}/rerun")

    assert r.status_code == 409
    assert "cancel it first or wait" in r.json()["message"]


async def test_forget_removes_a_finished_job_but_keeps_its_output(svc):
    svc.write("ada", "f.ipynb", "1")
    job = await svc.submit("ada", "f.ipynb")
    done = await svc.wait("ada", job["id"])
    folder = job_folder(svc.home("ada"), job["id"])
    held = folder.is_dir()

    async with svc.client("ada") as c:
        gone = await c.delete(f"jobs/{job['id']}")
        after = await c.get(f"jobs/{job['id']}")

    assert gone.status_code == 204
    assert after.status_code == 404
    assert (svc.home("ada") / done["output_path"]).exists()
    # its folder (the copy it ran, status, log) went with it: deleting frees the space
    assert held
    assert not folder.exists()


@pytest.mark.parametrize("limit", [1, 2])
async def test_list_is_paginated_newest_first(svc, limit):
    svc.script("ada", "p.py", "1")  # the subject is the listing: scripts, no kernels
    ids = [(await svc.submit("ada", "p.py"))["id"] for _ in range(3)]

    async with svc.client("ada") as c:
        page1 = (await c.get("jobs", params={"limit": limit})).json()
        page2 = (await c.get("jobs", params={"limit": limit, "offset": limit})).json()

    assert page1["total"] == 3
    assert [j["id"] for j in page1["jobs"]] == ids[::-1][:limit]
    assert [j["id"] for j in page2["jobs"]] == ids[::-1][limit : 2 * limit]


async def test_usage_counts_gpu_hours_per_user_and_group(svc):
    svc.script("ada", "u.py", "import time; time.sleep(1)")  # what a job held, not ran
    svc.script("bob", "u.py", "1")
    gpu_job = await svc.submit("ada", "u.py", "gpu")
    cpu_job = await svc.submit("bob", "u.py", "cpu")
    gpu_done = await svc.wait("ada", gpu_job["id"])
    await svc.wait("bob", cpu_job["id"])
    record_gpu_time(svc, "eve", gpus=2, started_ago=timedelta(hours=2), finished_ago=HOUR)

    async with svc.client("root") as c:
        everyone = (await c.get("usage")).json()
    async with svc.client("bob") as c:
        mine = (await c.get("usage")).json()

    users = {row["name"]: row for row in everyone["users"]}
    from datetime import datetime

    held = (
        datetime.fromisoformat(gpu_done["finished_at"])
        - datetime.fromisoformat(gpu_done["started_at"])
    ).total_seconds() / 3600
    assert users["ada"]["gpu_hours"] == pytest.approx(held, abs=1e-4)
    assert users["ada"]["gpu_hours"] > 0
    assert users["bob"]["gpu_hours"] == 0  # a CPU flavor holds no GPU
    groups = {row["name"]: row for row in everyone["groups"]}
    assert groups["students"]["jobs"] == 2
    # the group's GPU-hours are its members': ada's GPU job, bob's CPU job adds none
    assert groups["students"]["gpu_hours"] == pytest.approx(held, abs=1e-4)
    # eve's 2 GPUs for an hour count for her group only
    assert groups["staff"]["gpu_hours"] == pytest.approx(2.0, abs=1e-3)
    assert users["eve"]["gpu_hours"] == pytest.approx(2.0, abs=1e-3)
    assert everyone["period"] == "week"
    assert [row["name"] for row in mine["users"]] == ["bob"]  # users see only themselves


async def test_a_job_keeps_the_name_given_at_submit_and_on_rerun(svc):
    svc.script("ada", "n.py", "1")

    job = await svc.submit("ada", "n.py", name="  lr sweep 0.1 ")
    await svc.wait("ada", job["id"])
    async with svc.client("ada") as c:
        again = (await c.post(f"jobs/{job['id']}/rerun")).json()
    unnamed = await svc.submit("ada", "n.py")

    assert job["name"] == "lr sweep 0.1"
    assert again["name"] == "lr sweep 0.1"
    assert unnamed["name"] == "n"


async def test_a_flavor_the_machine_cannot_run_is_listed_with_the_reason(start):
    svc = await start({"flavors": [*BASE_CONFIG["flavors"], {"name": "gpu4", "gpus": 4}]})

    async with svc.client("root") as c:
        flavors = {f["name"]: f for f in (await c.get("flavors")).json()}

    assert flavors["gpu"]["unavailable"] is None
    assert "needs 4 GPU(s) and this machine has 2 GPUs" in flavors["gpu4"]["unavailable"]


async def test_an_admins_rerun_of_someone_elses_job_is_never_silently_theirs(svc):
    svc.script("ada", "r.py", "1")
    job = await svc.submit("ada", "r.py")
    await svc.wait("ada", job["id"])
    async with svc.client("root") as c:
        refused = await c.post(f"jobs/{job['id']}/rerun")
        odd = await c.post(f"jobs/{job['id']}/rerun", params={"as": "me"})
        done = await c.post(f"jobs/{job['id']}/rerun", params={"as": "owner"})
    assert refused.status_code == 409
    assert refused.json()["message"].startswith(
        f"job {job['id']} is ada's: a re-run would be ada's too"
    )
    assert "--as-owner" in refused.json()["message"]
    assert odd.status_code == 400
    assert done.status_code == 201, done.text
    assert (done.json()["user"], done.json()["rerun_of"]) == ("ada", job["id"])
    # her own re-run needs nothing more
    async with svc.client("ada") as c:
        assert (await c.post(f"jobs/{job['id']}/rerun")).status_code == 201


async def test_a_rerun_may_change_flavor_parameters_and_name_and_records_what_it_reran(svc):
    svc.write("ada", "p.ipynb", "print('ran')")
    job = await svc.submit("ada", "p.ipynb", parameters={"lr": 0.1}, name="first")
    await svc.wait("ada", job["id"])
    async with svc.client("ada") as c:
        changed = await c.post(
            f"jobs/{job['id']}/rerun",
            json={"flavor": "gpu", "parameters": {"lr": 0.5, "epochs": 2}, "name": "second"},
        )
        bad = await c.post(f"jobs/{job['id']}/rerun", json={"parameters": {"not a name": 1}})
        theirs = await c.post(f"jobs/{job['id']}/rerun", json={"flavor": "staff-only"})
        unknown = await c.post(f"jobs/{job['id']}/rerun", json={"kernel": "julia"})
    assert changed.status_code == 201, changed.text
    again = changed.json()
    assert (again["flavor"], again["parameters"], again["name"], again["rerun_of"]) == (
        "gpu",
        {"lr": 0.5, "epochs": 2},
        "second",
        job["id"],
    )
    assert bad.status_code == 400
    assert "parameter names must be Python identifiers: not a name" in bad.json()["message"]
    assert theirs.status_code == 403  # a flavor she may not use, as at submit
    assert unknown.status_code == 400
    # a kernel may change too, but only to one the flavor's jobs have
    assert unknown.json()["message"].startswith("kernel 'julia' is not available on flavor")

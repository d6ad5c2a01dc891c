"""Job folders have a lifetime (issue 31, attack 6): 30 submit-and-cancel pairs of a
5 MiB notebook grew a user's ``.nbjobs`` by 150 MiB, and nothing ever removed it. Now an
ended job's input goes ``storage.retention`` after it ended (at once when it never
started), a user over ``storage.max_job_files`` is refused at submit, and ``GET
api/storage`` (``nbjobs storage``) says how much each user holds. Real service, real
runner processes."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from datetime import timedelta

from nbjobs.job_service.db import JobRecord, utcnow
from nbjobs.job_service.retention import StartRooms

from nbjobs.storage import job_files_size

from .conftest import TOKENS, start_service, stop_all
from .test_notebook_checks import FLAVORS

BIG = "x = '" + "a" * 1_000_000 + "'"  # a notebook of about 1 MiB


def is_file(path: str) -> bool:
    return os.path.isfile(path)


def is_folder(path: str) -> bool:
    return os.path.isdir(path)


async def submit_and_cancel(svc, user: str, path: str) -> str:
    job = await svc.submit(user, path, flavor="held")
    async with svc.client(user) as c:
        assert (await c.post(f"jobs/{job['id']}/cancel")).is_success
    return job["id"]


async def test_a_job_that_never_started_gives_its_input_back_at_the_next_round(tmp_path):
    svc = await start_service(tmp_path, {"flavors": FLAVORS})
    try:
        svc.write("ada", "big.ipynb", BIG)
        for _ in range(10):
            await submit_and_cancel(svc, "ada", "big.ipynb")
        grown = job_files_size(svc.home("ada"))
        removed = await svc.service.retention.sweep()
        after = job_files_size(svc.home("ada"))
        again = await svc.service.retention.sweep()
    finally:
        await stop_all(svc)

    assert grown > 10 * 1_000_000
    assert removed == 10
    assert after < 10 * 4096  # what is left: their status files
    assert again == 0  # each input is removed once


async def test_an_ended_jobs_input_goes_after_the_retention_its_log_and_output_stay(tmp_path):
    overrides = {"storage": {"root": str(tmp_path / "home"), "retention": "1h"}}
    svc = await start_service(tmp_path, overrides)
    try:
        svc.write("ada", "nb.ipynb", "print('ran')")
        job = await svc.wait("ada", (await svc.submit("ada", "nb.ipynb"))["id"])
        with svc.service.sessions() as db:
            record = db.get(JobRecord, job["id"])
            snapshot, job_dir = record.snapshot_file, record.job_dir
        kept_for_now = await svc.service.retention.sweep()
        snapshot_now = is_file(snapshot)
        later = utcnow() + timedelta(hours=1, minutes=1)
        svc.service.retention.clock = lambda: later
        removed = await svc.service.retention.sweep()
        with svc.service.sessions() as db:
            marked = db.get(JobRecord, job["id"]).input_removed_at
        async with svc.client("ada") as c:
            log = await c.get(f"jobs/{job['id']}/logs")
            rerun = await c.post(f"jobs/{job['id']}/rerun")
        again = await svc.wait("ada", rerun.json()["id"])
    finally:
        await stop_all(svc)

    assert job["state"] == "succeeded"
    assert kept_for_now == 0
    assert snapshot_now
    assert removed == 1
    assert not is_file(snapshot)
    assert marked == later
    assert is_folder(job_dir)  # the folder, with the log and status, stays
    assert log.status_code == 200
    assert "ran" in log.text
    assert (svc.home("ada") / job["output_path"]).exists()
    assert again["state"] == "succeeded"  # a re-run reads the notebook anew


async def test_past_the_cap_a_submit_is_a_507_saying_what_to_do_and_deleting_frees_it(tmp_path):
    overrides = {"flavors": FLAVORS, "storage": {"root": str(tmp_path / "home")}}
    overrides["storage"]["max_job_files"] = "2500KiB"
    svc = await start_service(tmp_path, overrides)
    try:
        svc.write("ada", "big.ipynb", BIG)
        first = await svc.submit("ada", "big.ipynb", flavor="held")
        await svc.submit("ada", "big.ipynb", flavor="held")
        await svc.submit("ada", "big.ipynb", flavor="held")
        async with svc.client("ada") as c:
            refused = await c.post("jobs", json={"path": "big.ipynb", "flavor": "held"})
            await c.post(f"jobs/{first['id']}/cancel")
        deleted = await nbjobs(svc, "ada", "delete", first["id"])
        async with svc.client("ada") as c:
            accepted = await c.post("jobs", json={"path": "big.ipynb", "flavor": "held"})
    finally:
        await stop_all(svc)

    assert refused.status_code == 507, refused.text
    message = refused.json()["message"]
    assert message.startswith("your job files (.nbjobs in your folder: inputs, logs) take 2.9 MiB")
    assert "the most each user may keep here is 2.4 MiB; delete jobs you no longer need" in message
    assert "storage.max_job_files" in message
    assert deleted == (0, f"{first['id']}: deleted\n")
    assert accepted.status_code == 201, accepted.text


async def test_a_link_planted_in_a_job_folder_removes_and_measures_nothing_of_another(tmp_path):
    svc = await start_service(tmp_path, {"flavors": FLAVORS})
    try:
        svc.write("ada", "nb.ipynb", "x = 1")
        job_id = await submit_and_cancel(svc, "ada", "nb.ipynb")
        with svc.service.sessions() as db:
            record = db.get(JobRecord, job_id)
            snapshot, job_dir = record.snapshot_file, record.job_dir
        # ada swaps her job's folder for a link to bob's, where a file of that name is
        bob = svc.home("bob")
        (bob / os.path.basename(snapshot)).write_text("bob's")
        (bob / "big").write_bytes(b"b" * 3_000_000)
        os.rename(job_dir, job_dir + ".old")
        os.symlink(bob, job_dir)
        await svc.service.retention.sweep()
        ada_holds = job_files_size(svc.home("ada"))
    finally:
        await stop_all(svc)

    assert (bob / os.path.basename(snapshot)).read_text() == "bob's"
    assert ada_holds < 1_000_000  # bob's 3 MB are not counted as hers


async def nbjobs(svc, user: str, *args: str) -> tuple[int, str]:
    token = {u: t for t, u in TOKENS.items()}[user]
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "nbjobs.cli", *args),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "NBJOBS_URL": svc.url, "NBJOBS_TOKEN": token},
    )
    out, _ = await process.communicate()
    return process.returncode or 0, out.decode()


async def test_each_user_sees_their_space_and_admins_everyones(tmp_path):
    svc = await start_service(tmp_path, {"flavors": FLAVORS})
    try:
        svc.write("ada", "big.ipynb", BIG)
        svc.write("bob", "nb.ipynb", "x = 1")
        await svc.submit("ada", "big.ipynb", flavor="held")
        await svc.submit("ada", "big.ipynb", flavor="held")
        await svc.submit("bob", "nb.ipynb", flavor="held")
        async with svc.client("ada") as c:
            own = (await c.get("storage")).json()
            other = await c.get("storage", params={"user": "bob"})
        async with svc.client("root") as c:
            everyone = (await c.get("storage")).json()
            one = (await c.get("storage", params={"user": "bob"})).json()
        text = await nbjobs(svc, "ada", "storage")
    finally:
        await stop_all(svc)

    assert own["max_job_files"] == 5 * 1024**3
    assert own["retention_seconds"] == 7 * 86400
    [mine] = own["users"]
    assert mine["user"] == "ada"
    assert mine["jobs"] == 2
    assert 2_000_000 < mine["job_files"] < 2_200_000
    assert mine["folder"] == str(svc.home("ada"))  # where her results go, on one machine
    assert mine["free_bytes"] > 0
    assert other.status_code == 403
    assert [u["user"] for u in everyone["users"]] == ["ada", "bob"]  # most space first
    assert [u["user"] for u in one["users"]] == ["bob"]
    code, out = text
    assert code == 0, out
    assert out.splitlines()[0].split() == ["USER", "JOBS", "JOB", "FILES", "OF", "LIMIT"]
    assert out.splitlines()[1].split()[:4] == ["ada", "2", "1.9", "MiB"]
    assert "each user may keep 5.0 GiB of job files" in out
    assert re.search(
        rf"results are written in {re.escape(str(svc.home('ada')))} \(\S+ \S+ free there\)", out
    )
    assert "an ended job's input is removed 7 days after it ended" in out


def test_a_burst_of_starts_walks_an_owners_folder_once_a_moment(tmp_path):
    # 200 jobs started at once walked their owner's growing .nbjobs 200 times; a figure
    # a moment old is as good as the runner's own, which measures every 2 s anyway
    jobs = tmp_path / "ada" / ".nbjobs" / "jobs"
    (jobs / "a").mkdir(parents=True)
    (jobs / "a" / "log.txt").write_bytes(b"x" * 1000)
    rooms = StartRooms(fresh=3600)
    first = rooms.measure(10_000, jobs / "a")
    (jobs / "b").mkdir()
    (jobs / "b" / "log.txt").write_bytes(b"x" * 500)
    second = rooms.measure(10_000, jobs / "b")
    assert first is not None
    assert second is not None
    assert (first.used, second.used, second.limit) == (1000, 1000, 10_000)
    assert second.folder == tmp_path / "ada" / ".nbjobs"
    # another owner is measured on their own; once the figure is old, it is measured anew
    assert rooms.measure(10_000, tmp_path / "bob" / ".nbjobs" / "jobs" / "c").used == 0
    rooms.fresh = 0.0
    assert rooms.measure(10_000, jobs / "b").used == 1500
    assert rooms.measure(None, jobs / "b") is None  # no storage.max_job_files: no room

"""Approvals: a job on a flavor that needs one waits as pending_approval (the dispatcher
leaves it alone) until an admin or the owner's teacher approves it (it is queued and runs)
or rejects it with a reason (cancelled, the reason shown to its owner); a request nobody
answers expires, saying so."""

from __future__ import annotations

from datetime import timedelta

import pytest
from nbjobs.job_service.approvals import expire
from nbjobs.job_service.db import JobRecord, utcnow
from sqlalchemy import update

from .conftest import BASE_CONFIG, stop_all

APPROVAL = {
    "flavors": [
        *BASE_CONFIG["flavors"],
        {"name": "big", "gpus": 1, "approval": {"groups": ["students"], "expires_after": "2d"}},
    ],
    "classes": [{"name": "ml", "teachers": ["eve"], "students": ["ada"]}],
}


@pytest.fixture
async def svc(start):
    s = await start(APPROVAL)
    try:
        yield s
    finally:
        await stop_all(s)


async def pending(svc, user: str) -> list[dict]:
    async with svc.client(user) as c:
        r = await c.get("dashboard/approvals")
    assert r.status_code == 200, r.text
    return r.json()


async def test_a_students_job_waits_for_approval_and_her_teacher_approves_it(svc):
    svc.write("ada", "a.ipynb", "print('approved')")
    job = await svc.submit("ada", "a.ipynb", "big")
    assert job["state"] == "pending_approval"
    assert job["waiting_reason"] == (
        "waiting for approval: an admin or your teacher must approve jobs on big "
        "(the request expires in 2 days)"
    )
    # the dispatcher leaves it alone: a job submitted after it, needing no approval,
    # starts (a pass of the dispatcher's ran with both waiting) and it still waits
    svc.script("bob", "later.py", "1")
    later = await svc.submit("bob", "later.py")
    await svc.wait("bob", later["id"], lambda j: j["state"] != "queued")
    assert (await svc.job("ada", job["id"]))["state"] == "pending_approval"

    # her teacher and the admins see the request; another student does not
    assert [j["id"] for j in await pending(svc, "eve")] == [job["id"]]
    assert [j["id"] for j in await pending(svc, "root")] == [job["id"]]
    assert await pending(svc, "bob") == []
    async with svc.client("ada") as c:
        own = await c.post(f"jobs/{job['id']}/approve")
    assert own.status_code == 404
    assert own.json()["message"] == (
        f"you may not approve your own job {job['id']}; an admin or your teacher does"
    )

    async with svc.client("eve") as c:
        approved = await c.post(f"jobs/{job['id']}/approve")
        again = await c.post(f"jobs/{job['id']}/approve")
    assert approved.status_code == 200, approved.text
    assert approved.json()["state"] in ("queued", "starting", "running")
    assert again.status_code == 409
    assert (await svc.wait("ada", job["id"]))["state"] == "succeeded"


async def test_a_rejected_job_is_cancelled_with_the_reason_its_owner_reads(svc):
    svc.script("bob", "b.py", "1")
    job = await svc.submit("bob", "b.py", "big")
    async with svc.client("eve") as c:  # not bob's teacher
        refused = await c.post(f"jobs/{job['id']}/reject", json={"reason": "no"})
    assert refused.status_code == 404
    async with svc.client("root") as c:
        empty = await c.post(f"jobs/{job['id']}/reject", json={"reason": ""})
        rejected = await c.post(
            f"jobs/{job['id']}/reject", json={"reason": "use the gpu flavor for this"}
        )
    assert empty.status_code == 400
    assert rejected.status_code == 200, rejected.text
    seen = await svc.job("bob", job["id"])
    assert seen["state"] == "cancelled"
    assert seen["message"] == "rejected by root: use the gpu flavor for this"
    assert seen["waiting_reason"] is None


async def test_who_needs_approval_and_what_counts_against_the_queue(start):
    svc = await start(
        {**APPROVAL, "quotas": {"default": {"max_queued_jobs": 1, "max_running_gpus": 2}}}
    )
    try:
        for user in ("ada", "eve", "root"):
            svc.script(user, "n.py", "1")
        # staff are not in the flavor's groups; admins never wait for approval
        assert (await svc.submit("eve", "n.py", "big"))["state"] != "pending_approval"
        assert (await svc.submit("root", "n.py", "big"))["state"] != "pending_approval"
        first = await svc.submit("ada", "n.py", "big")
        async with svc.client("ada") as c:
            second = await c.post("jobs", json={"path": "n.py", "flavor": "big"})
            cancelled = await c.post(f"jobs/{first['id']}/cancel")
        assert second.status_code == 429  # a pending request counts as a queued job
        assert cancelled.status_code == 200
        assert cancelled.json()["state"] == "cancelled"
        assert cancelled.json()["message"] == "cancelled by ada before it started"
    finally:
        await stop_all(svc)


async def test_a_request_nobody_answers_expires_saying_so(svc):
    svc.script("ada", "e.py", "1")
    old = await svc.submit("ada", "e.py", "big")
    new = await svc.submit("ada", "e.py", "big")
    with svc.service.sessions() as db:
        db.execute(
            update(JobRecord)
            .where(JobRecord.id == old["id"])
            .values(submitted_at=utcnow() - timedelta(days=2, minutes=1))
        )
        db.commit()
    assert await svc.service.in_db(expire, svc.service.ctx) == 1
    gone = await svc.job("ada", old["id"])
    assert gone["state"] == "cancelled"
    assert gone["message"] == (
        "nobody approved it within 2 days; the request expired. Submit it again, or ask an "
        "admin or your teacher first"
    )
    assert (await svc.job("ada", new["id"]))["state"] == "pending_approval"


async def test_the_admins_queue_lists_requests_after_the_queue_and_will_not_move_them(svc):
    svc.script("ada", "q.py", "1")
    request = await svc.submit("ada", "q.py", "big")
    async with svc.client("root") as c:
        listed = (await c.get("dashboard/queue")).json()
        moved = await c.post(f"dashboard/queue/{request['id']}/move", json={"to": "front"})
    [row] = [j for j in listed if j["id"] == request["id"]]
    assert row["place"] is None
    assert row["reason"].startswith("waiting for approval")
    assert moved.status_code == 409
    assert moved.json()["message"] == (
        f"job {request['id']} waits for approval; approve it first, then move it"
    )

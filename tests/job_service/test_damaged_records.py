"""One damaged row in the job database spoils neither a job list nor the usage.

The rows are damaged with raw SQL, the way a bad migration, a hand edit or a
half-restored backup would leave them: text that is not JSON in a JSON column,
JSON of the wrong shape, a state that is no job state, a NULL where a job needs
a value, a time that is not a time.
"""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from sqlalchemy import text

from .conftest import record_gpu_time

#: column, stored text (None: NULL), and what kind of damage it is
DAMAGE = [
    ("groups", "{not json", "not JSON"),
    ("parameters", "[1, 2", "not JSON"),
    ("error", '"boom"', "JSON, not an object"),
    ("error", '{"ename": 1}', "an object missing fields"),
    ("gpus", '{"a": 1}', "an object, not a list"),
    ("state", "exploded", "no job state"),
    ("name", None, "NULL"),
    ("cells_done", "many", "text in a number column"),
    ("submitted_at", "yesterday", "not a time"),
    ("started_at", "2024-13-45 99:00:00", "not a time"),
]


def without_constraints(svc) -> None:
    """Rebuild the jobs table without its NOT NULLs, as a hand-made copy of it would be."""
    with svc.service.sessions() as db:
        db.execute(text("ALTER TABLE nbjobs_jobs RENAME TO nbjobs_jobs_before"))
        db.execute(text("CREATE TABLE nbjobs_jobs AS SELECT * FROM nbjobs_jobs_before"))
        db.execute(text("DROP TABLE nbjobs_jobs_before"))
        db.commit()


def damage(svc, job_id: str, column: str, value: str | None) -> None:
    with svc.service.sessions() as db:
        db.execute(
            text(f"UPDATE nbjobs_jobs SET {column} = :v WHERE id = :id"), {"v": value, "id": job_id}
        )
        db.commit()


@pytest.fixture
def damaged(svc):
    """ada's healthy job, and one job of hers per kind of damage."""
    without_constraints(svc)
    ago = {"started_ago": timedelta(hours=2), "finished_ago": timedelta(hours=1)}
    healthy = record_gpu_time(svc, "ada", gpus=1, **ago)
    broken = {}
    for column, value, _ in DAMAGE:
        job_id = record_gpu_time(svc, "ada", gpus=1, **ago)
        damage(svc, job_id, column, value)
        broken[job_id] = column
    return healthy, broken


async def test_job_lists_leave_a_damaged_record_out_and_log_it(svc, damaged, caplog):
    healthy, broken = damaged
    caplog.set_level(logging.WARNING)

    async with svc.client("ada") as c:
        mine = await c.get("jobs")
        page = await c.get("jobs", params={"limit": 3, "offset": 1})
    async with svc.client("root") as c:
        everyone = await c.get("jobs", params={"user": "ada", "state": "succeeded"})

    assert mine.status_code == 200, mine.text
    assert [j["id"] for j in mine.json()["jobs"]] == [healthy]
    # the damaged ones are there, only not shown: the count and the pages stay stable
    assert mine.json()["total"] == 1 + len(broken)
    assert page.status_code == 200
    assert page.json()["jobs"] == []
    assert everyone.status_code == 200
    assert healthy in [j["id"] for j in everyone.json()["jobs"]]
    logged = caplog.text
    for job_id in broken:
        assert f"job {job_id}" in logged, (broken[job_id], logged)
    assert "left out of a job list" in logged


async def test_usage_leaves_a_damaged_record_out(svc, damaged, caplog):
    _, broken = damaged
    caplog.set_level(logging.WARNING)

    async with svc.client("root") as c:
        usage = await c.get("usage")
    async with svc.client("ada") as c:
        own = await c.get("usage")

    assert usage.status_code == 200, usage.text
    assert own.status_code == 200, own.text
    ada = next(u for u in usage.json()["users"] if u["name"] == "ada")
    # counted: every job whose run can be read (a damaged start time cannot)
    assert ada["jobs"] == 1 + sum(column != "started_at" for column in broken.values())
    assert ada == next(u for u in own.json()["users"] if u["name"] == "ada") == own.json()["own"]
    # the row and the breakdown count by the same rule
    [line] = [line for line in usage.json()["breakdown"] if line["name"] == "ada"]
    assert line["jobs"] == ada["jobs"]
    assert "a job of ada with a damaged start time left out of the usage" in caplog.text


@pytest.mark.parametrize(
    ("column", "value", "kind"), DAMAGE, ids=[f"{c}-{k}" for c, _, k in DAMAGE]
)
async def test_the_damaged_job_itself_is_a_json_500(svc, column, value, kind):
    without_constraints(svc)
    job_id = record_gpu_time(
        svc, "ada", gpus=1, started_ago=timedelta(hours=2), finished_ago=timedelta(hours=1)
    )
    damage(svc, job_id, column, value)

    async with svc.client("ada") as c:
        one = await c.get(f"jobs/{job_id}")
        health = await c.get("health")

    # the service's fault, not the caller's: a 500, but JSON with a sentence
    assert one.status_code == 500
    assert one.headers["content-type"] == "application/json"
    message = one.json()["message"]
    if kind in ("not JSON", "not a time"):  # the database cannot even give the row back
        assert message == "the job service failed on this request; its log says why"
    else:
        assert message.startswith(f"job {job_id}'s record in the job database is damaged (")
    assert health.status_code == 200

"""A teacher extends one student's GPU-hour budget: the student, out of hours, may submit
again; the class shows what was granted; nobody else's budget moves."""

from __future__ import annotations

from datetime import timedelta

import pytest
from nbjobs.job_service.errors import Caller

from .conftest import GROUPS, record_gpu_time, stop_all

CLASSES = {
    "classes": [
        {"name": "ml", "teachers": ["eve"], "students": ["ada", "bob"], "gpu_hours": 1},
        {"name": "art", "teachers": ["eve"], "students": ["cy"]},
    ]
}


@pytest.fixture
async def svc(start):
    s = await start(CLASSES)
    try:
        yield s
    finally:
        await stop_all(s)


async def grant(svc, user: str, cls: str, student: str, hours: float):
    async with svc.client(user) as c:
        return await c.post(f"classes/{cls}/students/{student}/budget", json={"hours": hours})


async def test_an_extension_lets_a_student_out_of_hours_submit_again(svc):
    record_gpu_time(
        svc, "ada", gpus=1, started_ago=timedelta(hours=2), finished_ago=timedelta(hours=1)
    )
    svc.write("ada", "g.ipynb", "1")
    async with svc.client("ada") as c:
        refused = await c.post("jobs", json={"path": "g.ipynb", "flavor": "gpu"})
    assert refused.status_code == 429
    assert "of your 1 GPU-hours" in refused.json()["message"]

    r = await grant(svc, "eve", "ml", "ada", 2)
    assert r.status_code == 200, r.text
    assert r.json()["extra_hours"] == {"ada": 2.0}
    job = await svc.submit("ada", "g.ipynb", "gpu")
    assert job["state"] in ("queued", "starting", "running")
    # bob's budget did not move; the class shows the grant to its teacher
    assert svc.service.quotas.of(caller("bob")).gpu_hours == 1
    assert svc.service.quotas.of(caller("ada")).gpu_hours == 3
    async with svc.client("eve") as c:
        classes = {k["name"]: k for k in (await c.get("classes")).json()}
    assert classes["ml"]["extra_hours"] == {"ada": 2.0}
    assert classes["art"]["extra_hours"] == {}
    # the usage report sets each user's hours against their budget, the grant included
    async with svc.client("eve") as c:
        users = {u["name"]: u for u in (await c.get("usage")).json()["users"]}
    assert users["ada"]["gpu_hours_limit"] == 3
    assert users["ada"]["gpu_hours"] >= 1


async def test_extensions_are_for_a_classs_teachers_its_students_and_budgets(svc):
    assert (await grant(svc, "bob", "ml", "ada", 1)).status_code == 404  # not a teacher
    not_student = await grant(svc, "eve", "ml", "cy", 1)
    assert not_student.status_code == 404
    assert not_student.json()["message"] == "'cy' is not a student of ml"
    no_budget = await grant(svc, "eve", "art", "cy", 1)
    assert no_budget.status_code == 409
    assert "class art sets no GPU-hour budget" in no_budget.json()["message"]
    assert (await grant(svc, "eve", "ml", "ada", 0)).status_code == 400
    assert (await grant(svc, "root", "ml", "bob", 0.5)).status_code == 200  # admins may


def caller(name: str) -> Caller:
    return Caller(name, frozenset(GROUPS.get(name, [])))

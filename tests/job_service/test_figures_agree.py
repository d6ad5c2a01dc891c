"""One figure, one number, wherever it is read: a job counts in a period by one rule (its
run overlaps the period, with the GPU-hours of its run inside it), so the Usage page's
rows, the Classes page (a teacher's usage), a student's own row, the budget a submit is
held to and ``nbjobs usage`` say the same; and the breakdown by user, class, node and the
total add up, each job under the node it ran on."""

from __future__ import annotations

import asyncio
import socket
from datetime import datetime, timedelta, timezone

import pytest

from nbjobs.client.reports import usage_report
from nbjobs.units import figure

from .conftest import record_gpu_time, stop_all

CLASSES = {
    "classes": [
        {"name": "ml", "teachers": ["eve"], "students": ["ada", "bob"], "gpu_hours": 3},
    ]
}
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
WEEK = 7 * DAY


@pytest.fixture
async def svc(start):
    s = await start(CLASSES)
    try:
        yield s
    finally:
        await stop_all(s)


async def usage(svc, user: str, **params: str) -> dict:
    async with svc.client(user) as c:
        r = await c.get("usage", params=params)
    assert r.status_code == 200, r.text
    return r.json()


async def cli_usage(svc, monkeypatch, capsys, *argv: str) -> list[str]:
    """``nbjobs usage`` as ada, against the running service (its blocking HTTP on a
    thread, the service on this loop)."""
    monkeypatch.setenv("NBJOBS_URL", svc.url)
    monkeypatch.setenv("NBJOBS_TOKEN", "ada-token")
    capsys.readouterr()
    assert await asyncio.to_thread(usage_report, list(argv)) == 0
    return capsys.readouterr().out.splitlines()


async def test_every_view_and_the_cli_count_a_period_by_one_rule(svc, monkeypatch, capsys):
    # ada: half an hour of a job that began before the last 7 days, one job wholly
    # before them, 2 GPU-hours inside them on another node, and a real job here
    # (recorded as a cluster's jobs are: with the node their pod ran on)
    across = {"started_ago": WEEK + HOUR / 2, "finished_ago": WEEK - HOUR / 2}
    record_gpu_time(svc, "ada", gpus=1, node="gpu-a", **across)
    before = {"started_ago": 9 * DAY, "finished_ago": 8 * DAY}
    record_gpu_time(svc, "ada", gpus=1, node="gpu-a", **before)
    inside = {"started_ago": 3 * HOUR, "finished_ago": 2 * HOUR}
    record_gpu_time(svc, "ada", gpus=2, node="gpu-b", **inside)
    svc.script("ada", "real.py", "1")
    real = await svc.wait("ada", (await svc.submit("ada", "real.py", "gpu"))["id"])
    assert real["state"] == "succeeded", real
    # a teacher's grant is part of the budget, and said apart
    async with svc.client("eve") as c:
        granted = await c.post("classes/ml/students/ada/budget", json={"hours": 1})
    assert granted.status_code == 200, granted.text

    admin, teacher, student = [await usage(svc, who) for who in ("root", "eve", "ada")]
    with svc.service.sessions() as db:
        held_to = svc.service.quotas.gpu_hours(db, "ada", "week")
    cli = await cli_usage(svc, monkeypatch, capsys)

    # the Usage page's rows (admin, teacher), the Classes page (the teacher's rows),
    # a student's own row and the budget a submit is held to: one figure
    [row] = [u for u in admin["users"] if u["name"] == "ada"]
    [seen_by_teacher] = [u for u in teacher["users"] if u["name"] == "ada"]
    assert [u["name"] for u in student["users"]] == ["ada"]
    for other in (seen_by_teacher, student["users"][0], student["own"]):
        # read a moment apart: the window's start moved on, the half hour across it shrank
        assert other["gpu_hours"] == pytest.approx(row["gpu_hours"], abs=1e-3)
        assert {**other, "gpu_hours": 0} == {**row, "gpu_hours": 0}
    assert row["period"] == "week"
    assert row["jobs"] == 3  # across the window's start, inside it, the real one
    expected = 0.5 + 2.0 + real["gpu_hours"]
    assert row["gpu_hours"] == pytest.approx(expected, abs=2e-3)
    assert held_to == pytest.approx(row["gpu_hours"], abs=1e-3)
    assert (row["gpu_hours_limit"], row["gpu_hours_granted"]) == (4, 1)
    # ... and what `nbjobs usage` says first
    used = figure(row["gpu_hours"], against=4)
    assert cli[0] == f"you: {used} of 4 GPU-hours in the last 7 days (3 + 1 granted), 3 jobs"

    # the breakdown over whole UTC days that hold all four jobs: each in one node's line
    since = (datetime.now(timezone.utc) - 10 * DAY).date().isoformat()
    by = {k: await usage(svc, "root", by=k, since=since) for k in ("user", "class", "node")}
    lines = {k: {line["name"]: line for line in report["breakdown"]} for k, report in by.items()}
    here = socket.gethostname()
    assert real["node"] == here
    assert {n: line["jobs"] for n, line in lines["node"].items()} == {
        "gpu-a": 2,
        "gpu-b": 1,
        here: 1,
    }
    total = by["node"]["total"]
    assert lines["user"]["ada"]["jobs"] == lines["class"]["ml"]["jobs"] == total["jobs"] == 4
    allocated = [line["gpu_hours_allocated"] for line in lines["node"].values()]
    assert sum(allocated) == pytest.approx(total["gpu_hours_allocated"], abs=1e-3)
    assert lines["user"]["ada"]["gpu_hours_allocated"] == pytest.approx(
        total["gpu_hours_allocated"], abs=1e-3
    )
    # `nbjobs usage --by node` prints the same lines, under the same words for the range
    table = await cli_usage(svc, monkeypatch, capsys, "--by", "node", "--since", since)
    until = by["node"]["range_until"]
    assert table[2] == f"{since} to {until} (whole UTC days), by node"
    printed = {line.split()[0]: line.split()[1] for line in table[4:]}
    assert printed == {"gpu-a": "2", "gpu-b": "1", here: "1", "total": "4"}


def test_the_cli_says_use_against_budget_or_that_there_is_none():
    from nbjobs.client.reports import budget_line

    row = {"period": "day", "jobs": 1, "running": 1, "queued": 2, "gpu_hours": 0.25}
    assert budget_line({**row, "gpu_hours_limit": None}) == (
        "you: 0.25 GPU-hours in the last 24 hours (no budget), 1 job (1 running, 2 queued now)"
    )
    assert budget_line({**row, "gpu_hours": 2.0, "gpu_hours_limit": 2, "running": 0}) == (
        "you: 2 of 2 GPU-hours in the last 24 hours, 1 job (2 queued now)"
    )

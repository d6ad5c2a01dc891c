"""Quotas: GPU-hours per period (only time inside the period counts) and per-group limits."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from nbjobs.job_service.db import JobRecord
from nbjobs.job_service.errors import Caller

from nbjobs.config import PERIOD_WORDS, Quota, QuotaConfig

from .conftest import record_gpu_time, stop_all

HOUR, DAY, SECOND = timedelta(hours=1), timedelta(days=1), timedelta(seconds=1)


def running(job):
    return job["state"] == "running"


async def post_gpu_job(svc, user: str, flavor: str = "gpu"):
    svc.write(user, "h.ipynb", "1")
    async with svc.client(user) as c:
        return await c.post("jobs", json={"path": "h.ipynb", "flavor": flavor})


def ada_used_gpus_over_forty_days(svc) -> None:
    """ada's GPU time: 3 h in the last day, 14 h in the last week, 114 h in the last 30 days."""
    record_gpu_time(svc, "ada", gpus=2, started_ago=13 * HOUR, finished_ago=12 * HOUR)  # 2 h
    # 2 h, of which only the last 1 h falls in the last day
    record_gpu_time(svc, "ada", gpus=1, started_ago=25 * HOUR, finished_ago=23 * HOUR)
    record_gpu_time(svc, "ada", gpus=1, started_ago=3 * DAY + 10 * HOUR, finished_ago=3 * DAY)
    record_gpu_time(svc, "ada", gpus=4, started_ago=10 * DAY + 25 * HOUR, finished_ago=10 * DAY)
    record_gpu_time(svc, "ada", gpus=2, started_ago=41 * DAY, finished_ago=40 * DAY)  # 48 h: no
    record_gpu_time(svc, "bob", gpus=2, started_ago=2 * HOUR, finished_ago=HOUR)  # not ada's


async def test_a_small_budget_is_said_with_the_digits_that_make_it_true(start):
    # 0.0223 GPU-hours used of a 0.02 budget once read "used 0.0 of your 0.02"
    svc = await start({"quotas": {"default": {"gpu_hours": 0.02, "period": "day"}}})
    try:
        record_gpu_time(svc, "ada", gpus=1, started_ago=HOUR, finished_ago=HOUR - 80.28 * SECOND)
        over = await post_gpu_job(svc, "ada")
    finally:
        await stop_all(svc)

    assert over.status_code == 429
    assert over.json()["message"].startswith(
        "you have used 0.0223 of your 0.02 GPU-hours in the last 24 hours; "
    )


@pytest.mark.parametrize(("period", "used"), [("day", 3.0), ("week", 14.0), ("month", 114.0)])
async def test_gpu_hours_count_the_gpu_time_inside_the_period_only(start, period, used):
    svc = await start({"quotas": {"default": {"gpu_hours": used - 0.5, "period": period}}})
    try:
        ada_used_gpus_over_forty_days(svc)

        over = await post_gpu_job(svc, "ada")
        cpu = await post_gpu_job(svc, "ada", "cpu")
        # the same GPU time, under a budget half an hour above it: the service restarted
        await stop_all(svc)
        svc = await start({"quotas": {"default": {"gpu_hours": used + 0.5, "period": period}}})
        under = await post_gpu_job(svc, "ada")

        assert over.status_code == 429
        assert over.json()["message"] == (
            f"you have used {used:g} of your {used - 0.5:g} GPU-hours in "
            f"{PERIOD_WORDS[period]}; use a CPU flavor, wait until older GPU time leaves that "
            "window, or ask your teacher or admin for more"
        )
        assert cpu.status_code == 201  # a CPU flavor spends no GPU-hours
        assert under.status_code == 201  # time before the period did not count
    finally:
        await stop_all(svc)


async def test_a_queued_job_waits_with_the_reason_while_the_gpu_hours_are_used_up(start):
    svc = await start(
        {"quotas": {"default": {"gpu_hours": 1, "period": "day"}, "users": {"root": {}}}}
    )
    try:
        hold, release = svc.gate("root")
        svc.write("root", "hog.ipynb", hold)
        hog = await svc.submit("root", "hog.ipynb", "gpu2")  # both GPUs: ada's job queues
        await svc.wait("root", hog["id"], running)
        svc.write("ada", "g.ipynb", "1")
        job = await svc.submit("ada", "g.ipynb", "gpu")
        # Meanwhile ada's other GPU work (say, before a restart) is recorded: 2 h today.
        earlier = record_gpu_time(svc, "ada", gpus=1, started_ago=3 * HOUR, finished_ago=HOUR)

        release()
        await svc.wait("root", hog["id"])
        waiting = await svc.wait(
            "ada", job["id"], lambda j: "GPU-hours" in (j["waiting_reason"] or ""), timeout=30
        )
        assert waiting["state"] == "queued"
        assert waiting["waiting_reason"] == (
            "ada's 1 GPU-hours in the last 24 hours are used up; "
            "it starts as older GPU time leaves that window, or cancel it"
        )

        # A day on, that work lies before the window, and the job starts.
        with svc.service.sessions() as db:
            record = db.get(JobRecord, earlier)
            assert record is not None
            assert record.started_at is not None
            assert record.finished_at is not None
            record.started_at -= DAY
            record.finished_at -= DAY
            db.commit()
        done = await svc.wait("ada", job["id"], timeout=60)
        assert done["state"] == "succeeded"
    finally:
        await stop_all(svc)


GROUP_QUOTAS = {
    "default": {"max_running_gpus": 2},
    "groups": {
        # 10 h a month (a third of an hour a day) vs. 1 h a day
        "students": {
            "max_running_gpus": 1,
            "max_queued_jobs": 5,
            "gpu_hours": 10,
            "period": "month",
        },
        "staff": {"max_running_gpus": 2, "max_queued_jobs": 1, "gpu_hours": 1, "period": "day"},
    },
    "users": {"root": {}},
}


async def test_group_quotas_apply_to_their_members(start):
    svc = await start({"quotas": GROUP_QUOTAS})
    try:
        ada_too_big = await post_gpu_job(svc, "ada", "gpu2")  # students: 1 GPU at once
        eve_big = await post_gpu_job(svc, "eve", "gpu2")  # staff: 2
        record_gpu_time(svc, "ada", gpus=1, started_ago=11 * DAY, finished_ago=DAY)
        ada_over_hours = await post_gpu_job(svc, "ada")  # 240 h this month, of 10

        assert ada_too_big.status_code == 403
        assert "your quota (max_running_gpus) allows 1" in ada_too_big.json()["message"]
        assert eve_big.status_code == 201
        assert ada_over_hours.status_code == 429
        assert "of your 10 GPU-hours in the last 30 days" in ada_over_hours.json()["message"]
    finally:
        await stop_all(svc)


async def test_a_member_of_several_groups_gets_each_limits_most_generous_and_one_whole_budget(
    start,
):
    svc = await start({"quotas": GROUP_QUOTAS})
    try:
        # cy is in staff and students: 2 GPUs (staff), 5 queued (students), and the budget
        # that allows the most per day, whole: staff's 1 h a day, never "10 h a day".
        cy = Caller("cy", frozenset({"staff", "students"}))
        assert svc.service.quotas.of(cy) == Quota(
            max_running_gpus=2, max_queued_jobs=5, gpu_hours=1, period="day"
        )
        two_gpus = await post_gpu_job(svc, "cy", "gpu2")
        record_gpu_time(svc, "cy", gpus=2, started_ago=13 * HOUR, finished_ago=12 * HOUR)

        over = await post_gpu_job(svc, "cy")

        assert two_gpus.status_code == 201
        assert over.status_code == 429
        assert over.json()["message"] == (
            "you have used 2 of your 1 GPU-hours in the last 24 hours; use a CPU flavor, "
            "wait until older GPU time leaves that window, or ask your teacher or admin for more"
        )
    finally:
        await stop_all(svc)


@pytest.mark.parametrize(
    ("groups", "expected"),
    [
        # no budget (unlimited) is the most generous
        (
            {"a": {"gpu_hours": 5, "period": "day"}, "b": {"period": "month"}},
            Quota(gpu_hours=None, period="month"),
        ),
        # 20 a week (about 2.9 a day) beats 60 a month (2 a day)
        (
            {"a": {"gpu_hours": 60, "period": "month"}, "b": {"gpu_hours": 20, "period": "week"}},
            Quota(gpu_hours=20, period="week"),
        ),
        # the same rate: the longer period
        (
            {"a": {"gpu_hours": 1, "period": "day"}, "b": {"gpu_hours": 7, "period": "week"}},
            Quota(gpu_hours=7, period="week"),
        ),
        # each other limit on its own: the larger number, no limit over any
        (
            {"a": {"max_running_gpus": 4, "max_queued_jobs": 2}, "b": {"max_running_gpus": 1}},
            Quota(max_running_gpus=4, max_queued_jobs=None),
        ),
    ],
)
async def test_how_several_group_quotas_combine(start, groups, expected):
    quotas = QuotaConfig(
        default=Quota(max_running_gpus=0, gpu_hours=0),
        groups={name: Quota(**q) for name, q in groups.items()},
        users={"ada": Quota(max_running_gpus=3)},
    )
    svc = await start({"quotas": quotas.model_dump(exclude_unset=True)})

    assert svc.service.quotas.of(Caller("cy", frozenset({"a", "b", "other"}))) == expected
    # a user's own entry replaces the groups' quotas whole
    assert svc.service.quotas.of(Caller("ada", frozenset({"a", "b"}))) == Quota(max_running_gpus=3)
    # no group with a quota: the default
    assert svc.service.quotas.of(Caller("zed", frozenset({"other"}))) == quotas.default


async def test_deleting_jobs_never_gives_gpu_hours_back(start):
    """The attack: run a GPU job, get refused the next one, delete the first (204), submit
    again. The deleted job's GPU time stays in its period for the budget, and in the
    usage report, as it did before it was deleted."""
    svc = await start({"quotas": {"default": {"gpu_hours": 1, "period": "day"}}})
    try:
        used = record_gpu_time(svc, "bob", gpus=1, started_ago=3 * HOUR, finished_ago=HOUR)
        old = record_gpu_time(svc, "bob", gpus=1, started_ago=3 * DAY, finished_ago=2 * DAY)
        refused = await post_gpu_job(svc, "bob")
        # the report's days from the first job's (its default, today, misses a job of
        # yesterday evening when the test runs just after midnight UTC)
        report = {"by": "user", "since": (datetime.now(timezone.utc) - 4 * DAY).date().isoformat()}
        async with svc.client("root") as admin:
            before = await admin.get("usage", params=report)
        async with svc.client("bob") as bob:
            deleted = [(await bob.delete(f"jobs/{job}")).status_code for job in (used, old)]
            listed = (await bob.get("jobs")).json()["jobs"]
        again = await post_gpu_job(svc, "bob")
        async with svc.client("root") as admin:
            after = await admin.get("usage", params=report)
    finally:
        await stop_all(svc)

    assert refused.status_code == 429
    assert deleted == [204, 204]
    assert [j["id"] for j in listed] == []  # gone from the list...
    assert again.status_code == 429, again.text  # ...not from the budget
    assert again.json()["message"] == refused.json()["message"]
    bob_before = next(r for r in before.json()["breakdown"] if r["name"] == "bob")
    bob_after = next(r for r in after.json()["breakdown"] if r["name"] == "bob")
    assert bob_after["gpu_hours_allocated"] == bob_before["gpu_hours_allocated"] > 0

"""GET api/usage over a range of days: GPU-hours allocated and busy per user, class,
flavor and node, with costs; each caller sees what is theirs to see."""

from __future__ import annotations

import copy
from datetime import datetime, time, timedelta, timezone

from nbjobs.job_service.db import JobRecord
from sqlalchemy import update

from .conftest import BASE_CONFIG, record_gpu_time, stop_service

CONFIG = {
    "classes": [{"name": "ml101", "teachers": ["eve"], "students": ["ada"]}],
    "flavors": copy.deepcopy(BASE_CONFIG["flavors"]),
}
for flavor in CONFIG["flavors"]:
    if flavor["name"] == "gpu2":
        flavor["cost_per_gpu_hour"] = 1.5


def busy(svc, job_id: str, gpu_seconds: float, node: str = "gpu-0") -> None:
    """Give a recorded job its telemetry's busy GPU-seconds and a node."""
    with svc.service.sessions() as db:
        db.execute(
            update(JobRecord)
            .where(JobRecord.id == job_id)
            .values(gpu_busy_seconds=gpu_seconds, node=node)
        )
        db.commit()


async def report(client, **params: str) -> dict:
    response = await client.get("usage", params=params)
    assert response.status_code == 200, response.text
    return response.json()


async def test_usage_by_user_class_and_flavor_over_days(start):
    svc = await start(CONFIG)
    await svc.service.usage_sums.stop()  # summed below, when this test says
    try:
        # yesterday, wholly inside one day: ada 2 GPUs for 3 h (busy a third), bob 1 GPU for 1 h
        today = datetime.now(timezone.utc).date()
        noon = datetime.combine(today, time(12), tzinfo=timezone.utc) - timedelta(days=1)
        ago = datetime.now(timezone.utc) - noon
        ada = record_gpu_time(
            svc, "ada", gpus=2, started_ago=ago, finished_ago=ago - timedelta(hours=3)
        )
        bob = record_gpu_time(
            svc, "bob", gpus=1, started_ago=ago, finished_ago=ago - timedelta(hours=1)
        )
        busy(svc, ada, gpu_seconds=2 * 3600)
        busy(svc, bob, gpu_seconds=0, node="gpu-1")
        yesterday = (today - timedelta(days=1)).isoformat()

        async with svc.client("root") as admin:
            by_user = (
                await admin.get("usage", params={"since": yesterday, "until": yesterday})
            ).json()
            by_flavor = (
                await admin.get("usage", params={"since": yesterday, "by": "flavor"})
            ).json()
            by_class = await report(admin, since=yesterday, by="class")
            by_node = await report(admin, since=yesterday, by="node")
        lines = {row["name"]: row for row in by_user["breakdown"]}
        assert (by_user["range_since"], by_user["range_until"], by_user["by"]) == (
            yesterday,
            yesterday,
            "user",
        )
        assert lines["ada"]["gpu_hours_allocated"] == 6.0
        assert lines["ada"]["gpu_hours_busy"] == 2.0
        assert lines["ada"]["busy_percent"] == 33.3
        assert lines["ada"]["days"] == [
            {"date": yesterday, "gpu_hours_allocated": 6.0, "gpu_hours_busy": 2.0}
        ]
        assert (lines["bob"]["gpu_hours_allocated"], lines["bob"]["gpu_hours_busy"]) == (1.0, 0.0)
        assert by_user["total"]["gpu_hours_allocated"] == 7.0
        assert by_user["total"]["jobs"] == 2
        flavors = {row["name"]: row for row in by_flavor["breakdown"]}
        assert flavors["gpu2"]["cost"] == 9.0  # 6 GPU-hours at 1.5
        assert flavors["gpu"]["cost"] is None  # no price set
        assert [(r["name"], r["gpu_hours_allocated"]) for r in by_class["breakdown"]] == [
            ("ml101", 6.0)
        ]
        assert {r["name"] for r in by_node["breakdown"]} == {"gpu-0", "gpu-1"}

        # a range before the jobs: nothing
        async with svc.client("root") as admin:
            early = (today - timedelta(days=30)).isoformat()
            empty = await report(admin, since=early, until=early)
        assert (empty["breakdown"], empty["total"]["gpu_hours_allocated"]) == ([], 0.0)

        # ada sees her own; eve, ml101's teacher, sees ada's; bob sees his own
        async with svc.client("ada") as c:
            mine = await report(c, since=yesterday)
        async with svc.client("eve") as c:
            teacher = await report(c, since=yesterday, by="class")
        async with svc.client("bob") as c:
            bobs = await report(c, since=yesterday)
        assert [r["name"] for r in mine["breakdown"]] == ["ada"]
        assert [(r["name"], r["gpu_hours_busy"]) for r in teacher["breakdown"]] == [("ml101", 2.0)]
        assert [r["name"] for r in bobs["breakdown"]] == ["bob"]
        assert bobs["total"]["gpu_hours_allocated"] == 1.0

        # once the service has summed the ended jobs into their days, the same answers
        # (but for "since", the start of the quota's period, which is now less a week)
        assert await svc.service.usage_sums.sweep() == 2

        def dated(found: dict) -> dict:
            return {key: value for key, value in found.items() if key != "since"}

        async with svc.client("root") as admin:
            again = await report(admin, since=yesterday, until=yesterday)
            assert dated(again) == dated(by_user)
            again = await report(admin, since=yesterday, by="flavor")
            assert dated(again) == dated(by_flavor)
            assert dated(await report(admin, since=yesterday, by="class")) == dated(by_class)
            assert dated(await report(admin, since=yesterday, by="node")) == dated(by_node)
        async with svc.client("eve") as c:
            assert dated(await report(c, since=yesterday, by="class")) == dated(teacher)
        async with svc.client("ada") as c:
            assert dated(await report(c, since=yesterday)) == dated(mine)
    finally:
        await stop_service(svc)


async def test_a_bad_range_or_breakdown_is_a_400_that_says_what_to_send(svc):
    async with svc.client("ada") as c:
        bad_date = await c.get("usage", params={"since": "last tuesday"})
        backwards = await c.get("usage", params={"since": "2026-11-20", "until": "2026-11-10"})
        too_long = await c.get("usage", params={"since": "2020-01-01", "until": "2026-01-01"})
        colour = await c.get("usage", params={"by": "colour"})
    assert bad_date.status_code == 400
    assert bad_date.json()["message"] == "since must be a date like 2026-11-16, not 'last tuesday'"
    assert backwards.json()["message"] == "since (2026-11-20) is after until (2026-11-10)"
    assert too_long.json()["message"] == "a report covers 400 days at most; ask for less"
    assert colour.json()["message"] == (
        "by must be one of user, group, class, flavor, node, not 'colour'"
    )

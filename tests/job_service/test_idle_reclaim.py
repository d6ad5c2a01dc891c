"""Idle-GPU reclaim on a real service with a real job: its owner is warned once its GPUs
have been idle for the flavor's period, the warning goes when they work again, and under
``action: cancel`` the job is stopped ``grace`` later with the reason in its record and in
its output's banner, its partial output kept.

The job runs for real (a long sleep); its telemetry is written into the database as the
collector would store it, at times the test chooses, so minutes of idling take no time.
"""

from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone

import nbformat
from nbjobs.job_service.db import JobSample

from .conftest import BASE_CONFIG, stop_service

INTERVAL = 10.0


def config(action: str, exempt: list[str] | None = None) -> dict:
    flavors = copy.deepcopy(BASE_CONFIG["flavors"])
    for flavor in flavors:
        if flavor["name"] == "gpu":
            flavor["idle_gpu"] = {
                "below_percent": 5,
                "after": "2m",
                "action": action,
                "grace": "1m",
                "exempt_groups": exempt or [],
            }
    return {"flavors": flavors, "telemetry": {"interval": f"{INTERVAL:g}s"}}


def samples(svc, job_id: str, start: datetime, end: datetime, utilisation: float) -> None:
    """The job's samples from ``start`` to ``end``, one an interval, all at ``utilisation``."""
    with svc.service.sessions() as db:
        at = start
        while at <= end:
            db.add(
                JobSample(
                    job_id=job_id,
                    at=at,
                    gpu_utilization_percent=utilisation,
                    gpu_memory_used_bytes=1 << 30,
                    gpu_memory_total_bytes=16 << 30,
                    cpu_percent=3.0,
                    memory_bytes=1 << 28,
                    gpus=[],
                )
            )
            at += timedelta(seconds=INTERVAL)
        db.commit()


async def running_job(svc, user: str = "ada") -> dict:
    # the service's own collector and reclaimer stand still: the test plays the clock
    await svc.service.telemetry.stop()
    await svc.service.reclaimer.stop()
    svc.write(
        user, "idle.ipynb", "print('loaded the data', flush=True)", "import time; time.sleep(600)"
    )
    job = await svc.submit(user, "idle.ipynb", "gpu")
    return await svc.wait(user, job["id"], lambda j: j["progress"]["cells_done"] >= 1)


async def test_an_idle_job_is_warned_then_stopped_with_the_reason(start):
    svc = await start(config("cancel"))
    try:
        job = await running_job(svc)
        now = datetime.now(timezone.utc)
        samples(svc, job["id"], now - timedelta(minutes=3), now, utilisation=1.0)

        verdicts = await svc.service.reclaimer.check(now)
        assert verdicts[job["id"]].action == "warn"
        warned = await svc.job("ada", job["id"])
        assert warned["state"] == "running"
        assert warned["warning"] == (
            "its GPUs have been idle (below 5 %) for 3 min: it will be cancelled after 60 s "
            "more unless it uses them (the output keeps the cells that ran)"
        )

        # still idle a minute later: stopped, and it says why
        later = now + timedelta(seconds=61)
        samples(svc, job["id"], now + timedelta(seconds=INTERVAL), later, utilisation=1.0)
        assert (await svc.service.reclaimer.check(later))[job["id"]].action == "cancel"
        done = await svc.wait("ada", job["id"], timeout=60)
        assert done["state"] == "cancelled"
        assert done["message"] == "stopped: its GPUs were idle (below 5 %) for 4 min"
        assert done["warning"] is None
        output = nbformat.read(svc.home("ada") / done["output_path"], as_version=4)
        assert "stopped: its GPUs were idle (below 5 %) for 4 min" in output.cells[0].source
        assert any("loaded the data" in str(c.get("outputs")) for c in output.cells)
    finally:
        await stop_service(svc)


async def test_a_warning_goes_when_the_gpus_work_again_and_warn_never_cancels(start):
    svc = await start(config("warn"))
    try:
        job = await running_job(svc)
        now = datetime.now(timezone.utc)
        samples(svc, job["id"], now - timedelta(minutes=10), now, utilisation=0.0)
        await svc.service.reclaimer.check(now)
        warned = await svc.job("ada", job["id"])
        assert warned["warning"].startswith("its GPUs have been idle (below 5 %) for 10 min;")
        # a warn policy leaves it running, however long
        later = now + timedelta(minutes=30)
        samples(svc, job["id"], now + timedelta(seconds=INTERVAL), later, utilisation=0.0)
        assert (await svc.service.reclaimer.check(later))[job["id"]].action == "warn"
        # the GPU gets to work: the warning is taken back
        busy = later + timedelta(seconds=INTERVAL)
        samples(svc, job["id"], busy, busy, utilisation=85.0)
        await svc.service.reclaimer.check(busy + timedelta(seconds=1))
        back = await svc.job("ada", job["id"])
        assert (back["state"], back["warning"]) == ("running", None)
    finally:
        await stop_service(svc)


async def test_exempt_groups_are_never_warned(start):
    svc = await start(config("cancel", exempt=["staff"]))
    try:
        job = await running_job(svc, user="eve")  # eve is in staff
        now = datetime.now(timezone.utc)
        samples(svc, job["id"], now - timedelta(minutes=10), now, utilisation=0.0)
        assert await svc.service.reclaimer.check(now) == {}
        assert (await svc.job("eve", job["id"]))["warning"] is None
    finally:
        await stop_service(svc)

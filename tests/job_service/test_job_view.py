"""What the API shows of one job agrees with the rest of nbjobs (job_service/jobview.py)."""

from __future__ import annotations

import pytest

from .telemetry_helpers import insert_job


async def test_a_jobs_gpu_hours_are_what_the_usage_counts_for_it(svc):
    """The job's card and `nbjobs show` say the GPU-hours `nbjobs usage` counts (a job
    on simulated GPUs, with no readings, once showed none while the usage said 0.11)."""
    two_gpus, _ = insert_job(
        svc.service, "ada", state="succeeded", gpu_count=2, started_ago=1800, finished_ago=0
    )
    async with svc.client("ada") as c:
        job = (await c.get(f"jobs/{two_gpus}")).json()
        usage = (await c.get("usage", params={"period": "day"})).json()
    mine = next(u for u in usage["users"] if u["name"] == "ada")
    assert job["gpu_hours"] == pytest.approx(1.0, abs=0.01)  # 2 GPUs x 30 minutes
    assert mine["gpu_hours"] == pytest.approx(job["gpu_hours"], abs=0.01)

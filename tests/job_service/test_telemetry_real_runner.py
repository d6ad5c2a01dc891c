"""A real runner's telemetry on the local backend, kept and served by the service's own
collector: the whole path with no stand-in, at a one-second interval.

This machine has no GPU (the flavor's GPU is the local backend's configured index): the
runner samples the job's CPU and memory and reads no GPU, and a GPU job whose GPUs gave
no reading gets no hint. The GPU readings themselves are the runner's tests' (stand-in
NVML and nvidia-smi)."""

from __future__ import annotations

import asyncio

from tests.loops import cpu_spin, spun_share

from .conftest import start_service, stop_all


async def test_a_real_jobs_samples_reach_the_api_while_it_runs_and_its_summary_at_the_end(
    tmp_path,
):
    svc = await start_service(tmp_path, {"telemetry": {"interval": "1s"}})
    try:
        hold, release = svc.gate("ada")  # it runs until two samples were seen
        svc.write("ada", "slow.ipynb", hold)
        job = await svc.submit("ada", "slow.ipynb", "gpu")
        await svc.wait("ada", job["id"], lambda j: j["state"] == "running")
        async with svc.client("ada") as c:
            for _ in range(100):  # the collector's own loop keeps them, every second
                live = (await c.get(f"jobs/{job['id']}/metrics")).json()
                if len(live["samples"]) >= 2:
                    break
                await asyncio.sleep(0.1)
            release()
            done = await svc.wait("ada", job["id"])
            ended = (await c.get(f"jobs/{job['id']}/metrics")).json()
    finally:
        await stop_all(svc)

    assert done["state"] == "succeeded"
    assert live["interval_seconds"] == 1.0
    assert len(live["samples"]) >= 2, live
    latest = live["samples"][-1]
    assert latest["cpu_percent"] is not None
    assert latest["memory_bytes"] > 10 * 1024**2  # the runner and its kernel
    assert latest["gpu_utilization_percent"] is None
    summary = ended["summary"]
    assert summary["samples"] >= 3
    assert summary["memory_peak_bytes"] >= latest["memory_bytes"]
    assert summary["gpu_busy_seconds"] is None
    assert ended["hint"] is None
    assert len(ended["samples"]) >= len(live["samples"])


async def test_a_script_jobs_samples_reach_the_api_too(tmp_path):
    svc = await start_service(tmp_path, {"telemetry": {"interval": "1s"}})
    try:
        script = svc.home("ada") / "train.py"
        script.write_text(cpu_spin(3, str(svc.home("ada") / "share.txt")))
        job = await svc.submit("ada", "train.py", "gpu")
        assert job["kind"] == "script"
        done = await svc.wait("ada", job["id"])
        async with svc.client("ada") as c:
            ended = (await c.get(f"jobs/{job['id']}/metrics")).json()
    finally:
        await stop_all(svc)

    assert done["state"] == "succeeded", done
    assert len(ended["samples"]) >= 2, ended
    summary = ended["summary"]
    assert summary["samples"] >= 3
    # the script spun (the runner alone idles near 0): the peak of 1 s samples is at
    # least the share of a core the script saw over its whole run, less sampling's edges
    share = spun_share(svc.home("ada") / "share.txt")
    assert summary["cpu_peak_percent"] >= 0.7 * share, (summary, share)
    assert summary["memory_peak_bytes"] > 5 * 1024**2

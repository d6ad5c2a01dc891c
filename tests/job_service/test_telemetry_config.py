"""nbjobs.yaml ``telemetry.interval`` reaches the runner of every job the local backend
starts, as its ``--telemetry-interval``. Real service, local backend, real runner and
kernel; the host's GPU tools, whatever they are, do not matter here."""

from __future__ import annotations

import json

import pytest
from nbjobs.job_service.backends.base import LaunchSpec

from .conftest import start_service, stop_all


@pytest.mark.parametrize(("written", "seconds"), [("2s", 2.0), (0, None)], ids=["2s", "off"])
async def test_the_admins_interval_reaches_the_runner(tmp_path, written, seconds):
    svc = await start_service(tmp_path, {"telemetry": {"interval": written}})
    try:
        svc.write("ada", "wait.ipynb", "import time\ntime.sleep(2.5)")
        job = await svc.submit("ada", "wait.ipynb")
        done = await svc.wait("ada", job["id"])
    finally:
        await stop_all(svc)

    assert done["state"] == "succeeded", done
    output = json.loads((svc.home("ada") / done["output_path"]).read_text())
    telemetry = output["metadata"]["nbjobs"]["telemetry"]
    if seconds is None:
        assert telemetry is None  # off: nothing sampled
    else:
        assert telemetry["interval_seconds"] == seconds
        # every 2 s of a run of 2.5 s and more, and one when the cells ended
        assert telemetry["samples"] >= 2
        assert telemetry["memory_peak_bytes"] > 0


async def test_the_local_backends_command_carries_the_interval(tmp_path):
    svc = await start_service(tmp_path, {"telemetry": {"interval": "1m"}})
    try:
        folder = tmp_path / "job"
        spec = LaunchSpec(
            job_id="0123456789ab",
            user="ada",
            flavor=svc.service.config.flavors[0],
            snapshot_file=folder / "input.ipynb",
            output_file=tmp_path / "out.ipynb",
            status_file=folder / "status.json",
            log_file=folder / "log.txt",
            cwd=tmp_path,
        )
        command = svc.service.backend.command(spec)  # type: ignore[attr-defined]
    finally:
        await stop_all(svc)

    at = command.index("--telemetry-interval")
    assert command[at + 1] == "60"

"""Jobs get their fair part of a busy machine's CPU: as much as the same programs would
get started by hand beside the machine's other processes, not the part of one process
for all of nbjobs' jobs together. Real service, runners and kernels in real control
groups (CI runs as root on cgroup v1).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nbjobs.cgroups import Cgroups

from .conftest import start_service, stop_all

needs_cpu_control = pytest.mark.skipif(
    "cpu" not in Cgroups().enforced,
    reason="needs root and the kernel's cpu control group (CI has both)",
)

#: everything measured here shares this one CPU, so the kernel must divide it
CPU = max(os.sched_getaffinity(0))
#: jobs and processes outside nbjobs, spinning on that CPU at the same time
EACH = 2

# Spin on the one CPU for 2 s once every spinner (the jobs' kernels and the processes
# outside nbjobs) is there, and say what share of the CPU this process got meanwhile.
SPIN = """
import json, os, pathlib, time
os.sched_setaffinity(0, {{{cpu}}})
meeting = pathlib.Path({meeting!r})
(meeting / f"ready-{{os.getpid()}}").touch()
while len(list(meeting.glob("ready-*"))) < {everyone}:
    time.sleep(0.01)
wall, cpu = time.monotonic(), time.process_time()
while time.monotonic() - wall < 2.0:
    pass
share = (time.process_time() - cpu) / (time.monotonic() - wall)
(meeting / f"share-{{{who!r}}}-{{os.getpid()}}.json").write_text(json.dumps(share))
"""


def spin(meeting: Path, who: str) -> str:
    return SPIN.format(cpu=CPU, meeting=str(meeting), everyone=2 * EACH, who=who)


def spin_outside(meeting: Path) -> subprocess.Popen[bytes]:
    """A spinner outside nbjobs, in a session of its own as the backend starts a runner
    (and jupyter_client its kernel): where the kernel groups processes by session
    (autogroup), each session weighs as one process."""
    command = [sys.executable, "-c", spin(meeting, "outside")]
    return subprocess.Popen(command, start_new_session=True)


def shares(meeting: Path, who: str) -> list[float]:
    return [json.loads(p.read_text()) for p in sorted(meeting.glob(f"share-{who}-*.json"))]


@needs_cpu_control
async def test_jobs_get_as_much_cpu_as_the_same_programs_outside_nbjobs(tmp_path):
    meeting = tmp_path / "meeting"
    meeting.mkdir()
    svc = await start_service(tmp_path)  # cpu_slots: 2, so both jobs run at once
    outside = [spin_outside(meeting) for _ in range(EACH)]
    try:
        svc.write("ada", "spin.ipynb", spin(meeting, "job"))
        jobs = [await svc.submit("ada", "spin.ipynb") for _ in range(EACH)]
        done = await asyncio.gather(*(svc.wait("ada", j["id"], timeout=180) for j in jobs))
        for p in outside:
            await asyncio.to_thread(p.wait, 60)
    finally:
        for p in outside:
            p.kill()
            p.wait()
        await stop_all(svc)

    assert [j["state"] for j in done] == ["succeeded"] * EACH, done
    jobs_got, outside_got = shares(meeting, "job"), shares(meeting, "outside")
    assert len(jobs_got) == len(outside_got) == EACH, (jobs_got, outside_got)
    # Before, both jobs together weighed as one process: each got half of what each
    # process outside got (about 0.17 against 0.33 of the CPU). Now each job weighs
    # what its runner and kernel would outside, and gets at least as much.
    assert min(jobs_got) > 0.9 * max(outside_got), (jobs_got, outside_got)

"""A job's flavor is a limit on one machine, as on a cluster: its memory, its CPU, its
processes and threads, and nothing of it left running after it ends. Real service,
runners and kernels, in real control groups (CI runs as root on cgroup v1); the
notebooks report what they get.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

import nbformat
import psutil
import pytest

from nbjobs.cgroups import Group

from .conftest import BASE_CONFIG, Service, needs_cgroups, start_service, stop_all

FLAVORS = [
    *BASE_CONFIG["flavors"],
    {"name": "small", "gpus": 0, "memory": "200Mi", "cpu": "500m", "time_limit": "5m"},
    {"name": "few-tasks", "gpus": 0, "tasks": 100, "time_limit": "5m"},
]


def group_gone(group: Group) -> bool:
    """The job's control group has been removed, in every hierarchy."""
    paths = group.paths().values()
    return bool(paths) and not any(p.exists() for p in paths)


async def run_one(tmp_path, notebook: str, flavor: str, *cells: str) -> tuple[Service, dict, bool]:
    """Run ada's ``notebook`` (of ``cells``) on ``flavor`` to its end on a service of
    :data:`FLAVORS`, then stop the service: the service, the job as it ended, and
    whether its control group had been removed by then."""
    svc = await start_service(tmp_path, {"flavors": FLAVORS})
    try:
        svc.write("ada", notebook, *cells)
        job = await svc.submit("ada", notebook, flavor)
        done = await svc.wait("ada", job["id"], timeout=120)
        removed = group_gone(svc.service.backend.cgroups.group(f"job-{job['id']}"))
    finally:
        await stop_all(svc)
    return svc, done, removed


@needs_cgroups
async def test_a_job_past_its_flavors_memory_fails_saying_so(tmp_path):
    svc, done, removed = await run_one(
        tmp_path, "big.ipynb", "small", "print('before')", "hog = bytearray(600 * 2**20)"
    )

    assert done["state"] == "failed", done
    assert done["message"].startswith("out of memory (limit 200 MiB)"), done["message"]
    # the cells before ran, and their output was kept
    output = nbformat.read(svc.home("ada") / done["output_path"], as_version=4)
    first = next(c for c in output.cells if c.source == "print('before')")
    assert first.outputs[0].text == "before\n"
    assert removed  # the job's control group went with it


CPU_TIME = """
import json, time
start_wall, start_cpu = time.monotonic(), time.process_time()
while time.monotonic() - start_wall < 1.5:
    pass
share = (time.process_time() - start_cpu) / (time.monotonic() - start_wall)
json.dump({"share": share}, open("cpu.json", "w"))
"""


@needs_cgroups
async def test_a_job_gets_its_flavors_cpu_and_no_more(tmp_path):
    svc, done, _ = await run_one(tmp_path, "spin.ipynb", "small", CPU_TIME)

    assert done["state"] == "succeeded", done
    share = json.loads((svc.home("ada") / "cpu.json").read_text())["share"]
    assert 0.2 < share < 0.7, share  # half a core (a whole one without the limit)


DAEMON = """
import os, subprocess, sys
# a process that leaves the job's session and its parent behind: a daemon of the user's
child = subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True
)
open("daemon.pid", "w").write(str(child.pid))
"""


@needs_cgroups
async def test_nothing_of_a_job_outlives_it(tmp_path):
    svc = await start_service(tmp_path, {"flavors": FLAVORS})
    try:
        svc.write("ada", "daemon.ipynb", DAEMON)
        job = await svc.submit("ada", "daemon.ipynb", "cpu")
        done = await svc.wait("ada", job["id"], timeout=120)
        pid = int((svc.home("ada") / "daemon.pid").read_text())
        gone = (
            psutil.wait_procs([psutil.Process(pid)], timeout=10)[0] if psutil.pid_exists(pid) else 1
        )
    finally:
        await stop_all(svc)

    assert done["state"] == "succeeded", done
    assert gone


async def test_a_machine_without_control_groups_says_what_is_not_enforced(tmp_path, capfd):
    empty = tmp_path / "no-cgroups"
    empty.mkdir()
    svc = await start_service(tmp_path, argv=(f"--LocalBackend.cgroup_root={empty}",))
    try:
        ok, detail = svc.service.backend.health()
    finally:
        await stop_all(svc)

    why = (
        f"no cgroup controllers are mounted at {empty}"
        if os.geteuid() == 0
        else "nbjobs does not run as root"
    )
    line = f"jobs' GPU devices, memory, CPU and tasks are not enforced ({why})"
    said = [text for text in capfd.readouterr().err.splitlines() if line in text]
    assert len(said) == 1, said  # once, at start
    assert said[0].startswith("[W"), said  # a warning
    assert ok
    assert detail.endswith(f"GPU devices, memory, CPU and tasks are not enforced ({why})")


@needs_cgroups
async def test_the_dashboard_health_says_what_is_enforced(tmp_path):
    svc = await start_service(tmp_path)
    try:
        _, detail = svc.service.backend.health()
    finally:
        await stop_all(svc)
    assert detail.endswith("GPU devices, memory, CPU, tasks enforced (cgroup v1)"), detail


# Each loop is bounded, far past the flavor's 100 tasks: without a limit it ends by
# itself (and the job succeeds) instead of taking the machine's process slots.
THREAD_LOOP = """
import threading
stop = threading.Event()
for started in range(2000):
    threading.Thread(target=stop.wait, daemon=True).start()
"""

FORK_LOOP = """
import os, time
for forked in range(1000):
    if os.fork() == 0:
        time.sleep(600)
        os._exit(0)
"""


MANY_AT_ONCE = """
import os, time
for _ in range(150):
    if os.fork() == 0:
        time.sleep(1)
        os._exit(0)
"""


@needs_cgroups
@pytest.mark.parametrize(
    ("loop", "ename"),
    [(THREAD_LOOP, "RuntimeError"), (FORK_LOOP, "BlockingIOError")],
    ids=["threads", "forks"],
)
async def test_a_job_past_its_flavors_tasks_fails_saying_so_and_the_machine_goes_on(
    tmp_path, loop, ename
):
    svc, done, removed = await run_one(tmp_path, "bomb.ipynb", "few-tasks", "print('before')", loop)

    assert done["state"] == "failed", done
    assert done["message"].startswith("too many processes (limit 100)"), done["message"]
    assert done["error"]["ename"] == ename, done["error"]  # the cell that was refused
    output = nbformat.read(svc.home("ada") / done["output_path"], as_version=4)
    first = next(c for c in output.cells if c.source == "print('before')")
    assert first.outputs[0].text == "before\n"
    assert removed  # and its forked children with it
    # the rest of the machine is unaffected: outside the job, 150 at once start
    many = await asyncio.create_subprocess_exec(sys.executable, "-c", MANY_AT_ONCE)
    assert await many.wait() == 0


CAUGHT = """
import threading
stop, started = threading.Event(), 0
try:
    for started in range(2000):
        threading.Thread(target=stop.wait, daemon=True).start()
except RuntimeError:
    print("refused, and carried on")
stop.set()
"""


@needs_cgroups
async def test_a_job_that_catches_the_refusal_and_carries_on_succeeds(tmp_path):
    svc, done, _ = await run_one(tmp_path, "careful.ipynb", "few-tasks", CAUGHT)

    assert done["state"] == "succeeded", done
    output = nbformat.read(svc.home("ada") / done["output_path"], as_version=4)
    assert output.cells[0].outputs[0].text == "refused, and carried on\n"

"""Nothing is lost: a service restart keeps queued jobs and adopts or explains running ones."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import nbformat
import psutil
import pytest
from nbjobs.job_service.backends import local
from nbjobs.job_service.db import SCHEMA_VERSION, connect

from tests.machine import job_tmp

from .conftest import BASE_CONFIG, needs_cgroups, stop_service


def running(job):
    return job["state"] == "running"


async def sleeping_job(svc):
    """Ada's job, running a cell that sleeps a minute in its kernel: the job, its runner
    and the runner's processes (the kernel)."""
    svc.write("ada", "k.ipynb", "import time; time.sleep(60)")
    job = await svc.submit("ada", "k.ipynb")
    await svc.wait("ada", job["id"], running)
    runner = svc.service.backend.running[job["id"]]
    await svc.wait("ada", job["id"], lambda j: bool(psutil.Process(runner.pid).children()))
    return job, runner, psutil.Process(runner.pid).children(recursive=True)


async def test_restart_adopts_running_jobs_and_keeps_queued_ones(start):
    first = await start()
    hold, release = first.gate("root")
    first.write("root", "r.ipynb", "print('a', flush=True)", hold, "2")
    running_job = await first.submit("root", "r.ipynb", "gpu2")
    await first.wait("root", running_job["id"], running)
    queued_job = await first.submit("root", "r.ipynb", "gpu")
    pid = first.service.backend.running[running_job["id"]].pid
    tmp = job_tmp(running_job["id"])
    assert tmp.is_dir()  # the job's temporary folder, which the restart must not lose

    await stop_service(first)  # the service goes away; the job does not
    assert psutil.pid_exists(pid)
    second = await start()
    try:
        adopted = await second.job("root", running_job["id"])
        assert adopted["state"] == "running"
        assert second.service.backend.running[running_job["id"]].pid == pid

        release()
        done = await second.wait("root", running_job["id"])
        after = await second.wait("root", queued_job["id"])

        assert done["state"] == "succeeded"
        assert done["progress"]["cells_done"] == 3
        assert after["state"] == "succeeded"  # queued before the restart, run after it
        assert after["gpus"] == ["0"]
        assert not tmp.exists()  # removed as the adopted job ended
    finally:
        await stop_service(second)


async def test_a_job_that_ended_while_the_service_was_down_gets_its_real_outcome(start):
    first = await start()
    hold, release = first.gate("ada")
    first.write("ada", "q.ipynb", hold, "raise ValueError('late')")
    job = await first.submit("ada", "q.ipynb")
    await first.wait("ada", job["id"], running)
    pid = first.service.backend.running[job["id"]].pid
    await stop_service(first)
    release()
    psutil.Process(pid).wait(timeout=60)  # it finishes while nobody watches

    second = await start()
    try:
        done = await second.job("ada", job["id"])
        assert done["state"] == "failed"
        assert done["message"] == "code cell 2 of 2 raised ValueError: late"
        assert not job_tmp(job["id"]).exists()  # what the job left in its TMPDIR went
    finally:
        await stop_service(second)


async def test_a_job_that_ends_as_the_service_stops_leaves_no_temporary_folder(start):
    """The race a stop has with a job's last moments: the runner ends (a cancel's kill, its
    last cell) just as the service stops watching its jobs, before its watch has seen it.
    That job runs no more, and no service will adopt it: what it left in /tmp and its
    kernel go with the stop."""
    svc = await start()
    job, runner, kernels = await sleeping_job(svc)
    assert job_tmp(job["id"]).is_dir()

    runner.process.kill()
    runner.process.wait(timeout=30)  # ended, and the loop has not run since: nobody saw it
    await svc.service.follower.stop()  # what a stop does first, as it happens this moment
    await stop_service(svc)

    assert not job_tmp(job["id"]).exists()
    _, alive = psutil.wait_procs(kernels, timeout=10)
    assert alive == []  # its kernel did not outlive it either


@pytest.fixture
def held_runners(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every runner the local backend starts is stopped (SIGSTOP) the moment it is
    started, before it can start a kernel: :func:`kill_as_its_kernel_starts` lets it go
    on, whatever the machine's speed (at load 31 a runner's kernel once started while
    the test still waited for the job to be running, and the service saw it)."""
    real = local.start_runner

    def start_held(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        process = real(*args, **kwargs)
        os.kill(process.pid, signal.SIGSTOP)
        return process

    monkeypatch.setattr(local, "start_runner", start_held)


async def held_job(svc) -> tuple[dict, Any]:
    """Ada's one-cell job, its runner held (:func:`held_runners`), in its control group:
    the job and the backend's record of its runner."""
    svc.write("ada", "k.ipynb", "1")
    job = await svc.submit("ada", "k.ipynb")
    await svc.wait("ada", job["id"], lambda j: j["id"] in svc.service.backend.running)
    runner = svc.service.backend.running[job["id"]]
    assert runner.group is not None
    return job, runner


def kill_as_its_kernel_starts(runner) -> list[psutil.Process]:
    """Let a held runner go on (:func:`held_runners`), and SIGKILL it the moment its
    kernel's process exists (the kernel still starting); the kernel. It blocks the event
    loop on purpose: the service looks at nothing meanwhile."""
    os.kill(runner.pid, signal.SIGCONT)
    deadline = time.monotonic() + 120
    while not (kernels := psutil.Process(runner.pid).children()):
        assert time.monotonic() < deadline, "the runner started no kernel in 120 s"
        time.sleep(0.002)
    runner.process.kill()
    runner.process.wait(timeout=30)
    return kernels


@needs_cgroups
async def test_a_kernel_left_starting_by_a_killed_runner_brings_no_folder_back(start, held_runners):
    """A runner killed as its kernel starts (a cancel's kill after the grace, a stop's
    race): the kernel, not yet seen by the service, finds its connection file gone with
    the job's TMPDIR and, as ipykernel does, makes the folder again and writes one there.
    A kernel orphaned this way leaves only when its parent poller notices, by os._exit:
    the folder stayed for good. Every process left in the job's control group is stopped
    before its TMPDIR goes."""
    svc = await start()
    job, runner = await held_job(svc)
    kernels = kill_as_its_kernel_starts(runner)
    assert runner.tree == set()  # the service never saw that kernel
    await svc.service.follower.stop()
    await stop_service(svc)

    _, alive = psutil.wait_procs(kernels, timeout=60)
    for kernel in alive:
        kernel.kill()
    assert alive == [], "the kernel outlived its job"
    assert not job_tmp(job["id"]).exists()


@needs_cgroups
async def test_a_kernel_left_starting_while_no_service_ran_is_stopped_by_the_next(
    start, held_runners
):
    """The same kernel, left by a runner killed while no service watched: the next
    service finds the job lost, stops what is left in its control group, then removes
    its TMPDIR and its group. (It removed the folder only, under the kernel, which made
    it again.) The kernel is held stopped until the next service has started, so that
    it is still starting then, whatever the machine's speed."""
    first = await start()
    job, runner = await held_job(first)
    # its runner held meanwhile: at load 11 the job once ran to its end during the stop
    await stop_service(first)
    kernels = kill_as_its_kernel_starts(runner)
    for kernel in kernels:
        kernel.suspend()

    second = await start()
    try:
        for kernel in kernels:  # on with its start, if it still can
            with contextlib.suppress(psutil.NoSuchProcess):
                kernel.resume()
        _, alive = psutil.wait_procs(kernels, timeout=60)
        for kernel in alive:
            kernel.kill()
        assert alive == [], "the kernel outlived its job"
        done = await second.job("ada", job["id"])
        assert done["state"] == "failed"
    finally:
        await stop_service(second)
    assert not job_tmp(job["id"]).exists()
    assert not [p for p in runner.group.paths().values() if p.exists()]  # nor its group


#: a process that notes each SIGTERM it gets (the time, in the file it is given) and
#: lives on: what a job may leave in its control group
STUBBORN = """
import signal, sys, time
out = open(sys.argv[1], "a", buffering=1)
signal.signal(signal.SIGTERM, lambda *_: out.write(f"{time.time()}\\n"))
print("ready", flush=True)
while True:
    time.sleep(1)
"""


@needs_cgroups
async def test_what_lost_jobs_left_gets_its_grace_side_by_side(start, held_runners, tmp_path):
    """Two jobs whose runners died while no service ran, each leaving a process that
    ignores SIGTERM in its control group: the next service gives both their grace (5 s)
    at once, off its loop. One after the other, each such job held the service's start,
    and the clean-up of every job after it, for a whole grace."""
    first = await start()
    jobs = [await held_job(first) for _ in range(2)]
    marks = [tmp_path / f"stubborn-{job['id']}" for job, _ in jobs]
    stubborn: list[asyncio.subprocess.Process] = []
    try:
        for (_, runner), mark in zip(jobs, marks, strict=True):
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-c", STUBBORN, str(mark), stdout=asyncio.subprocess.PIPE
            )
            stubborn.append(process)
            assert process.stdout is not None
            assert await process.stdout.readline() == b"ready\n"  # its SIGTERM handler is set
            runner.group.join(process.pid)
        await stop_service(first)
        for _, runner in jobs:
            runner.process.kill()
            runner.process.wait(timeout=30)

        second = await start()
        try:
            for job, _ in jobs:
                assert (await second.job("ada", job["id"]))["state"] == "failed"
        finally:
            await stop_service(second)
        for process in stubborn:
            assert await asyncio.wait_for(process.wait(), 60) == -signal.SIGKILL  # its grace over
    finally:  # a test that failed early leaves none of them running for good
        for process in stubborn:
            if process.returncode is None:
                process.kill()
                await process.wait()
    terms = [float(mark.read_text().split()[0]) for mark in marks]
    # one after the other, the second SIGTERM came a grace (5 s) after the first
    assert abs(terms[0] - terms[1]) < 2.5, terms


async def test_a_job_killed_while_the_service_was_down_is_failed_with_the_reason(start):
    first = await start()
    job, runner, kernels = await sleeping_job(first)
    tmp = job_tmp(job["id"])
    assert tmp.is_dir()
    await stop_service(first)
    for process in [psutil.Process(runner.pid), *kernels]:
        process.kill()

    second = await start()
    try:
        done = await second.job("ada", job["id"])
        assert done["state"] == "failed"
        assert done["message"] == (
            "the job's process was gone when the job service restarted; re-run it"
        )
        # its kernel's files (a runner killed hard leaves them) went with the job
        assert not tmp.exists()
    finally:
        await stop_service(second)


async def test_a_job_stopped_from_outside_while_the_service_was_down_is_no_cancel(start):
    """The machine shut down (or an admin's kill) while the service was away: the runner
    saved its cells on SIGTERM and said "cancelled by SIGTERM", but nobody cancelled it
    through nbjobs. Found at the next start, it fails saying so."""
    first = await start()
    first.write("ada", "t.ipynb", "print('kept', flush=True)", "import time; time.sleep(60)")
    job = await first.submit("ada", "t.ipynb")
    await first.wait("ada", job["id"], lambda j: j["progress"]["cells_done"] == 1)
    pid = first.service.backend.running[job["id"]].pid
    await stop_service(first)
    os.kill(pid, signal.SIGTERM)
    psutil.Process(pid).wait(timeout=60)

    second = await start()
    try:
        done = await second.job("ada", job["id"])
    finally:
        await stop_service(second)
    assert done["state"] == "failed"
    assert done["message"] == (
        "its process was stopped outside nbjobs (SIGTERM): killed, or the machine shut "
        "down; nobody cancelled it here; re-run it"
    )


async def test_a_killed_runner_fails_the_job_and_its_kernel_is_stopped(svc):
    svc.write("ada", "kill.ipynb", "import time; time.sleep(60)")
    job = await svc.submit("ada", "kill.ipynb")
    await svc.wait("ada", job["id"], lambda j: j["state"] == "running")
    runner = svc.service.backend.running[job["id"]]
    await svc.wait("ada", job["id"], lambda j: bool(psutil.Process(runner.pid).children()))
    kernel = psutil.Process(runner.pid).children(recursive=True)[-1]
    tmp = job_tmp(job["id"])
    assert stat.S_IMODE(tmp.stat().st_mode) & 0o777 == 0o700  # (jupyter_client adds +t)
    # the kernel's sockets and connection file, which no runner killed hard removes
    assert len(list(tmp.iterdir())) == 2

    os.kill(runner.pid, signal.SIGKILL)
    done = await svc.wait("ada", job["id"])

    assert done["state"] == "failed"
    assert done["message"] == "the runner was killed by SIGKILL"
    kernel.wait(timeout=10)  # the orphaned kernel was stopped too
    assert not kernel.is_running()
    assert not tmp.exists()  # and its files in the job's temporary folder are gone


def test_the_schema_is_upgraded_in_place(tmp_path):
    db = tmp_path / "old.sqlite"
    with sqlite3.connect(db) as conn:  # a table from an older version, without later columns
        conn.execute("CREATE TABLE nbjobs_jobs (id VARCHAR(32) PRIMARY KEY, seq INTEGER)")
        conn.execute("INSERT INTO nbjobs_jobs VALUES ('abc', 1)")

    connect(f"sqlite:///{db}")

    with sqlite3.connect(db) as conn:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(nbjobs_jobs)")}
        version = conn.execute("SELECT version FROM nbjobs_schema").fetchall()
        kept = conn.execute("SELECT id FROM nbjobs_jobs").fetchall()
    assert {"state", "rerun_of", "cancel_requested", "output_file"} <= columns
    assert version == [(SCHEMA_VERSION,)]
    assert kept == [("abc",)]


def test_a_malformed_config_stops_the_service_with_the_line(tmp_path):
    config = tmp_path / "nbjobs.yaml"
    config.write_text("flavors:\n  - name: gpu\n    gpus: two\n")

    proc = subprocess.run(
        [sys.executable, "-m", "nbjobs.cli", "service", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert proc.returncode == 2
    assert f"{config}, line 3: flavors.0.gpus: Input should be a valid integer" in proc.stdout


async def test_a_job_claimed_as_the_service_stops_runs_after_the_restart(start):
    """The service stopped while its dispatcher was claiming a job: the claim was
    committed but nothing started, and the next service called the job lost ("the
    job's process was gone") instead of running it."""
    first = await start()
    first.write("ada", "c.ipynb", "print('ran')")
    dispatcher = first.service.dispatcher
    claiming, go_on = threading.Event(), threading.Event()
    claim = dispatcher._claim

    def slow_claim(job_id, token):
        claiming.set()
        go_on.wait(30)
        return claim(job_id, token)

    dispatcher._claim = slow_claim
    job = await first.submit("ada", "c.ipynb")
    assert await asyncio.to_thread(claiming.wait, 30), "the dispatcher never claimed the job"
    stopping = asyncio.ensure_future(stop_service(first))
    await asyncio.sleep(0.2)  # the stop cancels the pass while the claim is in its thread
    go_on.set()
    await stopping
    assert not first.service.backend.running, "a start began after the stop"

    second = await start()
    try:
        done = await second.wait("ada", job["id"])
        assert done["state"] == "succeeded", done["message"]
    finally:
        await stop_service(second)


async def test_a_job_started_but_never_recorded_is_found_running_after_a_crash(start):
    """A service killed between starting a job's runner and recording its process left
    the job "starting" with no process named: the next service called it lost while its
    runner ran on. Now the runner is found by its status file and adopted."""
    first = await start()
    hold, release = first.gate("ada")
    first.write("ada", "u.ipynb", hold, "print('after the crash')")
    dispatcher = first.service.dispatcher
    dispatcher.stop_grace = 0.5
    unblock = threading.Event()

    def never_recorded(job_id, token, launched):
        unblock.wait(60)  # the service dies before this write: it never happens
        return None

    dispatcher._record_start = never_recorded
    job = await first.submit("ada", "u.ipynb")
    await first.wait("ada", job["id"], lambda j: job["id"] in first.service.backend.running)
    pid = first.service.backend.running[job["id"]].pid
    await stop_service(first)
    unblock.set()
    assert psutil.pid_exists(pid)

    second = await start()
    try:
        adopted = await second.job("ada", job["id"])
        assert adopted["state"] in ("starting", "running"), adopted["message"]
        assert second.service.backend.running[job["id"]].pid == pid
        release()
        done = await second.wait("ada", job["id"])
        assert done["state"] == "succeeded", done["message"]
    finally:
        await stop_service(second)


async def unrecorded_job(svc, name: str) -> tuple[dict, psutil.Process, Any, threading.Event]:
    """Ada's job, held in its first cell, whose start the service never records: it
    dies (its stop, soon after) before the write, which waits for the event returned
    (set it once the service has stopped). The job, its runner, what lets the cell end."""
    hold, release = svc.gate("ada")
    svc.write("ada", name, hold)
    dispatcher = svc.service.dispatcher
    dispatcher.stop_grace = 0.5
    unblock = threading.Event()
    dispatcher._record_start = lambda job_id, token, launched: unblock.wait(60) and None
    job = await svc.submit("ada", name)
    await svc.wait("ada", job["id"], lambda j: j["progress"]["current_cell"] is not None)
    runner = psutil.Process(svc.service.backend.running[job["id"]].pid)
    return job, runner, release, unblock


async def test_a_job_never_recorded_that_ended_while_away_leaves_no_folder(start):
    """The same crash, and the runner ends before a service starts again (seen in the
    two-services test: the first service killed a moment after a start): the next
    service records how it ended and when it began from its status file (it recorded no
    start: the job's time counted for nothing), and removes its TMPDIR, which nobody
    else ever would."""
    first = await start()
    job, runner, release, unblock = await unrecorded_job(first, "e.ipynb")
    assert job_tmp(job["id"]).is_dir()
    await stop_service(first)
    unblock.set()
    release()
    runner.wait(timeout=60)

    second = await start()
    try:
        done = await second.wait("ada", job["id"])
    finally:
        await stop_service(second)
    assert done["state"] == "succeeded", done
    assert not job_tmp(job["id"]).exists()
    # when it ran, from its runner (the service never recorded it): its time counts
    when = {k: datetime.fromisoformat(done[k]) for k in ("submitted_at", "started_at")}
    assert when["submitted_at"] <= when["started_at"] < datetime.fromisoformat(done["finished_at"])


async def test_a_process_of_the_users_own_is_not_taken_for_an_unrecorded_runner(start):
    """After such a crash, a process the user started that names the job's status file
    (as a runner's command line does) is not adopted as the job: it is not in the job's
    control group, which only the service can put a process in."""
    first = await start()
    job, runner, _, unblock = await unrecorded_job(first, "f.ipynb")
    args = runner.cmdline()
    status_file = args[args.index("--status-file") + 1]
    await stop_service(first)
    unblock.set()
    for process in [*runner.children(recursive=True), runner]:
        process.kill()
    runner.wait(timeout=30)
    with lookalike_of(status_file) as lookalike:
        second = await start()
        try:
            done = await second.wait("ada", job["id"])
            assert job["id"] not in second.service.backend.running
        finally:
            await stop_service(second)
        assert done["state"] == "failed", done
        assert lookalike.poll() is None  # left alone


@contextlib.contextmanager
def lookalike_of(status_file: str) -> Iterator[subprocess.Popen[bytes]]:
    """A process that names ``status_file`` on its command line as a job's runner does."""
    process = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", "--status-file", status_file]
    )
    try:
        yield process
    finally:
        process.kill()
        process.wait()


@needs_cgroups
async def test_a_job_whose_flavor_was_taken_out_while_away_is_stopped_saying_why(start):
    """An admin took a flavor out of nbjobs.yaml while the service was stopped, with a
    job running on it: nothing could account for what that job holds. It was failed as
    "gone" while its runner ran on, unwatched (its GPUs given to the next job). Now it
    is stopped as a cancel is (its finished cells kept) and says why."""
    retired = {"name": "retired", "gpus": 0}
    first = await start({"flavors": [*BASE_CONFIG["flavors"], retired]})
    first.write("ada", "r.ipynb", "print('kept', flush=True)", "import time; time.sleep(120)")
    job = await first.submit("ada", "r.ipynb", "retired")
    await first.wait("ada", job["id"], lambda j: j["progress"]["cells_done"] == 1)
    runner = psutil.Process(first.service.backend.running[job["id"]].pid)
    await stop_service(first)

    second = await start()
    try:
        done = await second.job("ada", job["id"])
    finally:
        await stop_service(second)
    assert done["state"] == "failed", done
    assert done["message"] == (
        "its flavor 'retired' was taken out of nbjobs.yaml while the job service was "
        "stopped, so the job was stopped when it started again; re-run it on another flavor"
    )
    assert not runner.is_running() or runner.status() == psutil.STATUS_ZOMBIE
    assert not job_tmp(job["id"]).exists()
    output = nbformat.read(second.home("ada") / done["output_path"], as_version=4)
    code = [c for c in output.cells if c.cell_type == "code"]
    assert code[0].outputs[0]["text"] == "kept\n"  # saved as it was stopped

"""The runners' latest word is read once for everyone (job_service/live.py).

The job list, one job's details and the metrics show a started job's progress from its
runner's status file. Every panel polls: reading the file per request and per job made
a hundred open panels read each file a hundred times a poll. These tests count the
reads and check that what users see still follows the runner.
"""

from __future__ import annotations

import logging
import threading

from nbjobs.job_runner import RunStatus
from nbjobs.job_service.live import RunnerStatuses

from .telemetry_helpers import insert_job, write_status


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def counting_reader(status: RunStatus | None):
    reads: list[str] = []
    gate = threading.Event()

    def read(job_dir: str, log: logging.Logger) -> RunStatus | None:
        gate.wait(5)
        reads.append(job_dir)
        return status

    return read, reads, gate


def test_many_asking_at_once_read_the_file_once_until_it_is_old():
    clock = Clock()
    read, reads, gate = counting_reader(RunStatus("running", cells_done=3, cells_total=9))
    runners = RunnerStatuses(logging.getLogger("t"), max_age=1.0, clock=clock, read=read)
    answers: list[RunStatus | None] = []
    askers = [
        threading.Thread(target=lambda: answers.append(runners.latest("j1", "/jobs/j1")))
        for _ in range(16)
    ]
    for asker in askers:
        asker.start()
    gate.set()  # the first reader finishes while fifteen wait for its reading
    for asker in askers:
        asker.join()

    assert len(reads) == 1
    assert [a.cells_done for a in answers if a is not None] == [3] * 16
    clock.now += 0.5
    runners.latest("j1", "/jobs/j1")
    assert len(reads) == 1  # still fresh
    clock.now += 0.6
    runners.latest("j1", "/jobs/j1")
    assert len(reads) == 2  # older than max_age: read again


def test_what_the_collector_read_serves_and_ended_jobs_are_forgotten():
    clock = Clock()
    read, reads, gate = counting_reader(None)
    gate.set()
    runners = RunnerStatuses(logging.getLogger("t"), clock=clock, read=read)
    runners.put("j1", RunStatus("running", cells_done=1, cells_total=2))
    runners.put("j2", RunStatus("starting"))

    assert runners.latest("j1", "/jobs/j1").cells_done == 1
    assert reads == []  # the collector's reading served
    assert runners.states() == {"j1": "running", "j2": "starting"}
    runners.keep_only(["j2"])  # j1 is no longer started
    assert runners.states() == {"j2": "starting"}
    runners.forget("j2")
    assert runners.latest("j2", "/jobs/j2") is None
    assert reads == ["/jobs/j2"]


async def test_a_hundred_polls_of_the_list_read_each_status_file_once(svc):
    await svc.service.telemetry.stop()  # the test runs the collector's passes itself
    clock = Clock()
    svc.service.runners.clock = clock
    jobs = [insert_job(svc.service, "ada") for _ in range(5)]
    for n, (_, jobdir) in enumerate(jobs):
        write_status(jobdir / "status.json", cells_done=n, cells_total=10, current_cell=n)
    before = svc.service.runners.reads

    async with svc.client("ada") as c:
        for _ in range(100):
            r = await c.get("jobs")
            assert r.status_code == 200, r.text
        shown = {j["id"]: j["progress"]["cells_done"] for j in r.json()["jobs"]}
        assert shown == {job_id: n for n, (job_id, _) in enumerate(jobs)}
        assert svc.service.runners.reads - before == 5  # not 500

        # the runner moves on: the list shows it once the reading is max_age old ...
        write_status(jobs[0][1] / "status.json", cells_done=7, cells_total=10, current_cell=7)
        clock.now += svc.service.runners.max_age
        r = await c.get(f"jobs/{jobs[0][0]}")
        assert r.json()["progress"]["cells_done"] == 7
        # ... or at once after the collector's pass, which reads every started job
        write_status(jobs[1][1] / "status.json", cells_done=9, cells_total=10, current_cell=9)
        await svc.service.telemetry.collect()
        r = await c.get(f"jobs/{jobs[1][0]}")
        assert r.json()["progress"]["cells_done"] == 9

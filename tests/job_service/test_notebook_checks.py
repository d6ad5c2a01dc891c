"""A big notebook stalls nobody: checks at submit are bounded (issue 31, attack 7).

The attack: a 58 MiB notebook of 300 000 small cells cost a minute of CPU and 1.3 GiB
in the service at submit, and three at once 3.6 GiB, while other users waited. Now a
notebook's cells are counted against ``limits.cells`` before anything costly, a big one
is parsed in a worker process under ``limits.check_memory``, each user's notebooks are
checked one at a time and at most ``limits.checks_at_once`` big ones at once. The
service here runs in the test's process, so its workers are this process's children.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import pwd
import resource
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from nbjobs.job_service import notebooks

from .conftest import start_service, stop_all

#: jobs on it wait for approval, so that a test's big notebooks are never run
HELD = {"name": "held", "gpus": 0, "approval": {"groups": ["students", "staff"]}}
FLAVORS = [{"name": "cpu", "gpus": 0, "time_limit": "10m"}, HELD]
WORKER = b"nbjobs.job_service.notebooks"


def write_cells(
    path: Path, count: int, *, kernel: str = "python3", width: int = 120, indent: int | None = 1
) -> int:
    """A notebook of ``count`` small code cells at ``path``, JSON indented as Jupyter
    writes it (``indent=None``: on one line); its size in bytes.

    The bytes ``json.dumps`` gives the whole notebook, put together from one cell's text
    with its number filled in: dumping 200 000 cells took 5 s of CPU."""
    mark = "@@"
    cell = {
        "cell_type": "code",
        "execution_count": None,
        "id": f"c{mark}",
        "metadata": {},
        "outputs": [],
        "source": [f"x = {mark}\n", "# " + "a" * width + "\n"],
    }
    nb = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": kernel, "display_name": kernel, "language": "python"}},
        "cells": ["<cells>"],
    }
    begin, end = json.dumps(nb, indent=indent).split('"<cells>"')
    one = json.dumps({**nb, "cells": [cell]}, indent=indent)[len(begin) : -len(end)]
    between = json.dumps({**nb, "cells": [0, 0]}, indent=indent)[len(begin) + 1 : -len(end) - 1]
    head, middle, tail = one.split(mark)
    cells = between.join(f"{head}{i}{middle}{i}{tail}" for i in range(count))
    if not count:
        begin, cells, end = json.dumps({**nb, "cells": []}, indent=indent), "", ""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(begin + cells + end)
    return path.stat().st_size


def uid_of(pid: int) -> int | None:
    """The real uid of process ``pid`` (None: gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("Uid:"))
    except OSError:
        return None


def workers() -> set[int]:
    """The notebook checkers running now as children of this process."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if ppid == os.getpid() and WORKER in cmdline:
            found.add(int(entry))
    return found


class FeedGate:
    """Holds each big check's worker, a real process under its real account, before it
    is fed the notebook, until the test lets it go: the worker waits on its stdin, so
    which checks run at once is seen in the process table, whatever the machine's
    speed. ``held`` gives each held worker's pid and the event that lets it go on."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.held: asyncio.Queue[tuple[int, asyncio.Event]] = asyncio.Queue()
        real = notebooks._feed

        async def feed(process: asyncio.subprocess.Process, data: bytes) -> None:
            go = asyncio.Event()
            await self.held.put((process.pid, go))
            await go.wait()
            await real(process, data)

        monkeypatch.setattr(notebooks, "_feed", feed)

    async def next(self) -> tuple[int, asyncio.Event]:
        return await asyncio.wait_for(self.held.get(), 120)


async def until(condition: Callable[[], bool]) -> None:
    """Wait for ``condition`` (a state of the service the test reads), two minutes at most."""
    deadline = asyncio.get_running_loop().time() + 120
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "the service never got there"
        await asyncio.sleep(0.01)


def submit(svc: Any, user: str, path: str) -> asyncio.Task[Any]:
    """A submit on flavor ``held`` (never run), in flight as a task. It waits for the
    service's answer however long: the service bounds it (``limits.check_wait`` for the
    turn, a CPU limit for the check); at load 12 three big checks in a row took 70 s,
    past a fixed 60 s."""

    async def one() -> Any:
        async with svc.client(user, timeout=None) as c:
            return await c.post("jobs", json={"path": path, "flavor": "held"})

    return asyncio.ensure_future(one())


def in_checks(svc: Any) -> int:
    """How many submits have come to their notebook's check (waiting or checking)."""
    return sum(svc.service.notebooks._waiting.values())


async def one_at_a_time(svc: Any, gate: FeedGate, submits: list[tuple[str, str]]) -> list[Any]:
    """Submit all at once; with every submit at its check, exactly one worker runs, each
    time one is let go: the answers, in the order given."""
    tasks = [submit(svc, user, path) for user, path in submits]
    for left in range(len(submits), 0, -1):
        pid, go = await gate.next()
        await until(lambda left=left: in_checks(svc) == left)
        assert workers() == {pid}, "another check ran beside the one held"
        if os.geteuid() == 0:  # a root service parses users' notebooks as nobody
            assert uid_of(pid) == pwd.getpwnam("nobody").pw_uid
        go.set()
    return list(await asyncio.gather(*tasks))


async def test_a_notebook_of_more_cells_than_allowed_is_refused_saying_what_to_do(tmp_path):
    svc = await start_service(tmp_path, {"flavors": FLAVORS, "limits": {"cells": 1000}})
    try:
        write_cells(svc.home("ada") / "many.ipynb", 1001)
        size = write_cells(svc.home("ada") / "huge.ipynb", 30_000)  # checked in a worker
        assert size > 4 * 1024**2
        write_cells(svc.home("ada") / "fine.ipynb", 1000)
        async with svc.client("ada") as c:
            many = await c.post("jobs", json={"path": "many.ipynb", "flavor": "held"})
            huge = await c.post("jobs", json={"path": "huge.ipynb", "flavor": "held"})
            fine = await c.post("jobs", json={"path": "fine.ipynb", "flavor": "held"})
    finally:
        await stop_all(svc)

    assert many.status_code == 400, many.text
    assert many.json()["message"] == (
        "'many.ipynb' has 1001 cells, more than the 1000 a notebook may have here; split it "
        "into smaller notebooks (or ask your admin to raise limits.cells)"
    )
    assert huge.status_code == 400, huge.text
    assert huge.json()["message"].startswith("'huge.ipynb' has 30000 cells, more than the 1000")
    assert fine.status_code == 201, fine.text
    # nothing of the refused ones was kept: one job folder, the accepted one's
    jobs = list((svc.home("ada") / ".nbjobs" / "jobs").iterdir())
    assert [p.name for p in jobs] == [fine.json()["id"]]


async def test_a_big_notebook_is_parsed_outside_the_service_within_its_memory(tmp_path):
    limits = {"check_memory": "256MiB"}
    svc = await start_service(tmp_path, {"flavors": FLAVORS, "limits": limits})
    try:
        # 40 MiB of small cells: parsing it takes far more than 256 MiB
        write_cells(svc.home("ada") / "big.ipynb", 200_000, width=60)
        # past SMALL in few cells: checked in a worker, quickly
        write_cells(svc.home("ada") / "r.ipynb", 2_500, width=2_000, kernel="ir")
        write_cells(svc.home("ada") / "ok.ipynb", 2_500, width=2_000)
        peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        # no client timeout: the worker runs at low priority, and at load 31 its parse
        # had not reached 256 MiB in 60 s; the service bounds it (its CPU limit)
        async with svc.client("ada", timeout=None) as c:
            big = await c.post("jobs", json={"path": "big.ipynb", "flavor": "held"})
            peak_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            other_kernel = await c.post("jobs", json={"path": "r.ipynb", "flavor": "held"})
            ok = await c.post("jobs", json={"path": "ok.ipynb", "flavor": "held"})
    finally:
        await stop_all(svc)

    assert big.status_code == 413, big.text
    assert big.json()["message"] == (
        "checking 'big.ipynb' needs more than the 256 MiB of memory a notebook may take here "
        "(it has very many cells or very large ones); clear its outputs (Edit > Clear Outputs "
        "of All Cells) or split it, or ask your admin to raise limits.check_memory"
    )
    # the service held the notebook's bytes, never its parse (which took over 256 MiB)
    assert (peak_after - peak_before) * 1024 < 150 * 1024**2
    # what the worker found is what the service checks: the notebook's own kernel
    assert other_kernel.status_code == 400, other_kernel.text
    refusal = other_kernel.json()["message"]
    assert "runs on kernel 'ir', which flavor 'held' does not have" in refusal
    assert ok.status_code == 201, ok.text
    assert ok.json()["state"] == "pending_approval"


async def test_big_notebooks_are_checked_a_few_at_once_in_all(tmp_path, monkeypatch):
    gate = FeedGate(monkeypatch)
    limits = {"checks_at_once": 1, "check_wait": "4m"}  # below the test's own 5 minutes
    svc = await start_service(tmp_path, {"flavors": FLAVORS, "limits": limits})
    try:
        for user in ("ada", "bob", "cy"):  # past SMALL in few cells: quick checks
            write_cells(svc.home(user) / "big.ipynb", 2_500, width=2_000)
        answers = await one_at_a_time(
            svc, gate, [("ada", "big.ipynb"), ("bob", "big.ipynb"), ("cy", "big.ipynb")]
        )
    finally:
        await stop_all(svc)

    assert [a.status_code for a in answers] == [201, 201, 201], [a.text for a in answers]


async def test_one_users_notebooks_are_checked_one_at_a_time(tmp_path, monkeypatch):
    gate = FeedGate(monkeypatch)
    limits = {"checks_at_once": 4, "check_wait": "4m"}  # below the test's own 5 minutes
    svc = await start_service(tmp_path, {"flavors": FLAVORS, "limits": limits})
    try:
        for name in ("a", "b", "c"):  # past SMALL in few cells: quick checks
            write_cells(svc.home("ada") / f"{name}.ipynb", 2_500, width=2_000)
        answers = await one_at_a_time(
            svc, gate, [("ada", "a.ipynb"), ("ada", "b.ipynb"), ("ada", "c.ipynb")]
        )
    finally:
        await stop_all(svc)

    assert [a.status_code for a in answers] == [201, 201, 201], [a.text for a in answers]
    assert svc.service.notebooks._users == {}  # no lock left behind per user


@pytest.mark.parametrize("memory", ["100MiB", "12"])
def test_too_little_check_memory_is_refused_in_nbjobs_yaml(memory):
    from nbjobs.config import ConfigError, parse_config

    with pytest.raises(ConfigError, match="too little to check a notebook"):
        parse_config(f"limits:\n  check_memory: {memory}\n")


async def test_a_submit_that_waits_past_check_wait_is_told_to_come_back(tmp_path, monkeypatch):
    """At load 6.5 on two cores a submit once took 61 s and ended in a 500: now a
    submit whose check cannot begin within ``limits.check_wait`` is a 503 with
    Retry-After and a sentence, at once, and the same submit later goes through."""
    gate = FeedGate(monkeypatch)
    limits = {"checks_at_once": 1, "check_wait": "1s"}
    svc = await start_service(tmp_path, {"flavors": FLAVORS, "limits": limits})
    try:
        for user in ("ada", "bob"):
            write_cells(svc.home(user) / "big.ipynb", 2_500, width=2_000)
        # the only place for a big check is held by ada's until bob's is refused
        ada = submit(svc, "ada", "big.ipynb")
        _, go = await gate.next()
        busy = await submit(svc, "bob", "big.ipynb")
        go.set()
        first = await ada
        again = submit(svc, "bob", "big.ipynb")  # the place is free: it goes through
        (await gate.next())[1].set()
        again = await again
        # one user's second notebook waits behind their first, within the same bound
        earlier = submit(svc, "ada", "big.ipynb")
        _, go = await gate.next()
        refused = await submit(svc, "ada", "big.ipynb")
        go.set()
        earlier = await earlier
    finally:
        await stop_all(svc)

    assert first.status_code == 201, first.text
    assert busy.status_code == 503, busy.text
    assert busy.headers["Retry-After"] == "5"
    assert busy.json()["message"] == (
        "the job service is checking 1 other big notebook(s), and this one waited 1 s for "
        "its turn; submit it again in a minute"
    )
    assert again.status_code == 201, again.text
    assert earlier.status_code == 201, earlier.text
    assert refused.status_code == 503, refused.text
    assert refused.json()["message"].startswith(
        "your earlier big notebooks are still being checked"
    )


async def test_a_database_too_busy_to_answer_is_a_503_not_a_500(tmp_path, monkeypatch):
    from sqlalchemy.exc import OperationalError

    svc = await start_service(tmp_path, {"flavors": FLAVORS})

    def locked(*args: Any, **kwargs: Any) -> Any:
        raise OperationalError("SELECT", {}, Exception("database is locked"))

    try:
        monkeypatch.setattr(svc.service, "list_jobs", locked)
        async with svc.client("ada") as c:
            answer = await c.get("jobs")
    finally:
        await stop_all(svc)

    assert answer.status_code == 503, answer.text
    assert answer.headers["Retry-After"] == "10"
    assert answer.json()["message"] == (
        "the job service's database is busy or out of reach right now; try again in 10 s"
    )


async def test_a_submit_in_flight_when_the_service_stops_is_told_to_submit_again(
    tmp_path, monkeypatch
):
    """A 61 s submit once ended in a 500 as the service stopped under it (a test's
    teardown; a restart or an upgrade does the same): the request still in flight is a
    503 that says to send it again, nothing of it is kept, and the same submit goes
    through once a service runs again."""
    gate = FeedGate(monkeypatch)
    svc = await start_service(tmp_path, {"flavors": FLAVORS})
    try:
        write_cells(svc.home("ada") / "big.ipynb", 2_500, width=2_000)
        in_flight = submit(svc, "ada", "big.ipynb")
        _, go = await gate.next()  # at its check, in a worker
        svc.server.stop()  # as app.run stops: no new connections, then the service
        await svc.service.stop()
        go.set()
        answer = await in_flight
    finally:
        await svc.server.close_all_connections()
        if not svc.service.stopping:  # the test ended before it stopped the service
            await svc.service.stop()

    assert answer.status_code == 503, answer.text
    assert answer.headers["Retry-After"] == "30"
    assert answer.json()["message"] == (
        "the job service is stopping (a restart or an upgrade) and did not finish this "
        "request; send it again in a minute"
    )
    again = await start_service(tmp_path, {"flavors": FLAVORS})
    try:
        async with again.client("ada") as c:
            kept = (await c.get("jobs")).json()["jobs"]
        resent = submit(again, "ada", "big.ipynb")
        (await gate.next())[1].set()
        resent = await resent
    finally:
        await stop_all(again)
    assert kept == []  # nothing of the submit cut short was recorded
    assert resent.status_code == 201, resent.text
    jobs = list((svc.home("ada") / ".nbjobs" / "jobs").iterdir())
    assert [p.name for p in jobs] == [resent.json()["id"]]


def test_a_service_process_stopped_during_a_check_answers_503_and_ends_the_check(tmp_path):
    """``nbjobs service`` stopped (SIGTERM) while a submit's notebook is in its check:
    the process's end cancels the request, and tornado answers a cancelled request with a
    bare 500 ("Internal Server Error"); the caller is told the service is stopping and to
    send it again, and the check's worker ends with the service."""
    import psutil
    import requests

    from .test_dispatcher_lease import ServiceProcess, _config

    config = _config(tmp_path, flavors=FLAVORS)
    write_cells(tmp_path / "home" / "ada" / "big.ipynb", 2_500, width=2_000)
    service = ServiceProcess(tmp_path, config, "service")
    worker = None
    try:
        service.wait_up()
        missing = requests.post(
            service.url + "api/jobs",
            json={"path": "gone.ipynb", "flavor": "held"},
            headers={"Authorization": "token t-ada"},
            timeout=120,
        )
        assert missing.status_code == 400, missing.text
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            answer = pool.submit(
                requests.post,
                service.url + "api/jobs",
                json={"path": "big.ipynb", "flavor": "held"},
                headers={"Authorization": "token t-ada"},
                timeout=120,
            )
            deadline = time.monotonic() + 120
            while worker is None:  # the check's worker, held where it is
                assert time.monotonic() < deadline, service.log()
                assert not answer.done(), answer.result().text
                for child in psutil.Process(service.proc.pid).children():
                    with contextlib.suppress(psutil.Error):
                        if WORKER.decode() in child.cmdline():
                            child.suspend()
                            worker = child
                time.sleep(0.05)
            service.stop()
            answer = answer.result()
        assert answer.status_code == 503, answer.text
        assert answer.json()["message"] == (
            "the job service is stopping (a restart or an upgrade) and did not finish this "
            "request; send it again in a minute"
        )
        assert answer.headers["Retry-After"] == "30"
        worker.wait(30)  # gone with the service: no check left behind
        log = service.log_path.read_text()
        assert "500 POST" not in log
        # the worker's pipe, broken by its kill, is no error in the admin's log
        assert "never retrieved" not in log, log
        # every line in the service's format, a refusal's details too (printed bare once)
        assert all(line.startswith("[") for line in log.splitlines()), log
        assert "tornado.general] 400 POST /api/jobs (127.0.0.1): 'gone.ipynb' does not" in log
    finally:
        service.stop(signal.SIGKILL)
        if worker is not None:
            with contextlib.suppress(psutil.Error):
                worker.kill()

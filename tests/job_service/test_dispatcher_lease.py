"""Two `nbjobs service` processes on one database: one dispatches, the other stands by.

A rolling restart or a second replica started by mistake used to make both start
the same queued jobs (4 of 40 ran twice, 20 shared a sequence number). Here every
job (a script: the subject is the dispatch, not a notebook's run) leaves a mark in a
shared folder each time it runs, and the test counts the marks.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import requests
import yaml

from nbjobs.storage import escape_username
from tests.waiting import wait_until_answering

from .conftest import free_port, new_database

TOKENS = {"t-ada": "ada"}
JOBS = 20


def _config(root: Path, **extra: object) -> Path:
    config = root / "nbjobs.yaml"
    new_database(root / "jobs.sqlite")  # at the newest schema: the first start upgrades none
    data = {
        "storage": {"root": str(root / "home")},
        "database": {"url": f"sqlite:///{root / 'jobs.sqlite'}"},
        "backend": {"local": {"gpus": [], "cpu_slots": 4}},
        "flavors": [{"name": "cpu", "gpus": 0}],
        "quotas": {"default": {"max_queued_jobs": 1000}},
        **extra,
    }
    config.write_text(yaml.safe_dump(data))
    return config


class ServiceProcess:
    """One `nbjobs service` process; tokens come from the environment, not argv."""

    def __init__(self, root: Path, config: Path, name: str, *args: str, lease: float = 3) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.log_path = root / f"{name}.log"
        self._log = self.log_path.open("w")
        env = {**os.environ, "NBJOBS_SERVICE_TOKENS": json.dumps(TOKENS)}
        command = [sys.executable, "-m", "nbjobs.cli", "service", f"--config={config}"]
        command += [f"--port={self.port}", f"--JobServiceApp.lease_seconds={lease}", *args]
        command += ["--LocalBackend.poll_interval=0.1"]
        self.proc = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT, env=env)

    def up(self) -> bool:
        try:
            requests.get(self.url + "api/health", timeout=1)
            return True
        except (requests.ConnectionError, requests.Timeout):  # not up, or not answering yet
            return False

    def wait_up(self, timeout: float = 60) -> None:
        url = self.url + "api/health"
        wait_until_answering(url, process=self.proc, log=self.log_path, timeout=timeout)

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text()

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=60)
        self._log.close()


def _api(url: str, method: str, path: str, **kwargs: object) -> requests.Response:
    return requests.request(
        method, url + "api/" + path, headers={"Authorization": "token t-ada"}, timeout=30, **kwargs
    )


def _wait_all_ended(url: str, timeout: float) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        jobs = _api(url, "GET", "jobs?limit=500").json()["jobs"]
        if all(j["state"] in ("succeeded", "failed", "cancelled", "timed_out") for j in jobs):
            return jobs
        assert time.monotonic() < deadline, [j["state"] for j in jobs]
        time.sleep(0.5)


@pytest.fixture
def home(tmp_path):
    home = tmp_path / "home" / escape_username("ada")
    home.mkdir(parents=True)
    marks = tmp_path / "marks"
    marks.mkdir()
    # every run of every job leaves one new file named after its job
    (home / "mark.py").write_text(
        "import os, uuid, time\n"
        f"open(os.path.join({str(marks)!r}, os.environ['NBJOBS_JOB_ID'] + '.' + "
        "uuid.uuid4().hex), 'w').close()\n"
        "time.sleep(0.3)\n"
    )
    return home


def test_two_services_one_database_every_job_runs_once(tmp_path, home):
    config = _config(tmp_path)
    first = ServiceProcess(tmp_path, config, "first")
    second = None
    try:
        first.wait_up()
        second = ServiceProcess(tmp_path, config, "second")
        # the second waits as a standby: it says so, and does not listen
        deadline = time.monotonic() + 30
        while "waiting as a standby" not in second.log():
            assert time.monotonic() < deadline, second.log()
            assert second.proc.poll() is None, second.log()
            time.sleep(0.1)
        assert not second.up()
        assert "pid=" in second.log()  # names the service that holds the database

        ids = []
        for _ in range(JOBS):
            r = _api(first.url, "POST", "jobs", json={"path": "mark.py", "flavor": "cpu"})
            assert r.status_code == 201, r.text
            ids.append(r.json()["id"])
        # some jobs run, most wait; then the first service dies without a word
        deadline = time.monotonic() + 60
        while len(list((tmp_path / "marks").iterdir())) < 3:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        first.stop(signal.SIGKILL)

        # the standby takes over after the lease runs out, adopts and finishes the rest
        second.wait_up(timeout=60)
        jobs = _wait_all_ended(second.url, timeout=240)
    finally:
        first.stop()
        if second is not None:
            second.stop()

    assert sorted(j["id"] for j in jobs) == sorted(ids)
    assert [j["state"] for j in jobs] == ["succeeded"] * JOBS, [j["message"] for j in jobs]
    runs = Counter(p.name.split(".")[0] for p in (tmp_path / "marks").iterdir())
    twice = {job: n for job, n in runs.items() if n != 1}
    assert not twice, f"jobs that ran more than once: {twice}"
    assert set(runs) == set(ids)


def test_two_services_submitting_at_once_never_share_a_job(tmp_path, home):
    """While the active service stops, the standby takes over without waiting for the
    lease to run out (it was given back), and sequence numbers stay unique."""
    config = _config(tmp_path)
    # a lease far longer than a takeover takes on a loaded machine: the standby that
    # answers long before it could have run out was given it back
    first = ServiceProcess(tmp_path, config, "first", lease=30)
    second = None
    try:
        first.wait_up()
        second = ServiceProcess(tmp_path, config, "second", lease=30)
        for _ in range(5):
            r = _api(first.url, "POST", "jobs", json={"path": "mark.py", "flavor": "cpu"})
            assert r.status_code == 201, r.text
        stopped = time.monotonic()
        first.stop(signal.SIGTERM)
        second.wait_up(timeout=90)
        took_over = time.monotonic() - stopped
        for _ in range(5):
            r = _api(second.url, "POST", "jobs", json={"path": "mark.py", "flavor": "cpu"})
            assert r.status_code == 201, r.text
        jobs = _wait_all_ended(second.url, timeout=120)
    finally:
        first.stop()
        if second is not None:
            second.stop()
    # given back at a clean stop: no wait for the 30 s lease to run out
    assert took_over < 20, took_over
    assert [j["state"] for j in jobs] == ["succeeded"] * 10
    runs = Counter(p.name.split(".")[0] for p in (tmp_path / "marks").iterdir())
    assert sorted(runs.values()) == [1] * 10


def test_second_service_told_not_to_wait_refuses_with_a_sentence(tmp_path, home):
    config = _config(tmp_path)
    first = ServiceProcess(tmp_path, config, "first")
    try:
        first.wait_up()
        second = ServiceProcess(tmp_path, config, "second", "--JobServiceApp.standby=False")
        code = second.proc.wait(timeout=60)
        text = second.log()
        second.stop()
    finally:
        first.stop()
    assert code == 3, text
    assert "another job service" in text, text
    assert "is using this database" in text, text
    assert "Traceback" not in text, text

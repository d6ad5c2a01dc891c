"""``GET api/jobs/{id}/logs``: a range of the log (``offset``, ``tail``), followed while the
job runs (``follow``), streamed in chunks so that no log, however big, and no reader,
however slow, makes the service hold more than a chunk of it.

The memory test runs the service as its own process (``nbjobs service``), reads a
1 GiB log through HTTP and watches the process's resident memory with psutil.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
import requests
import yaml

from nbjobs.storage import escape_username, job_folder
from tests.waiting import wait_until_answering

from .conftest import free_port, notebook, start_service, stop_all

WAIT_FOR_GO = "import os, time\nwhile not os.path.exists('go'):\n    time.sleep(0.05)"
GIB = 1024**3


async def finished_job_with_log(svc) -> tuple[dict, bytes]:
    """A finished job of ada's, and its whole log."""
    svc.write("ada", "lines.ipynb", "for i in range(200):\n    print(f'line {i:03d}')")
    job = await svc.submit("ada", "lines.ipynb")
    done = await svc.wait("ada", job["id"])
    assert done["state"] == "succeeded", done
    log = (job_folder(svc.home("ada"), job["id"]) / "log.txt").read_bytes()
    assert b"line 199" in log
    return done, log


async def get_log(svc, job_id: str, **params: str) -> httpx.Response:
    async with svc.client("ada") as c:
        return await c.get(f"jobs/{job_id}/logs", params=params)


async def test_offset_and_tail_give_a_range_of_the_log_in_bytes(svc):
    job, log = await finished_job_with_log(svc)
    size = len(log)

    whole = await get_log(svc, job["id"])
    from_100 = await get_log(svc, job["id"], offset="100")
    last_50 = await get_log(svc, job["id"], tail="50")
    more_than_all = await get_log(svc, job["id"], tail=str(size + 1000))
    nothing = await get_log(svc, job["id"], tail="0")
    past_the_end = await get_log(svc, job["id"], offset=str(2**53 - 1))

    assert whole.status_code == 200
    assert whole.headers["content-type"] == "text/plain; charset=utf-8"
    assert whole.content == log
    assert from_100.content == log[100:]
    assert last_50.content == log[-50:]
    assert more_than_all.content == log
    assert nothing.content == b""
    assert past_the_end.status_code == 200
    assert past_the_end.content == b""


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"tail": "10", "offset": "5"}, "give offset (bytes to skip) or tail (the last bytes)"),
        ({"tail": "-1"}, "tail must be a whole number from 0 up to"),
        ({"tail": "lots"}, "tail must be a whole number, not 'lots'"),
        ({"offset": "-1"}, "offset must be a whole number from 0 up to"),
    ],
)
async def test_a_bad_range_is_a_400_that_says_so(svc, params, message):
    svc.write("ada", "a.ipynb", "1")
    job = await svc.submit("ada", "a.ipynb")

    r = await get_log(svc, job["id"], **params)

    assert r.status_code == 400
    assert r.json()["message"].startswith(message)


async def test_someone_elses_log_is_a_404(svc):
    job, _ = await finished_job_with_log(svc)
    async with svc.client("bob") as c:
        r = await c.get(f"jobs/{job['id']}/logs", params={"tail": "10"})
    assert r.status_code == 404


async def test_follow_streams_the_log_while_the_job_runs_and_ends_with_it(tmp_path):
    one_slot = {"backend": {"kind": "local", "local": {"gpus": [], "cpu_slots": 1}}}
    svc = await start_service(tmp_path, one_slot)
    try:
        home = svc.home("ada")
        svc.write("ada", "wait.ipynb", WAIT_FOR_GO)
        wait_for_more = WAIT_FOR_GO.replace("'go'", "'more'")
        svc.write("ada", "two.ipynb", "print('first part')", wait_for_more, "print('second part')")
        holder = await svc.submit("ada", "wait.ipynb")
        job = await svc.submit("ada", "two.ipynb")  # queued: it has no log yet
        received = b""
        async with (
            svc.client("ada") as c,
            c.stream("GET", f"jobs/{job['id']}/logs", params={"follow": "1"}) as r,
        ):
            assert r.status_code == 200
            chunks = r.aiter_bytes()
            (home / "go").touch()  # the holder ends, the job starts and prints its first part
            while b"first part" not in received:
                received += await asyncio.wait_for(anext(chunks), 30)
            running = await svc.job("ada", job["id"])
            await svc.wait("ada", holder["id"])
            (home / "more").touch()  # now the job's second cell ends too
            async for chunk in chunks:  # ends when the job has ended
                received += chunk
        done = await svc.job("ada", job["id"])
    finally:
        await stop_all(svc)

    assert running["state"] in ("starting", "running")  # the first part came while it ran
    assert done["state"] == "succeeded", done
    log = (job_folder(home, job["id"]) / "log.txt").read_bytes()
    assert received == log
    assert b"second part" in received
    assert b"done: succeeded" in received


async def test_follow_with_tail_starts_at_the_logs_last_bytes(svc):
    job, log = await finished_job_with_log(svc)

    r = await get_log(svc, job["id"], tail="30", follow="1")

    assert r.content == log[-30:]


# -- memory ---------------------------------------------------------------------------------


class ServiceProcess:
    """``nbjobs service`` as its own process, tokens from the environment."""

    def __init__(self, root: Path) -> None:
        config = root / "nbjobs.yaml"
        data = {
            "storage": {"root": str(root / "home")},
            "database": {"url": f"sqlite:///{root / 'jobs.sqlite'}"},
            "backend": {"local": {"gpus": [], "cpu_slots": 1}},
            "flavors": [{"name": "cpu", "gpus": 0}],
        }
        config.write_text(yaml.safe_dump(data))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/api/"
        self.log_path = root / "service.log"
        env = {**os.environ, "NBJOBS_SERVICE_TOKENS": json.dumps({"t-ada": "ada"})}
        command = [sys.executable, "-m", "nbjobs.cli", "service", f"--config={config}"]
        command += [f"--port={self.port}", "--LocalBackend.poll_interval=0.1"]
        with self.log_path.open("w") as log:
            self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        wait_until_answering(self.url + "health", process=self.proc, log=self.log_path)

    def api(self, method: str, path: str, **kwargs: object) -> requests.Response:
        headers = {"Authorization": "token t-ada"}
        return requests.request(method, self.url + path, headers=headers, timeout=60, **kwargs)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


@pytest.fixture
def service_process(tmp_path: Path) -> Iterator[ServiceProcess]:
    service = ServiceProcess(tmp_path)
    try:
        yield service
    finally:
        service.stop()


class PeakMemory:
    """The most resident memory a process had, sampled every 10 ms in a thread."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.peak = self.process.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample)

    def _sample(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, self.process.memory_info().rss)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def read_log(service: ServiceProcess, job_id: str, pause: float = 0.0) -> int:
    """Read a log through HTTP a MiB at a time (stopping for ``pause`` seconds after the
    first MiB, as a slow reader does); return how many bytes came."""
    received = 0
    with service.api("GET", f"jobs/{job_id}/logs", stream=True) as r:
        assert r.status_code == 200
        for chunk in r.iter_content(1024 * 1024):
            if pause and received == 0:
                time.sleep(pause)
            received += len(chunk)
    return received


def test_reading_a_1_gib_log_keeps_the_service_under_200_mb(tmp_path, service_process):
    home = tmp_path / "home" / escape_username("ada")
    home.mkdir(parents=True)
    (home / "a.ipynb").write_text(json.dumps(notebook("print('hello')")))
    job = service_process.api("POST", "jobs", json={"path": "a.ipynb", "flavor": "cpu"}).json()
    deadline = time.monotonic() + 90
    while service_process.api("GET", f"jobs/{job['id']}").json()["state"] != "succeeded":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    log = job_folder(home, job["id"]) / "log.txt"
    os.truncate(log, GIB)  # a sparse 1 GiB log: the service reads every byte of it
    before = psutil.Process(service_process.proc.pid).memory_info().rss

    with PeakMemory(service_process.proc.pid) as memory:
        started = time.monotonic()
        results: list[int] = []
        readers = [
            threading.Thread(
                target=lambda p=pause: results.append(read_log(service_process, job["id"], p))
            )
            for pause in (0.0, 0.0, 3.0)  # two at full speed, one that stops for 3 s
        ]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join()
        seconds = time.monotonic() - started

    assert results == [GIB] * 3
    print(
        f"3 readers of a 1 GiB log in {seconds:.1f} s: service RSS {before / 2**20:.0f} MiB "
        f"before, {memory.peak / 2**20:.0f} MiB at most"
    )
    assert memory.peak < 200 * 1000**2

"""Logs through the server extension are passed on as they come, never held whole.

A real jupyter-server without a hub (it hosts the job service in its own process),
a real job, and then its log made 300 MiB (sparse): more than tornado's HTTP client
takes into memory (100 MB), and than a server should hold for one reader.
"""

from __future__ import annotations

import os
import threading
import time

import psutil
import pytest

from nbjobs.storage import job_folder

from .conftest import free_port
from .test_jobs import notebook, wait_done, wait_ready
from .test_jobs import proxy_page as proxy_page  # a fixture

MIB = 1024**2


def server_process(server) -> psutil.Process:
    """The jupyter-server process serving ``server`` (found by its port)."""
    port = server.url.split(":")[2].split("/")[0]
    for process in psutil.process_iter(["cmdline"]):
        if f"--port={port}" in (process.info["cmdline"] or []):
            return process
    raise AssertionError(f"no process serves port {port}")


def test_a_big_log_streams_through_the_server_with_its_memory_flat(server):
    notebook(server.root / "hello.ipynb", "print('hello')")
    wait_ready(server)
    submitted = server.request(
        "POST", "nbjobs/api/jobs", json={"path": "hello.ipynb", "flavor": "cpu"}
    )
    job = wait_done(server, submitted.json()["id"])
    log = job_folder(server.root, job["id"]) / "log.txt"
    os.truncate(log, 300 * MIB)
    process = server_process(server)
    before = process.memory_info().rss
    peak = before
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.wait(0.01):
            peak = max(peak, process.memory_info().rss)

    sampler = threading.Thread(target=sample)
    sampler.start()
    received = 0
    try:
        with server.get(f"nbjobs/api/jobs/{job['id']}/logs", stream=True) as r:
            assert r.status_code == 200
            assert r.headers["Content-Type"] == "text/plain; charset=utf-8"
            for chunk in r.iter_content(MIB):
                if received == 0:
                    time.sleep(2)  # a slow reader: the server must not read ahead for it
                received += len(chunk)
    finally:
        stop.set()
        sampler.join()

    assert received == 300 * MIB
    print(f"300 MiB log: server RSS {before / MIB:.0f} MiB before, {peak / MIB:.0f} MiB at most")
    assert peak - before < 64 * MIB


def test_a_log_error_is_still_the_services_sentence(server):
    wait_ready(server)

    missing = server.get("nbjobs/api/jobs/0123456789ab/logs")
    bad = server.get("nbjobs/api/jobs/0123456789ab/logs", params={"tail": "x"})

    assert missing.status_code == 404
    assert "nbjobs list" in missing.json()["message"]
    assert bad.status_code == 400
    assert bad.json()["message"] == "tail must be a whole number, not 'x'"


@pytest.mark.parametrize("follow", ["0", "1"])
def test_a_log_from_a_service_that_is_down_is_the_same_502_sentence(
    start_server, proxy_page, follow
):
    gone = f"http://127.0.0.1:{free_port()}/services/nbjobs/"  # nothing listens there
    for url in (gone, proxy_page):
        server = start_server({"JUPYTERHUB_API_TOKEN": "hub-token", "NBJOBS_URL": url})

        r = server.get("nbjobs/api/jobs/0123456789ab/logs", params={"follow": follow})

        assert r.status_code == 502
        assert r.json() == {
            "message": f"the nbjobs job service at {url} is not answering; "
            "ask your admin to check that it is running"
        }

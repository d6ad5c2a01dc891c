"""Waiting for a server the tests started to answer, within limits that stretch with
the machine's load."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import requests

#: how far a limit stretches on a loaded machine, at most (pytest's own is 300 s a test)
MOST_STRETCH = 3.0


def stretched(seconds: float) -> float:
    """``seconds``, stretched by how many times more runnable work than cores the machine
    has now (the one-minute load average), up to :data:`MOST_STRETCH` times: a start that
    takes 20 s alone took 80 at load 30 on two cores, and nothing was wrong with it."""
    busy = os.getloadavg()[0] / (os.cpu_count() or 1)
    return seconds * min(max(busy, 1.0), MOST_STRETCH)


def wait_until_answering(
    url: str,
    *,
    ready: Callable[[requests.Response], bool] = lambda _: True,
    process: subprocess.Popen[bytes] | None = None,
    log: Path | None = None,
    timeout: float = 60,
    interval: float = 0.1,
) -> requests.Response:
    """GET ``url`` until its answer is ``ready``; the answer.

    A server not listening yet, or listening and slow to answer while it starts (a read
    timeout on a loaded machine), is waited for. Its ``process`` ending, or ``timeout``
    seconds passing (:func:`stretched` by the load), fails with the end of its ``log``."""
    start = time.monotonic()
    while True:
        try:
            answer = requests.get(url, timeout=2)
            if ready(answer):
                return answer
        except (requests.ConnectionError, requests.Timeout):  # not up, or not answering yet
            pass
        ended = process is not None and process.poll() is not None
        waited = time.monotonic() - start
        if ended or waited > stretched(timeout):
            said = log.read_text(errors="replace")[-5000:] if log is not None else ""
            why = "ended" if ended else f"did not answer within {waited:.0f} s"
            raise AssertionError(f"the server at {url} {why}\n{said}")
        time.sleep(interval)

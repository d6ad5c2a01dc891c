"""Waiting for a server the tests started to answer."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import requests


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
    seconds passing, fails with the end of its ``log``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            answer = requests.get(url, timeout=2)
            if ready(answer):
                return answer
        except (requests.ConnectionError, requests.Timeout):  # not up, or not answering yet
            pass
        ended = process is not None and process.poll() is not None
        if ended or time.monotonic() > deadline:
            said = log.read_text(errors="replace")[-5000:] if log is not None else ""
            why = "ended" if ended else f"did not answer within {timeout:g} s"
            raise AssertionError(f"the server at {url} {why}\n{said}")
        time.sleep(interval)

"""The stream of events (``nbjobs/api/events``) passes through the server extension as
it comes: the Jobs panel learns of a job submitted elsewhere within 2 s.

A real jupyter-server without a hub, hosting its job service; the job is submitted
through the API while the stream is open, as the command line would.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time

import requests

from ..sse import EventLines
from .test_jobs import notebook, wait_done, wait_ready


def read_events(response, into: queue.Queue) -> None:
    """Each event of a server-sent event stream, with when it arrived."""
    lines = EventLines()
    # the test closes the response when done: reading it then fails, and that is the end
    with contextlib.suppress(requests.RequestException, AttributeError, ValueError):
        for line in response.iter_lines(decode_unicode=True):
            if (said := lines.feed(line)) is not None:
                into.put((*said, time.monotonic()))


def past_the_baseline(server, received: queue.Queue) -> None:
    """The feed's first look is its baseline: what it sees there is no news. Save a
    definition, again while none is announced, until one is: the baseline is behind."""
    notebook(server.root / "later.ipynb", "print('later')")
    for _ in range(30):
        saved = server.request(
            "POST", "nbjobs/api/definitions", json={"path": "later.ipynb", "flavor": "cpu"}
        )
        assert saved.status_code == 201, saved.text
        with contextlib.suppress(queue.Empty):
            event, _, _ = received.get(timeout=1)
            assert event == "definitions"
            return
    raise AssertionError("no definition saved was announced in 30 tries")


def next_job_event(received: queue.Queue) -> tuple[dict, float]:
    """The next job event and when it came (a definition announced late is passed over)."""
    while True:
        event, data, at = received.get(timeout=10)
        if event == "job":
            return data, at


def test_events_pass_through_the_server_as_they_come(server):
    notebook(server.root / "hello.ipynb", "print('hello')")
    wait_ready(server)
    received: queue.Queue = queue.Queue()
    with server.get("nbjobs/api/events", stream=True) as r:
        assert r.status_code == 200
        assert r.headers["Content-Type"].startswith("text/event-stream")
        reader = threading.Thread(target=read_events, args=(r, received), daemon=True)
        reader.start()
        event, data, _ = received.get(timeout=10)
        assert event == "hello"
        past_the_baseline(server, received)

        sent = time.monotonic()
        submitted = server.request(
            "POST", "nbjobs/api/jobs", json={"path": "hello.ipynb", "flavor": "cpu"}
        ).json()
        data, at = next_job_event(received)
        assert data["id"] == submitted["id"]
        assert at - sent < 2.0
        wait_done(server, submitted["id"])
        states = [data["state"]]
        while states[-1] != "succeeded":
            data, _ = next_job_event(received)
            states.append(data["state"])
        assert states[-1] == "succeeded"

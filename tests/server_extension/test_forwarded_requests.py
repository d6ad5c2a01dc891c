"""What the server extension passes on to the job service, and what it keeps to itself.

The job service gets this server's hub token and the request as the Lab sent it
(bodies included, a DELETE's too); the browser's ``?token=`` for this server is
never passed on and never written to the server's log.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl

import pytest
import requests

from .conftest import free_port

HUB_TOKEN = "hub-token-of-adas-server"


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A stand-in job service that records each request and answers like the real one."""
    seen: list[dict[str, Any]] = []

    class Record(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            seen.append(
                {
                    "method": self.command,
                    "path": self.path,
                    "authorization": self.headers.get("Authorization"),
                    "body": self.rfile.read(length),
                }
            )
            body = json.dumps({"name": "ml101", "students": []}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_DELETE = do_PATCH = do_PUT = _answer

        def log_message(self, *args: Any) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Record)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/services/nbjobs/", seen
    httpd.shutdown()
    httpd.server_close()


def test_the_browsers_token_stays_here_and_bodies_go_on(start_server, recorder):
    url, seen = recorder
    server = start_server({"JUPYTERHUB_API_TOKEN": HUB_TOKEN, "NBJOBS_URL": url})
    roster = {"students": ["bob"]}

    # authenticated with the token in the address, as a link from the Lab can be
    listed = requests.get(
        f"{server.url}nbjobs/api/jobs",
        params={"state": "queued", "token": server.token},
        timeout=30,
    )
    removed = server.request("DELETE", "nbjobs/api/classes/ml101/students", json=roster)
    settings = {"email": "ada@uni.example", "on": ["failed"]}
    told = server.request("PUT", "nbjobs/api/notifications/settings", json=settings)

    assert listed.status_code == 200, listed.text
    assert removed.status_code == 200, removed.text
    assert told.status_code == 200, told.text
    assert [(r["method"], r["path"]) for r in seen] == [
        ("GET", "/services/nbjobs/api/jobs?state=queued"),
        ("DELETE", "/services/nbjobs/api/classes/ml101/students"),
        ("PUT", "/services/nbjobs/api/notifications/settings"),
    ]
    assert all(r["authorization"] == f"token {HUB_TOKEN}" for r in seen)
    assert json.loads(seen[1]["body"]) == roster
    assert json.loads(seen[2]["body"]) == settings
    assert server.token not in repr(seen)


def test_the_jobs_panels_search_and_page_cursor_reach_the_job_service_as_sent(
    start_server, recorder
):
    url, seen = recorder
    server = start_server({"JUPYTERHUB_API_TOKEN": HUB_TOKEN, "NBJOBS_URL": url})
    # what the Lab sends for a search, a state, whose jobs and the page after a job
    query = {"q": "clean data 50%&x", "state": "failed,timed_out", "scope": "classes"}
    query |= {"before": "0123abcd", "limit": "100"}

    listed = server.get("nbjobs/api/jobs", params=query)

    assert listed.status_code == 200, listed.text
    path, _, sent = seen[0]["path"].partition("?")
    assert path == "/services/nbjobs/api/jobs"
    assert dict(parse_qsl(sent, keep_blank_values=True)) == query


def test_the_servers_token_is_not_written_to_its_log(start_server):
    url = f"http://127.0.0.1:{free_port()}/services/nbjobs/"  # nothing listens there
    server = start_server({"JUPYTERHUB_API_TOKEN": HUB_TOKEN, "NBJOBS_URL": url})

    r = requests.get(
        f"{server.url}nbjobs/api/flavors", params={"token": server.token, "x": "1"}, timeout=30
    )

    assert r.status_code == 502
    log = server.log.read_text()
    assert "nbjobs/api/flavors" in log  # the failed request was logged ...
    assert server.token not in log  # ... without the token

"""Jobs through the server extension: in-process without a hub, forwarded with one."""

from __future__ import annotations

import http.server
import subprocess
import sys
import threading
import time

import nbformat
import pytest
import yaml

from nbjobs.storage import escape_username
from tests.machine import end_runners_in
from tests.waiting import wait_until_answering

from .conftest import free_port


def notebook(path, *cells):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nbformat.write(nb, path)


def wait_done(server, job_id, timeout=90):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = server.get(f"nbjobs/api/jobs/{job_id}").json()
        if job["state"] in ("succeeded", "failed", "cancelled", "timed_out"):
            return job
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} did not end")


def wait_ready(server):
    deadline = time.monotonic() + 30
    while server.get("nbjobs/api/flavors").status_code == 503:
        assert time.monotonic() < deadline, server.log.read_text()
        time.sleep(0.1)


def test_without_a_hub_the_server_runs_jobs_itself(server):
    notebook(server.root / "hello.ipynb", "print('single user')")
    wait_ready(server)

    flavors = server.get("nbjobs/api/flavors").json()
    submitted = server.request(
        "POST", "nbjobs/api/jobs", json={"path": "hello.ipynb", "flavor": "cpu"}
    )

    assert flavors[0]["name"] == "cpu"
    assert submitted.status_code == 201, submitted.text
    job = wait_done(server, submitted.json()["id"])
    assert job["state"] == "succeeded"
    out = nbformat.read(server.root / job["output_path"], as_version=4)
    assert out.cells[0].outputs[0]["text"] == "single user\n"
    logs = server.get(f"nbjobs/api/jobs/{job['id']}/logs", params={"follow": "1"})
    assert "single user" in logs.text


def test_errors_keep_the_services_message(server):
    wait_ready(server)

    r = server.request("POST", "nbjobs/api/jobs", json={"path": "../x.ipynb", "flavor": "cpu"})

    assert r.status_code == 400
    assert "leaves your folder" in r.json()["message"]


def test_in_a_hub_without_the_service_address_the_lab_is_told(start_server):
    server = start_server({"JUPYTERHUB_API_TOKEN": "hub-token"})

    r = server.get("nbjobs/api/jobs")

    assert r.status_code == 503
    assert "NBJOBS_URL" in r.json()["message"]


@pytest.fixture
def job_service(tmp_path):
    """A real `nbjobs service` that knows one token: the user's server's hub token."""
    root = tmp_path / "service"
    root.mkdir()
    (root / "nbjobs.yaml").write_text(
        yaml.safe_dump(
            {
                "storage": {"root": str(tmp_path / "shared")},
                "database": {"url": "sqlite:///jobs.sqlite"},
                "backend": {"local": {"gpus": [], "cpu_slots": 1}},
            }
        )
    )
    port = free_port()
    command = [sys.executable, "-m", "nbjobs.cli", "service", f"--config={root / 'nbjobs.yaml'}"]
    command += [f"--port={port}", "--StaticTokenAuth.tokens={'ada-server-token': 'ada'}"]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    wait_until_answering(url + "api/health", process=proc, timeout=30)
    yield url, tmp_path / "shared" / escape_username("ada")
    proc.terminate()
    proc.wait(timeout=30)
    end_runners_in(tmp_path)


def test_in_a_hub_requests_go_to_the_job_service_as_the_servers_user(start_server, job_service):
    url, shared_home = job_service
    shared_home.mkdir(parents=True)
    notebook(shared_home / "hub.ipynb", "print('via the hub')")
    server = start_server({"JUPYTERHUB_API_TOKEN": "ada-server-token", "NBJOBS_URL": url})

    health = server.get("nbjobs/api/health").json()
    submitted = server.request(
        "POST", "nbjobs/api/jobs", json={"path": "hub.ipynb", "flavor": "cpu"}
    )

    assert health["mode"] == "hub"
    assert submitted.status_code == 201, submitted.text
    assert submitted.json()["user"] == "ada"
    assert wait_done(server, submitted.json()["id"])["state"] == "succeeded"


def test_in_a_hub_an_unreachable_job_service_is_said_in_one_sentence(start_server):
    url = f"http://127.0.0.1:{free_port()}/services/nbjobs/"  # nothing listens there
    server = start_server({"JUPYTERHUB_API_TOKEN": "hub-token", "NBJOBS_URL": url})

    for method, path in [("GET", "nbjobs/api/flavors"), ("POST", "nbjobs/api/jobs")]:
        r = server.request(method, path, json={"path": "a.ipynb", "flavor": "cpu"})

        assert r.status_code == 502
        assert r.headers["Content-Type"].startswith("application/json")
        assert r.json() == {
            "message": f"the nbjobs job service at {url} is not answering; "
            "ask your admin to check that it is running"
        }
    # The technical cause is for the admin, in the server's log.
    assert "Connection refused" in server.log.read_text()


@pytest.fixture
def proxy_page():
    """What the hub's proxy answers while the service is down: an HTML error page."""

    class Down(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"<html><body><h1>503: Service Unavailable</h1></body></html>"
            self.send_response(503)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Down)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/services/nbjobs/"
    httpd.shutdown()
    httpd.server_close()


def test_in_a_hub_the_proxys_error_page_becomes_the_same_sentence(start_server, proxy_page):
    server = start_server({"JUPYTERHUB_API_TOKEN": "hub-token", "NBJOBS_URL": proxy_page})

    r = server.get("nbjobs/api/flavors")

    assert r.status_code == 502
    assert r.json()["message"].startswith(f"the nbjobs job service at {proxy_page} is not")
    assert "<html>" not in r.text

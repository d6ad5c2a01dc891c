"""The user CLI against a real `nbjobs service` process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
import requests
import yaml

from nbjobs.storage import escape_username

from .conftest import free_port, notebook


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    config = root / "nbjobs.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "storage": {"root": "home"},
                "database": {"url": "sqlite:///jobs.sqlite"},
                "backend": {"local": {"gpus": [], "cpu_slots": 2}},
                "flavors": [{"name": "cpu", "gpus": 0}, {"name": "gpu", "gpus": 1}],
            }
        )
    )
    port = free_port()
    log = (root / "service.log").open("w")
    command = [sys.executable, "-m", "nbjobs.cli", "service", f"--config={config}"]
    command += [f"--port={port}", "--StaticTokenAuth.tokens={'t-ada': 'ada'}"]
    proc = subprocess.Popen(
        command,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 30
    while True:
        try:
            requests.get(url + "api/health", timeout=1)
            break
        except requests.ConnectionError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError((root / "service.log").read_text()) from None
            time.sleep(0.1)
    home = root / "home" / escape_username("ada")
    home.mkdir(parents=True)
    yield url, home
    proc.terminate()
    proc.wait(timeout=30)
    log.close()


def cli(service, *args, token="t-ada"):
    url, home = service
    env = {**os.environ, "NBJOBS_URL": url, "NBJOBS_TOKEN": token, "NBJOBS_ROOT": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "nbjobs.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=home,
    )


def write(service, name, *cells):
    path = Path(service[1]) / name
    nbformat.write(notebook(*cells), path)
    return path


def test_submit_wait_exits_like_the_job_and_prints_where_the_output_is(service):
    write(service, "ok.ipynb", "print('from the job')")
    write(service, "bad.ipynb", "1/0")

    ok = cli(service, "submit", "ok.ipynb", "--flavor", "cpu", "--wait")
    bad = cli(service, "submit", "bad.ipynb", "--flavor", "cpu", "--wait")

    assert ok.returncode == 0, ok.stderr
    assert "state:     succeeded" in ok.stdout
    output = next(line.split()[-1] for line in ok.stdout.splitlines() if line.startswith("output:"))
    assert (service[1] / output).exists()
    assert bad.returncode == 1
    assert "raised ZeroDivisionError" in bad.stdout


def test_json_output_for_scripts_and_the_other_commands(service):
    write(service, "p.ipynb", "print(n * 2)")

    submitted = cli(service, "submit", "p.ipynb", "-f", "cpu", "-p", "n", "21", "--json")

    assert submitted.returncode == 0, submitted.stderr
    job = json.loads(submitted.stdout)
    assert job["parameters"] == {"n": 21}
    logs = cli(service, "logs", job["id"], "-f")
    assert "42" in logs.stdout
    shown = json.loads(cli(service, "status", job["id"], "--json").stdout)
    assert shown["state"] == "succeeded"
    listed = cli(service, "list")
    assert job["id"] in listed.stdout
    assert "succeeded" in listed.stdout
    again = cli(service, "rerun", job["id"], "--wait", "--json")
    assert again.returncode == 0
    assert json.loads(again.stdout)["rerun_of"] == job["id"]


def test_cancel_from_the_terminal(service):
    write(service, "long.ipynb", "import time; time.sleep(60)")
    job = json.loads(cli(service, "submit", "long.ipynb", "-f", "cpu", "--json").stdout)

    done = cli(service, "cancel", job["id"])

    assert done.returncode == 0
    assert done.stdout.strip() in (f"{job['id']}: cancelled", f"{job['id']}: running")
    assert json.loads(cli(service, "status", job["id"], "--json").stdout)["state"] == "cancelled"


@pytest.mark.parametrize(
    ("args", "token", "expected"),
    [
        (["submit", "missing.ipynb", "-f", "cpu"], "t-ada", "does not exist in your folder"),
        (["submit", "/etc/hosts", "-f", "cpu"], "t-ada", "is not inside your folder"),
        (
            ["submit", "ok.ipynb", "-f", "gpu"],
            "t-ada",
            "needs 1 GPU(s) and this machine has 0 GPUs",
        ),
        (["status", "0123456789ab"], "t-ada", "no job '0123456789ab' of yours"),
        (["list"], "wrong", "send a JupyterHub API token"),
    ],
)
def test_refusals_exit_2_with_the_reason(service, args, token, expected):
    write(service, "ok.ipynb", "1")

    proc = cli(service, *args, token=token)

    assert proc.returncode == 2
    assert expected in proc.stderr


def test_an_unreachable_service_says_where_it_looked():
    env = {**os.environ, "NBJOBS_URL": "http://127.0.0.1:9/", "NBJOBS_TOKEN": "x"}
    proc = subprocess.run(
        [sys.executable, "-m", "nbjobs.cli", "list"], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 2
    assert "cannot reach the job service at http://127.0.0.1:9/api/" in proc.stderr

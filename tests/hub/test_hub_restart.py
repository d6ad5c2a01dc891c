"""A JupyterHub restart in the middle of a job loses nothing.

The hub is configured by hub_config's ``configure()`` (local backend, the job
service as a hub-managed service, as the demo runs it). A job is running when
the hub is stopped, which stops the job service too; the job's runner goes on
by itself, and when the hub (and with it the service) comes back, the job is
followed again to its end: recorded once, succeeded, its output whole.
"""

from __future__ import annotations

import secrets
import time

import nbformat
import psutil
import requests

from nbjobs.storage import escape_username

from .hubproc import basics, free_port, local_nbjobs_yaml, running_hub

HUB_CONFIG = """
from nbjobs.hub_config import configure
configure(c, {config!r}, service_port={service_port})
c.Authenticator.allow_all = True
c.JupyterHub.services.append({{"name": "tester", "api_token": {token!r}}})
c.JupyterHub.load_roles.append(
    {{"name": "tester", "services": ["tester"], "scopes": ["tokens", "admin:users"]}}
)
"""

NOTEBOOK_CELLS = [
    "print('first half', flush=True)",
    # runs until the test lets it go, so it is surely running across the restart
    "import os, time\nwhile not os.path.exists('go'):\n    time.sleep(0.2)\nprint('let go')",
    "print('second half')",
]


def runner_of(job_id: str) -> psutil.Process | None:
    for process in psutil.process_iter(["environ"]):
        mine = (process.info["environ"] or {}).get("NBJOBS_JOB_ID") == job_id
        if mine and "nbjobs.job_runner" in " ".join(process.cmdline()):
            return process
    return None


def wait_for(predicate, what: str, timeout: float = 90):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
    return value


def test_a_hub_restart_mid_job_loses_nothing(tmp_path):
    port, hub_port, service_port = free_port(), free_port(), free_port()
    admin_token = secrets.token_hex(16)
    nbjobs_yaml = local_nbjobs_yaml(tmp_path, flavors=[{"name": "cpu", "gpus": 0}])
    config = basics(tmp_path, port, hub_port) + HUB_CONFIG.format(
        config=str(nbjobs_yaml), service_port=service_port, token=admin_token
    )
    home = tmp_path / "shared" / "home" / escape_username("ada")
    home.mkdir(parents=True)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in NOTEBOOK_CELLS]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nbformat.write(nb, home / "long.ipynb")

    with running_hub(tmp_path, config, port, end_jobs=False) as url:
        admin = {"Authorization": f"token {admin_token}"}
        assert requests.post(f"{url}/hub/api/users/ada", headers=admin, timeout=30).ok
        made = requests.post(
            f"{url}/hub/api/users/ada/tokens", headers=admin, json={"note": "t"}, timeout=30
        )
        made.raise_for_status()
        ada = {"Authorization": f"token {made.json()['token']}"}
        api = f"{url}/services/nbjobs/api/"
        submitted = requests.post(
            api + "jobs", headers=ada, json={"path": "long.ipynb", "flavor": "cpu"}, timeout=60
        )
        assert submitted.status_code == 201, submitted.text
        job_id = submitted.json()["id"]

        def ticking() -> bool:
            job = requests.get(api + f"jobs/{job_id}", headers=ada, timeout=30).json()
            return (
                job["state"] == "running" and (job.get("progress") or {}).get("cells_done", 0) >= 1
            )

        wait_for(ticking, "the job to run its first cell")
        runner = runner_of(job_id)
        assert runner is not None

    # the hub, and the job service it managed, are gone; the job goes on
    assert runner.is_running()
    with requests.Session() as s:
        try:
            s.get(f"{url}/services/nbjobs/api/health", timeout=2)
            raise AssertionError("the hub was still answering")
        except requests.ConnectionError:
            pass

    with running_hub(tmp_path, config, port) as url:
        api = f"{url}/services/nbjobs/api/"

        def ended() -> dict | None:
            job = requests.get(api + f"jobs/{job_id}", headers=ada, timeout=30).json()
            final = ("succeeded", "failed", "cancelled", "timed_out")
            return job if job["state"] in final else None

        # the new service found the job running and follows it again
        again = requests.get(api + f"jobs/{job_id}", headers=ada, timeout=30).json()
        assert again["state"] == "running", again
        assert runner.is_running()
        (home / "go").touch()
        job = wait_for(ended, "the job to end after the restart")
        listed = requests.get(api + "jobs", headers=ada, timeout=30).json()
        log = requests.get(api + f"jobs/{job_id}/logs", headers=ada, timeout=30).text

    assert job["state"] == "succeeded", job
    assert listed["total"] == 1  # recorded once, not twice, not lost
    # (it ended; with its parent service gone, nothing may reap it here: a zombie)
    assert not runner.is_running() or runner.status() == psutil.STATUS_ZOMBIE
    output = nbformat.read(home / job["output_path"], as_version=4)
    assert output.cells[2].outputs[0]["text"] == "second half\n"
    # one run from start to end: the runner of before the restart, not a second one
    assert log.count("first half") == 1
    assert "let go" in log
    assert "second half" in log

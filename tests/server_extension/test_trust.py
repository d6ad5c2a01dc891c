"""Opening a job's result shows its rich outputs: the server extension marks the
output trusted for its owner (they ran the code), and nothing else."""

from __future__ import annotations

import nbformat

from .test_jobs import wait_done, wait_ready

HTML_CELL = "from IPython.display import HTML, display\ndisplay(HTML('<b id=\"made\">made</b>'))"


def _trusted(server, path):
    model = server.get(f"api/contents/{path}").json()
    return [c["metadata"].get("trusted") for c in model["content"]["cells"]]


def test_a_finished_jobs_output_is_trusted_for_its_owner_on_request(server):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nb.cells = [nbformat.v4.new_code_cell(HTML_CELL)]
    nbformat.write(nb, server.root / "rich.ipynb")
    wait_ready(server)
    job = server.request(
        "POST", "nbjobs/api/jobs", json={"path": "rich.ipynb", "flavor": "cpu"}
    ).json()
    done = wait_done(server, job["id"])
    assert done["state"] == "succeeded", done

    before = _trusted(server, done["output_path"])
    answer = server.request("POST", f"nbjobs/api/jobs/{job['id']}/trust")
    after = _trusted(server, done["output_path"])

    assert answer.status_code == 200, answer.text
    assert answer.json() == {"trusted": done["output_path"]}
    # untrusted as written by the runner (any notebook from elsewhere is), trusted now
    assert False in before
    assert all(after), after


def test_only_a_finished_job_of_ones_own_can_be_trusted(server):
    wait_ready(server)
    unknown = server.request("POST", "nbjobs/api/jobs/0123456789ab/trust")
    assert unknown.status_code == 404
    assert "0123456789ab" in unknown.json()["message"]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import time; time.sleep(60)")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nbformat.write(nb, server.root / "slow.ipynb")
    job = server.request(
        "POST", "nbjobs/api/jobs", json={"path": "slow.ipynb", "flavor": "cpu"}
    ).json()
    running = server.request("POST", f"nbjobs/api/jobs/{job['id']}/trust")
    server.request("POST", f"nbjobs/api/jobs/{job['id']}/cancel")
    assert running.status_code == 409
    assert "its output is written when it ends" in running.json()["message"]
    # without the server's token: jupyter-server's own refusal, nothing signed
    anonymous = server.request("POST", f"nbjobs/api/jobs/{job['id']}/trust", token="")
    assert anonymous.status_code in (401, 403)


def test_a_commands_output_is_no_notebook_to_trust(server):
    """A command job's output is its log: trusting it was a 500."""
    wait_ready(server)
    job = server.request(
        "POST", "nbjobs/api/jobs", json={"path": ".", "flavor": "cpu", "command": "echo hi"}
    )
    assert job.status_code == 201, job.text
    done = wait_done(server, job.json()["id"])

    answer = server.request("POST", f"nbjobs/api/jobs/{done['id']}/trust")

    assert answer.status_code == 400, answer.text
    assert answer.json()["message"] == (
        f"job {done['id']} wrote {done['output_path']}, not a notebook: there is nothing to trust"
    )

"""Scripts and commands as jobs: the same flavors, queue, log, time limit and cancel as a
notebook; their output is their log, their exit code decides the state."""

from __future__ import annotations

import asyncio
import os
import re

import psutil
import pytest

from .conftest import start_service, stop_all

pytestmark = pytest.mark.timeout(180)


def write(svc, user, relpath, text, mode=0o644):
    path = svc.home(user) / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


async def test_a_python_script_gets_its_parameters_and_its_output_is_its_log(svc):
    write(
        svc,
        "ada",
        "work/train.py",
        "import json, os\n"
        "print('lr is', os.environ['NBJOBS_PARAM_LR'])\n"
        "print('all', json.loads(os.environ['NBJOBS_PARAMETERS']))\n"
        "print('in', os.getcwd())\n",
    )
    job = await svc.submit("ada", "work/train.py", parameters={"lr": 0.5, "name": "x"})
    assert job["kind"] == "script"
    assert re.fullmatch(r"work/train\.\d{4}-\d\d-\d\dT\d{4}\.[0-9a-f]{8}\.log", job["output_path"])
    done = await svc.wait("ada", job["id"])
    assert done["state"] == "succeeded", done
    log = (svc.home("ada") / job["output_path"]).read_text()
    assert "lr is 0.5\n" in log
    assert "all {'lr': 0.5, 'name': 'x'}" in log
    assert f"in {svc.home('ada') / 'work'}" in log
    async with svc.client("ada") as c:
        service_log = (await c.get(f"jobs/{job['id']}/logs")).text
    assert "lr is 0.5" in service_log


async def test_a_script_that_exits_non_zero_fails_saying_how_and_its_last_line(svc):
    write(svc, "ada", "prep.sh", "echo starting\necho 'no data in /data/in' >&2\nexit 3\n")
    job = await svc.submit("ada", "prep.sh")
    done = await svc.wait("ada", job["id"])
    assert done["state"] == "failed"
    assert done["message"] == "prep.sh exited with code 3: no data in /data/in"


async def test_a_script_whose_name_starts_with_dashes_runs(svc):
    """``--x.sh`` is a file name, not an option of the runner (it failed in argparse)."""
    write(svc, "ada", "--x.sh", "echo ran as $0\n")
    job = await svc.submit("ada", "--x.sh")
    done = await svc.wait("ada", job["id"])
    assert done["state"] == "succeeded", done
    assert "ran as" in (svc.home("ada") / done["output_path"]).read_text()


async def test_a_command_runs_in_the_folder_it_names(svc):
    (svc.home("ada") / "data").mkdir(parents=True, exist_ok=True)
    async with svc.client("ada") as c:
        r = await c.post(
            "jobs",
            json={
                "path": "data",
                "flavor": "cpu",
                "command": 'echo "n=$NBJOBS_PARAM_N"; pwd; ls',
                "parameters": {"n": 7},
            },
        )
    assert r.status_code == 201, r.text
    job = r.json()
    assert (job["kind"], job["path"], job["command"]) == (
        "command",
        "data",
        'echo "n=$NBJOBS_PARAM_N"; pwd; ls',
    )
    assert job["name"] == 'echo "n=$NBJOBS_PARAM_N"; pwd; ls'
    assert job["output_path"].startswith("data/command.")
    done = await svc.wait("ada", job["id"])
    assert done["state"] == "succeeded", done
    log = (svc.home("ada") / job["output_path"]).read_text()
    assert "n=7\n" in log
    assert f"{svc.home('ada') / 'data'}\n" in log
    # the command is in a file of the job's folder, never on a command line
    command_file = svc.home("ada") / ".nbjobs" / "jobs" / job["id"] / "command.sh"
    assert 'echo "n=$NBJOBS_PARAM_N"' in command_file.read_text()


async def test_a_script_past_its_time_limit_is_stopped_with_its_children(svc):
    child = svc.home("ada") / "child.pid"
    write(
        svc,
        "ada",
        "forever.sh",
        f"(echo $BASHPID > {child}; exec sleep 600) &\necho started\nsleep 60\n",
    )
    job = await svc.submit("ada", "forever.sh", time_limit=1)
    done = await svc.wait("ada", job["id"], timeout=60)
    assert done["state"] == "timed_out", done
    assert "time limit" in done["message"]
    # its background child (a sleep of ten minutes) is gone with it, not left behind
    pid = int(child.read_text())
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


async def test_cancel_stops_a_running_script(svc):
    write(svc, "ada", "slow.py", "import time\nprint('going', flush=True)\ntime.sleep(60)\n")
    job = await svc.submit("ada", "slow.py")
    await svc.wait("ada", job["id"], lambda j: j["state"] == "running")
    await asyncio.sleep(0.5)
    async with svc.client("ada") as c:
        assert (await c.post(f"jobs/{job['id']}/cancel")).status_code == 200
    done = await svc.wait("ada", job["id"], timeout=60)
    assert done["state"] == "cancelled", done


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"path": "notes.txt"}, "is not a notebook (.ipynb) or a script (.py, .sh)"),
        ({"path": "missing", "command": "ls"}, "does not exist in your folder"),
        ({"path": "../bob", "command": "ls"}, "leaves your folder"),
        ({"path": "notes.txt", "command": "ls"}, "is not a folder"),
        ({"path": "away", "command": "ls"}, "leads outside your folder"),
    ],
)
async def test_what_cannot_run_is_refused_in_words(svc, body, words):
    write(svc, "ada", "notes.txt", "hello")
    away = svc.home("ada") / "away"
    if not away.exists():
        os.symlink("/etc", away)
    async with svc.client("ada") as c:
        r = await c.post("jobs", json={"flavor": "cpu", **body})
    assert r.status_code == 400, r.text
    assert words in r.json()["message"]


async def test_a_definition_can_run_a_command(tmp_path):
    svc = await start_service(tmp_path)
    try:
        svc.home("ada")
        async with svc.client("ada") as c:
            made = await c.post(
                "definitions", json={"path": ".", "flavor": "cpu", "command": "echo nightly"}
            )
            assert made.status_code == 201, made.text
            run = (await c.post(f"definitions/{made.json()['id']}/run")).json()
            done = await svc.wait("ada", run["job_id"])
            edited = await c.patch(
                f"definitions/{made.json()['id']}", json={"command": "echo weekly"}
            )
            again = (await c.post(f"definitions/{made.json()['id']}/run")).json()
        assert done["state"] == "succeeded"
        assert "nightly" in (svc.home("ada") / done["output_path"]).read_text()
        assert edited.json()["version"] == 2
        later = await svc.wait("ada", again["job_id"])
        assert "weekly" in (svc.home("ada") / later["output_path"]).read_text()
    finally:
        await stop_all(svc)

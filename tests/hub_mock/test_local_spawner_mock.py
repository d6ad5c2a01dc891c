"""nbjobs' LocalCPUSpawner, spawned through JupyterHub's MockHub API like any user's server.

hub_config's ``configure(c)`` picks the spawner from a local-backend nbjobs.yaml;
the admin starts a new user's server with ``POST /hub/api/users/<name>/server``;
what the user then gets is read back: a real jupyter-server, reached through the
hub's proxy, that serves their own folder under the shared root and runs with
no GPU visible.
"""

from __future__ import annotations

import asyncio
import time
from urllib.parse import quote

import psutil
import pytest
from jupyterhub.tests.utils import api_request, async_requests, auth_header, public_url
from nbjobs.spawner.local import LocalCPUSpawner
from traitlets.config import Config

from nbjobs.config import load_config
from nbjobs.storage import escape_username, user_folder
from tests.machine import this_runs
from tests.ports import free_port

NAME = "marie.curie@sorbonne.fr"


@pytest.fixture(scope="module")
def nbjobs_yaml():
    return this_runs(
        {
            "storage": {"user_dir": "home/{username}"},
            "backend": {"kind": "local", "local": {"gpus": [], "cpu_slots": 1}},
            "flavors": [{"name": "cpu", "display_name": "CPU only", "gpus": 0}],
        }
    )


@pytest.fixture(scope="module")
def hub_settings():
    # hub_config gives the server the service's address for a hub at "/" (MockHub's own
    # default base URL is "/@/space%20word/"; see test_hub_config_roles.py)
    c = Config()
    c.JupyterHub.bind_url = f"http://127.0.0.1:{free_port()}/"
    return c


async def wait_ready(app, name: str) -> dict:
    """The user's model once the hub says their default server is ready."""
    deadline = time.monotonic() + 90
    while True:
        model = (await api_request(app, "users", quote(name, safe=""))).json()
        if model["servers"].get("", {}).get("ready"):
            return model
        assert model["servers"].get(""), f"the server stopped while starting: {model}"
        assert time.monotonic() < deadline, model
        await asyncio.sleep(0.3)


async def wait_stopped(app, name: str, process: psutil.Process) -> None:
    """Until the hub says the user's server stopped: once its spawner's stop has returned
    (interrupt, terminate, kill, each with its wait), after the answer to the DELETE when
    that takes over 10 s."""
    deadline = time.monotonic() + 120
    while (await api_request(app, "users", quote(name, safe=""))).json()["servers"]:
        assert time.monotonic() < deadline, f"the hub's stop has not ended: {running(process)}"
        await asyncio.sleep(0.3)


def running(process: psutil.Process) -> bool:
    """Whether the process still runs (not ended, and not an unreaped zombie)."""
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def test_a_spawned_server_is_cpu_only_and_serves_the_users_folder(app, nbjobs_files):
    config = load_config(nbjobs_files[0])
    folder = user_folder(config.storage, NAME)
    # the one escaping function builds the folder, under the shared root
    assert folder == config.storage.root / "home" / escape_username(NAME)
    assert not folder.exists()

    user_api = ("users", quote(NAME, safe=""))
    assert (await api_request(app, *user_api, method="post")).status_code == 201
    started = await api_request(app, *user_api, "server", method="post")
    assert started.status_code in (201, 202), started.text
    model = await wait_ready(app, NAME)

    # the hub ran nbjobs' spawner for it, and the spawner made the folder on first spawn
    spawner = app.users[NAME].spawner
    assert isinstance(spawner, LocalCPUSpawner)
    assert folder.is_dir()

    # the user's server, through the hub's proxy, shows their folder and nothing else
    (folder / "mine.txt").write_text("only in my folder\n")
    headers = auth_header(app.db, NAME)
    contents = public_url(app, app.users[NAME], "api/contents/")
    assert contents.endswith(model["servers"][""]["url"] + "api/contents/")
    listed = await async_requests.get(contents, headers=headers)
    assert listed.status_code == 200, listed.text
    assert [item["name"] for item in listed.json()["content"]] == ["mine.txt"]

    # the Lab's Submit Job dialog reaches the job service from there (through NBJOBS_URL)
    flavors = await async_requests.get(
        public_url(app, app.users[NAME], "nbjobs/api/flavors"), headers=headers
    )
    assert flavors.status_code == 200, flavors.text
    assert "CPU only" in flavors.text

    # the server's process: no GPU for CUDA or the NVIDIA runtime, the job service's
    # address for the server extension, its root and home the user's folder
    process = psutil.Process(spawner.pid)
    env = process.environ()
    assert env["CUDA_VISIBLE_DEVICES"] == ""
    assert env["NVIDIA_VISIBLE_DEVICES"] == "void"
    assert env["NBJOBS_URL"] == spawner.nbjobs_service_url.replace("{base_url}", app.base_url)
    assert env["NBJOBS_URL"].endswith(f"{app.base_url}services/nbjobs/")
    assert env["NBJOBS_ROOT"] == env["HOME"] == str(folder)
    assert process.cwd() == str(folder)

    # stopping it through the hub ends the process
    stopped = await api_request(app, *user_api, "server", method="delete")
    assert stopped.status_code in (202, 204), stopped.text
    await wait_stopped(app, NAME, process)
    assert not running(process), "the server process outlived its stop"


async def test_a_server_that_answers_after_half_a_minute_still_starts(app):
    """A busy machine (a class logging in at once) can take a server more than JupyterHub's
    30 s to answer: the hub waits for it rather than failing the start. The server's
    command waits 35 s before it starts the server (the hub's own command, exec'd)."""
    name = "slow.starter"
    user_api = ("users", name)
    assert (await api_request(app, *user_api, method="post")).status_code == 201
    spawner = app.users[name].spawner
    assert isinstance(spawner, LocalCPUSpawner)
    spawner.cmd = ["bash", "-c", 'sleep 35; exec "$0" "$@"', *spawner.cmd]
    started = await api_request(app, *user_api, "server", method="post")
    assert started.status_code in (201, 202), started.text
    model = await wait_ready(app, name)
    assert model["servers"][""]["ready"]
    process = psutil.Process(spawner.pid)
    stopped = await api_request(app, *user_api, "server", method="delete")
    assert stopped.status_code in (202, 204), stopped.text
    await wait_stopped(app, name, process)

"""The local twin of the Kubernetes spawner, spawning brand-new users in a real hub.

The hub runs hub_config's ``configure()`` on a local-backend nbjobs.yaml, so
its spawner is nbjobs' ``LocalCPUSpawner``. Users are created through the
hub's API and their servers started the way the hub starts anyone's; what
the server serves and the environment of its process are read back.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import psutil
import pytest
import requests

from nbjobs.config import NbjobsConfig, load_config
from nbjobs.storage import escape_username, user_folder

from .hubproc import basics, free_port, local_nbjobs_yaml, running_hub

HUB_CONFIG = """
import os
from nbjobs.hub_config import configure
configure(c, {config!r}, service_port={service_port})
c.Authenticator.allow_all = True
c.JupyterHub.services.append({{"name": "tester", "api_token": {token!r}}})
c.JupyterHub.load_roles.append(
    {{"name": "tester", "services": ["tester"],
      "scopes": ["admin:users", "admin:servers", "access:servers"]}}
)
if os.geteuid() == 0:  # servers run as the hub's user
    c.Spawner.args = ["--allow-root"]
"""


@contextmanager
def a_hub(tmp: Path, base_url: str) -> Iterator[tuple[str, dict[str, str], NbjobsConfig]]:
    """A hub of its own in ``tmp`` under ``base_url``: its URL, a tester's headers for
    its API, and the nbjobs.yaml it runs on."""
    port, hub_port = free_port(), free_port()
    token = secrets.token_hex(16)
    nbjobs_yaml = local_nbjobs_yaml(tmp)
    config = HUB_CONFIG.format(config=str(nbjobs_yaml), service_port=free_port(), token=token)
    config += f"c.JupyterHub.base_url = {base_url!r}\n"
    with running_hub(tmp, basics(tmp, port, hub_port) + config, port, base_url) as url:
        yield url, {"Authorization": f"token {token}"}, load_config(nbjobs_yaml)


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    with a_hub(tmp_path_factory.mktemp("local-spawner"), "/") as started:
        yield started


@pytest.fixture(scope="module")
def jupyter_hub(tmp_path_factory):
    """A second hub on the machine, served under /jupyter/."""
    with a_hub(tmp_path_factory.mktemp("local-spawner-jupyter"), "/jupyter/") as started:
        yield started


def new_user_with_a_server(url: str, headers: dict[str, str], name: str) -> tuple[str, dict]:
    """Create ``name`` through the hub's API and start their server, the way the hub
    starts anyone's; the user's API URL, and their model once the server is ready."""
    api = f"{url}/hub/api/users/{quote(name, safe='')}"
    assert requests.post(api, headers=headers, timeout=30).status_code == 201
    started = requests.post(f"{api}/server", headers=headers, timeout=60)
    assert started.status_code in (201, 202), started.text
    deadline = time.monotonic() + 90
    while (
        not (model := requests.get(api, headers=headers, timeout=30).json())["servers"]
        .get("", {})
        .get("ready")
    ):
        assert time.monotonic() < deadline, model
        time.sleep(0.3)
    return api, model


@pytest.mark.parametrize("name", ["carl", "marie.curie@sorbonne.fr"])
def test_a_new_users_server_is_their_folder_and_cpu_only(hub, name):
    url, headers, config = hub
    folder = user_folder(config.storage, name)
    root = config.storage.root
    # the one escaping function builds the path, under the shared root
    assert folder == config.storage.root / "home" / escape_username(name)
    assert folder.is_relative_to(config.storage.root)
    assert not folder.exists()

    api, model = new_user_with_a_server(url, headers, name)

    try:
        assert folder.is_dir()
        (folder / "mine.txt").write_text("only in my folder\n")
        server = url + model["servers"][""]["url"]
        listed = requests.get(server + "api/contents/", headers=headers, timeout=30)
        assert listed.status_code == 200, listed.text
        assert [item["name"] for item in listed.json()["content"]] == ["mine.txt"]

        # the server itself (a helper it starts for a moment inherits its environment
        # too, and may be seen on its way out), this hub's: another suite's beside this
        # one has its own carl, under its own storage root
        processes = [
            p
            for p in psutil.process_iter(["environ", "cwd", "cmdline", "status"])
            if (p.info["environ"] or {}).get("JUPYTERHUB_USER") == name
            and (p.info["environ"] or {}).get("NBJOBS_ROOT", "").startswith(f"{root}/")
            and "nbjobs.spawner.singleuser" in " ".join(p.info["cmdline"] or [])
            and p.info["status"] not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
        ]
        assert len(processes) == 1
        env = processes[0].info["environ"]
        assert env["CUDA_VISIBLE_DEVICES"] == ""
        assert env["NVIDIA_VISIBLE_DEVICES"] == "void"
        assert env["NBJOBS_ROOT"] == str(folder)
        assert env["HOME"] == str(folder)
        assert env["NBJOBS_URL"].endswith("/services/nbjobs/")
        assert processes[0].info["cwd"] == str(folder)
    finally:
        requests.delete(f"{api}/server", headers=headers, timeout=60)


def test_a_second_hub_on_the_machine_leaves_the_first_ones_servers_alone(hub, request):
    """Two hubs on one machine (two classes, or the demo beside an install) with a user
    of the same name: starting her server on the second put it in the same control group
    as her server on the first, which was stopped first as "what a crashed server left"
    (found by running the browser tests of two hubs at once)."""
    url, headers, _ = hub
    api, model = new_user_with_a_server(url, headers, "twin")
    pid = model["servers"][""]["state"]["pid"]
    # the second hub starts while her server runs on the first (the base-URL test
    # below uses it after): a hub's start leaves another's servers alone too
    other, other_headers, _ = request.getfixturevalue("jupyter_hub")
    other_api, _ = new_user_with_a_server(other, other_headers, "twin")
    try:
        time.sleep(1)
        alive = psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"
    finally:
        requests.delete(f"{other_api}/server", headers=other_headers, timeout=60)
        requests.delete(f"{api}/server", headers=headers, timeout=60)

    assert alive, "starting twin's server on the second hub stopped it on the first"


def test_under_a_base_url_the_server_reaches_the_job_service(jupyter_hub):
    # a hub served under /jupyter/ also routes its services there: the server
    # extension must be told /jupyter/services/nbjobs/, or Submit Job gets 404s
    url, headers, _ = jupyter_hub
    api, model = new_user_with_a_server(url, headers, "grace")
    try:
        server = url.removesuffix("/jupyter") + model["servers"][""]["url"]
        assert model["servers"][""]["url"].startswith("/jupyter/user/grace/")
        flavors = requests.get(server + "nbjobs/api/flavors", headers=headers, timeout=30)
        assert flavors.status_code == 200, flavors.text
        assert [f["name"] for f in flavors.json()], flavors.text
    finally:
        requests.delete(f"{api}/server", headers=headers, timeout=60)

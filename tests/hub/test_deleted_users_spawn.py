"""A user deleted and made again under the same name who starts a notebook server before
anything else (no call to nbjobs yet, the service's round an hour away) starts in a
folder of their own, not the earlier person's: the spawner introduces them to the job
service first, which retires the earlier person then.

A real hub, its job service and a real notebook server (tests/hub/test_deleted_users.py
covers the rest of a deletion).
"""

from __future__ import annotations

import time

import requests

from . import test_deleted_users
from .test_deleted_users import running


def test_a_server_started_first_by_a_new_person_of_a_name_holds_nothing_of_the_earlier(
    tmp_path, monkeypatch
):
    # without OS accounts the hub's servers run as root, which jupyter-server refuses
    hub_config = test_deleted_users.HUB_CONFIG + 'c.Spawner.args = ["--allow-root"]\n'
    monkeypatch.setattr(test_deleted_users, "HUB_CONFIG", hub_config)
    with running(tmp_path, "archive", users={"on_delete": "archive", "check_every": "1h"}) as hub:
        token = hub.make_user("ada")
        assert hub.api(token, "GET", "health").status_code == 200  # the service knows her
        hub.folder("ada").mkdir(parents=True, exist_ok=True)
        (hub.folder("ada") / "private-notes.txt").write_text("the earlier ada's draft")

        hub.delete_user("ada")
        time.sleep(1.1)  # the hub's "created" is to the second: a new person, a new time
        new = hub.make_user("ada")
        as_ada = {"Authorization": f"token {new}"}
        started = requests.post(f"{hub.url}/hub/api/users/ada/server", headers=as_ada, timeout=60)
        assert started.status_code in (201, 202), started.text
        deadline = time.monotonic() + 90
        while not server_ready(hub.url, as_ada):
            assert time.monotonic() < deadline, "ada's server did not start"
            time.sleep(0.5)
        listed = requests.get(f"{hub.url}/user/ada/api/contents", headers=as_ada, timeout=60)
        assert listed.status_code == 200, listed.text
        names = [item["name"] for item in listed.json()["content"]]
        retired = [d for d in hub.deleted() if d["name"] == "ada"]
        requests.delete(f"{hub.url}/hub/api/users/ada/server", headers=as_ada, timeout=60)

    assert "private-notes.txt" not in names
    assert not (hub.folder("ada") / "private-notes.txt").exists()
    assert len(retired) == 1
    assert retired[0]["why"].startswith("made again in the hub")


def server_ready(url: str, headers: dict[str, str]) -> bool:
    ada = requests.get(f"{url}/hub/api/users/ada", headers=headers, timeout=30).json()
    return bool(ada["servers"].get("", {}).get("ready"))

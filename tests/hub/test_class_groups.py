"""A class made before nbjobs.yaml gives its name a meaning grants nothing, through a real hub.

Class first, configuration second: teachers make classes whose names mean nothing yet
(``nbjobs-admins``, ``helpers``, ``vip``, ``review``), and one class is left as nbjobs
used to keep classes (a hub group named like the class, ``oldies``). Then the admin
writes an nbjobs.yaml naming every one of those names as an admin group, a teachers'
group, a flavor's group and an approval group, and restarts the hub. Each class's
student gets none of it: the API answers 403, the flavor is not offered, the hub's
token carries no nbjobs power; the old class is moved into its own group; and the
service says so in its log and on the admins' dashboard.
"""

from __future__ import annotations

import secrets
import socket

import nbformat
import requests
import yaml

from nbjobs.storage import escape_username
from tests.machine import this_runs

from .hubproc import basics, free_port, running_hub

HUB_CONFIG = """
from nbjobs.hub_config import configure
configure(c, {config!r}, service_port={service_port})
c.Authenticator.allowed_users = {users!r}
c.Authenticator.admin_users = {{"root"}}
c.JupyterHub.services.append({{"name": "test-admin", "api_token": {admin_token!r}}})
c.JupyterHub.load_roles.append(
    {{"name": "test-admin", "services": ["test-admin"],
      "scopes": ["tokens", "admin:users", "admin:groups", "groups", "list:groups"]}}
)
"""
#: each class made before its name meant anything, and its one student
CLASSES = {"nbjobs-admins": "sid", "helpers": "tia", "vip": "uma", "review": "val"}
#: the class kept as before classes had groups of their own (a bare-named hub group)
OLD_CLASS, OLD_STUDENT = "oldies", "wes"
USERS = {"root", "tess", "vic", OLD_STUDENT, *CLASSES.values()}

BEFORE = {
    "backend": {"kind": "local", "local": {"gpus": [], "cpu_slots": 2}},
    "flavors": [{"name": "cpu", "gpus": 0}],
    "teachers": {"users": ["tess"]},
}
AFTER = {
    **BEFORE,
    "flavors": [
        {"name": "cpu", "gpus": 0},
        {"name": "big", "gpus": 0, "groups": ["vip"]},
        {"name": "gated", "gpus": 0, "approval": {"groups": ["review"]}},
    ],
    "admin": {"groups": ["nbjobs-admins", OLD_CLASS]},
    "teachers": {"users": ["tess"], "groups": ["helpers"]},
}


class Hub:
    """A hub's URL with the test-admin service's token, and tokens made per user."""

    def __init__(self, url: str, admin_token: str) -> None:
        self.url, self.service = url, f"{url}/services/nbjobs/"
        self.admin = {"Authorization": f"token {admin_token}"}

    def token(self, user: str) -> str:
        r = requests.post(
            f"{self.url}/hub/api/users/{user}/tokens", headers=self.admin, json={}, timeout=30
        )
        r.raise_for_status()
        return str(r.json()["token"])

    def api(self, token: str, method: str, path: str, **kwargs) -> requests.Response:
        headers = {"Authorization": f"token {token}"}
        return requests.request(
            method, self.service + "api/" + path, headers=headers, timeout=60, **kwargs
        )

    def hub_api(self, method: str, path: str, **kwargs) -> requests.Response:
        return requests.request(
            method, f"{self.url}/hub/api/{path}", headers=self.admin, timeout=30, **kwargs
        )


def test_a_class_named_before_its_name_means_something_grants_nothing_later(tmp_path):
    port, hub_port, service_port = free_port(), free_port(), free_port()
    admin_token = secrets.token_hex(16)
    nbjobs_yaml = tmp_path / "nbjobs.yaml"
    placed = {
        "storage": {"root": str(tmp_path / "home")},
        "database": {"url": f"sqlite:///{tmp_path}/jobs.sqlite"},
    }
    nbjobs_yaml.write_text(yaml.safe_dump(this_runs({**BEFORE, **placed})))
    config = basics(tmp_path, port, hub_port) + HUB_CONFIG.format(
        config=str(nbjobs_yaml),
        service_port=service_port,
        users=sorted(USERS),
        admin_token=admin_token,
    )

    # 1. The names mean nothing yet: a teacher makes the classes, and one class is left
    #    as nbjobs kept classes before (a hub group named like it, with the class's
    #    settings), as an older nbjobs would have made it.
    with running_hub(tmp_path, config, port) as url:
        hub = Hub(url, admin_token)
        tess = hub.token("tess")
        for name, student in CLASSES.items():
            made = hub.api(tess, "POST", "classes", json={"name": name, "students": [student]})
            assert made.status_code == 201, made.text
        hub.hub_api("POST", f"groups/{OLD_CLASS}", json={"users": [OLD_STUDENT]})
        settings = {"teachers": ["tess"], "flavors": [], "gpu_hours": None, "period": "week"}
        hub.hub_api("PUT", f"groups/{OLD_CLASS}/properties", json={"nbjobs_class": settings})

    # 2. The admin gives those names meaning and restarts the hub.
    nbjobs_yaml.write_text(yaml.safe_dump(this_runs({**AFTER, **placed})))
    with running_hub(tmp_path, config, port) as url:
        hub = Hub(url, admin_token)
        tokens = {user: hub.token(user) for user in USERS}
        victim = submit_a_sleeping_job(hub, tmp_path, tokens["vic"])
        root = tokens["root"]
        node = socket.gethostname()  # the local backend's one node

        # admin group: nobody of class nbjobs-admins (nor of the old class) administers
        for student in (CLASSES["nbjobs-admins"], OLD_STUDENT):
            token = tokens[student]
            scopes = whoami(hub, token)
            assert "custom:nbjobs:admin" not in scopes, (student, scopes)
            everyone = hub.api(token, "GET", "jobs", params={"scope": "all"})
            assert everyone.status_code == 403, (student, everyone.text)
            assert hub.api(token, "GET", f"jobs/{victim}").status_code == 404
            assert hub.api(token, "POST", f"jobs/{victim}/cancel").status_code == 404
            drain = hub.api(token, "POST", f"dashboard/nodes/{node}/drain", json={})
            assert drain.status_code == 403, (student, drain.text)
        assert hub.api(tokens["vic"], "GET", f"jobs/{victim}").json()["state"] != "cancelled"
        assert not any(n["drained"] for n in hub.api(root, "GET", "dashboard/nodes").json())

        # teachers' group: the student of class helpers may not make a class (nor an account)
        tia = tokens[CLASSES["helpers"]]
        assert "custom:nbjobs:teach" not in whoami(hub, tia)
        grab = hub.api(tia, "POST", "classes", json={"name": "grab", "students": ["newkid"]})
        assert grab.status_code == 403, grab.text
        assert hub.hub_api("GET", "users/newkid").status_code == 404

        # a flavor's group: the student of class vip is not offered flavor big
        uma = tokens[CLASSES["vip"]]
        assert [f["name"] for f in hub.api(uma, "GET", "flavors").json()] == ["cpu", "gated"]
        big = hub.api(uma, "POST", "jobs", json={"path": "x.ipynb", "flavor": "big"})
        assert big.status_code == 403, big.text

        # the old class moved into a group of its own, with its student and settings
        assert hub.hub_api("GET", f"groups/{OLD_CLASS}").status_code == 404
        moved = hub.hub_api("GET", f"groups/nbjobs-class-{OLD_CLASS}").json()
        assert moved["users"] == [OLD_STUDENT]
        assert moved["properties"]["nbjobs_class"]["teachers"] == ["tess"]
        listed = hub.api(tokens["tess"], "GET", f"classes/{OLD_CLASS}")
        assert listed.json()["students"] == [OLD_STUDENT], listed.text

        # every collision is said on the admins' dashboard, and in the service's log
        notices = hub.api(root, "GET", "dashboard/overview").json()["class_notices"]
        log = (tmp_path / "hub.log").read_text()
        expected = [
            f"class {OLD_CLASS!r} was the hub group {OLD_CLASS!r}, a name nbjobs.yaml gives "
            "meaning to (its members are nbjobs admins); its students got nothing of that",
            "class 'nbjobs-admins' has the name of a group nbjobs.yaml gives meaning to (its "
            "members are nbjobs admins); the class is hub group 'nbjobs-class-nbjobs-admins' "
            "and its students get none of that",
            "class 'helpers' has the name of a group nbjobs.yaml gives meaning to (its "
            "members teach)",
            "class 'vip' has the name of a group nbjobs.yaml gives meaning to (it may use "
            "flavor 'big')",
            "class 'review' has the name of a group nbjobs.yaml gives meaning to (its jobs "
            "on 'gated' wait for approval)",
        ]
        for words in expected:
            assert any(words in notice for notice in notices), (words, notices)
            assert words in log, words
        hub.api(tokens["vic"], "POST", f"jobs/{victim}/cancel")


def whoami(hub: Hub, token: str) -> set[str]:
    """The scopes the hub gives a user's token."""
    r = requests.get(
        f"{hub.url}/hub/api/user", headers={"Authorization": f"token {token}"}, timeout=30
    )
    r.raise_for_status()
    return set(r.json()["scopes"])


def submit_a_sleeping_job(hub: Hub, folder, token: str) -> str:
    """Another student's job, with parameters, that runs until it is cancelled."""
    home = folder / "home" / escape_username("vic")
    home.mkdir(parents=True, exist_ok=True)
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nb.cells = [nbformat.v4.new_code_cell("secret = 1", metadata={"tags": ["parameters"]})]
    nb.cells.append(nbformat.v4.new_code_cell("import time; time.sleep(120)"))
    nbformat.write(nb, home / "mine.ipynb")
    job = hub.api(
        token,
        "POST",
        "jobs",
        json={"path": "mine.ipynb", "flavor": "cpu", "parameters": {"secret": 42}},
    )
    assert job.status_code == 201, job.text
    return str(job.json()["id"])


def test_until_the_service_has_read_the_hubs_groups_no_group_makes_an_admin(tmp_path):
    """Any hub group might be a class of old until the service has read which are: a
    service that cannot read them (its role lacks list:groups here) makes nobody an
    admin through admin.groups, and says why in its log."""
    port, hub_port, service_port = free_port(), free_port(), free_port()
    admin_token = secrets.token_hex(16)
    nbjobs_yaml = tmp_path / "nbjobs.yaml"
    nbjobs_yaml.write_text(
        yaml.safe_dump(
            this_runs(
                {
                    **BEFORE,
                    "storage": {"root": str(tmp_path / "home")},
                    "database": {"url": f"sqlite:///{tmp_path}/jobs.sqlite"},
                    "admin": {"groups": ["staff"]},
                }
            )
        )
    )
    config = (
        basics(tmp_path, port, hub_port)
        + HUB_CONFIG.format(
            config=str(nbjobs_yaml),
            service_port=service_port,
            users=["bob", "root"],
            admin_token=admin_token,
        )
        + 'c.JupyterHub.load_groups["staff"] = {"users": ["bob"]}\n'
        + "for role in c.JupyterHub.load_roles:\n"
        + '    if role["name"] == "nbjobs-service":\n'
        + '        role["scopes"] = [s for s in role["scopes"] if "groups" not in s]\n'
    )

    with running_hub(tmp_path, config, port) as url:
        hub = Hub(url, admin_token)
        bob = hub.token("bob")
        everyone = hub.api(bob, "GET", "jobs", params={"scope": "all"})
        log = (tmp_path / "hub.log").read_text()

    assert everyone.status_code == 403, everyone.text
    assert ("cannot read classes from the hub: JupyterHub refused GET groups (403 ") in log
    assert (
        "until it can, nobody is an admin or a teacher through admin.groups or "
        "teachers.groups (one of them might be a class of old)"
    ) in log

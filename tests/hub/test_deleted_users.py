"""A hub user deleted and made again under the same name starts with nothing of the
earlier person's: no jobs, no schedules, no notification settings, none of their files.

A real JupyterHub configured by hub_config, its managed job service, and the hub's own
REST API to delete and make users, as an admin does. Each hub runs with one of the two
``users.on_delete`` choices: ``archive`` keeps the earlier person's things for admins
under an archive name, ``remove`` deletes them.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import nbformat
import pytest
import requests
import yaml

from nbjobs.config import StorageConfig
from nbjobs.storage import user_folder
from tests.machine import this_runs

from .hubproc import basics, free_port, running_hub

HUB_CONFIG = """
from nbjobs.hub_config import configure
configure(c, {config!r}, service_port={service_port})
c.Authenticator.allowed_users = {{"root", "hubadmin"}}
c.Authenticator.admin_users = {{"root", "hubadmin"}}
c.JupyterHub.services.append({{"name": "test-admin", "api_token": {admin_token!r}}})
c.JupyterHub.load_roles.append(
    {{"name": "user-maker", "services": ["test-admin"], "scopes": ["tokens", "admin:users"]}}
)
"""


class Hub:
    def __init__(self, url: str, admin_token: str, tmp: Path, on_delete: str) -> None:
        self.url, self.tmp, self.on_delete = url, tmp, on_delete
        self.admin = {"Authorization": f"token {admin_token}"}
        self.service = f"{url}/services/nbjobs/api/"
        self.storage = StorageConfig(root=tmp / "home")
        self.root = self.make_user("root", exists=True)

    def hub(self, method: str, path: str, **kwargs) -> requests.Response:
        return requests.request(
            method, f"{self.url}/hub/api/{path}", headers=self.admin, timeout=30, **kwargs
        )

    def make_user(self, name: str, exists: bool = False) -> str:
        """Make the hub user ``name`` (as an admin does); a new token of theirs."""
        if not exists:
            made = self.hub("POST", f"users/{name}")
            assert made.status_code == 201, made.text
        r = self.hub("POST", f"users/{name}/tokens", json={"note": "test"})
        assert r.status_code == 201, r.text
        return r.json()["token"]

    def delete_user(self, name: str) -> None:
        r = self.hub("DELETE", f"users/{name}")
        assert r.status_code == 204, r.text

    def api(self, token: str, method: str, path: str, **kwargs) -> requests.Response:
        return requests.request(
            method,
            self.service + path,
            headers={"Authorization": f"token {token}"},
            timeout=90,
            **kwargs,
        )

    def folder(self, name: str) -> Path:
        return user_folder(self.storage, name)

    def deleted(self) -> list[dict]:
        r = self.api(self.root, "GET", "dashboard/users")
        assert r.status_code == 200, r.text
        assert r.json()["on_delete"] == self.on_delete
        return r.json()["deleted"]

    def jobs_of_everyone(self) -> list[dict]:
        r = self.api(self.root, "GET", "jobs", params={"limit": 200})
        assert r.status_code == 200, r.text
        return r.json()["jobs"]


@contextmanager
def running(tmp: Path, on_delete: str, hub_extra: str = "", **extra: object) -> Iterator[Hub]:
    """A hub whose job service retires users as ``on_delete`` says; ``extra`` adds
    sections of nbjobs.yaml, ``hub_extra`` lines of jupyterhub_config.py."""
    port, hub_port, service_port = free_port(), free_port(), free_port()
    admin_token = secrets.token_hex(16)
    config = {
        "storage": {"root": str(tmp / "home")},
        "database": {"url": f"sqlite:///{tmp}/jobs.sqlite"},
        "backend": {"kind": "local", "local": {"gpus": [], "cpu_slots": 1}},
        "flavors": [{"name": "cpu", "gpus": 0}],
        "notifications": {"webhook": {"allowed_hosts": ["hooks.example.org"]}},
        "users": {"on_delete": on_delete, "check_every": 5},
        **extra,
    }
    (tmp / "nbjobs.yaml").write_text(yaml.safe_dump(this_runs(config)))
    hub_config = HUB_CONFIG.format(
        config=str(tmp / "nbjobs.yaml"), service_port=service_port, admin_token=admin_token
    )
    hub_config += hub_extra
    with running_hub(tmp, basics(tmp, port, hub_port) + hub_config, port) as url:
        yield Hub(url, admin_token, tmp, on_delete)


@pytest.fixture(scope="module", params=["archive", "remove"])
def hub(request, tmp_path_factory):
    with running(tmp_path_factory.mktemp(f"deleted-{request.param}"), request.param) as hub:
        yield hub


@pytest.fixture(scope="module")
def quiet_hub(tmp_path_factory):
    """An archiving hub whose service's rounds are an hour apart (so only what a test
    does retires anyone) and whose schedules tick every second; its servers run as
    root, which jupyter-server refuses without being told (no OS accounts here)."""
    with running(
        tmp_path_factory.mktemp("deleted-quiet"),
        "archive",
        hub_extra='c.Spawner.args = ["--allow-root"]\n',
        users={"on_delete": "archive", "check_every": 3600},
        schedules={"check_every": 1},
    ) as hub:
        yield hub


def leave_work(hub: Hub, name: str, token: str) -> dict[str, str]:
    """What a user leaves behind: a file, a job still running, a nightly schedule and
    notification settings; their ids."""
    folder = hub.folder(name)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "private-notes.txt").write_text(f"{name}'s thesis draft")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [nbformat.v4.new_code_cell("import time\ntime.sleep(600)")]
    nbformat.write(nb, folder / "train.ipynb")
    job = hub.api(token, "POST", "jobs", json={"path": "train.ipynb", "flavor": "cpu"})
    assert job.status_code == 201, job.text
    definition = hub.api(
        token,
        "POST",
        "definitions",
        json={"path": "train.ipynb", "flavor": "cpu", "schedule": {"cron": "0 3 * * *"}},
    )
    assert definition.status_code == 201, definition.text
    settings = hub.api(
        token,
        "PUT",
        "notifications/settings",
        json={"webhook": f"https://hooks.example.org/{name}", "on": ["failed"]},
    )
    assert settings.status_code == 200, settings.text
    return {"job": job.json()["id"], "definition": definition.json()["id"]}


def sees_nothing_of_before(hub: Hub, token: str, name: str) -> None:
    """The user behind ``token`` finds no job, schedule, setting or file of the earlier
    person of their name."""
    jobs = hub.api(token, "GET", "jobs")
    assert jobs.status_code == 200, jobs.text
    assert jobs.json()["jobs"] == []
    definitions = hub.api(token, "GET", "definitions")
    assert definitions.json()["definitions"] == []
    settings = hub.api(token, "GET", "notifications/settings")
    assert settings.json()["settings"] == []
    assert not (hub.folder(name) / "private-notes.txt").exists()
    assert not (hub.folder(name) / "train.ipynb").exists()


def test_a_user_made_again_under_the_same_name_inherits_nothing(hub):
    ada = hub.make_user("ada")
    left = leave_work(hub, "ada", ada)

    hub.delete_user("ada")
    new_ada = hub.make_user("ada")

    # her first call: the earlier ada is retired before she sees anything
    sees_nothing_of_before(hub, new_ada, "ada")
    [retired] = [d for d in hub.deleted() if d["name"] == "ada"]
    assert retired["why"].startswith("made again in the hub")
    assert retired["action"] == hub.on_delete
    assert (retired["jobs"], retired["definitions"], retired["settings"]) == (1, 1, 1)
    assert retired["cancelled"] == 1
    archived = [j for j in hub.jobs_of_everyone() if j["id"] == left["job"]]
    if hub.on_delete == "archive":
        # the admin still has every record, under a name no hub user can have
        assert retired["archived_as"].startswith("ada/deleted-")
        [job] = archived
        assert job["user"] == retired["archived_as"]
        assert job["state"] == "cancelled"
        old = hub.api(hub.root, "GET", f"definitions/{left['definition']}")
        assert old.status_code == 200, old.text
        assert old.json()["paused"] is True
        kept = Path(retired["folder"])
        assert (kept / "private-notes.txt").read_text() == "ada's thesis draft"
        assert kept.parent.stat().st_mode & 0o077 == 0  # the service's alone
        log = hub.api(hub.root, "GET", f"jobs/{left['job']}/logs")
        assert log.status_code == 200, log.text
    else:
        assert archived == []
        assert hub.api(hub.root, "GET", f"definitions/{left['definition']}").status_code == 404
        assert retired["folder"] is None
        assert not list((hub.tmp / "home").glob(".nbjobs-deleted/*"))


def test_a_user_deleted_in_the_hub_is_retired_by_the_next_round(hub):
    bob = hub.make_user("bob")
    left = leave_work(hub, "bob", bob)

    hub.delete_user("bob")

    # nobody calls as bob any more: the service's rounds (every 5 s here) notice
    deadline = time.monotonic() + 60
    while not [d for d in hub.deleted() if d["name"] == "bob"]:
        assert time.monotonic() < deadline, "bob's deletion was not noticed"
        time.sleep(1)
    [retired] = [d for d in hub.deleted() if d["name"] == "bob"]
    assert retired["why"] == "deleted in the hub"
    assert not (hub.folder("bob") / "private-notes.txt").exists()
    [job] = [j for j in hub.jobs_of_everyone() if j["id"] == left["job"]] or [None]
    if hub.on_delete == "archive":
        assert job is not None
        assert job["user"] == retired["archived_as"]
    else:
        assert job is None
    # a new bob, made later, finds nothing either
    sees_nothing_of_before(hub, hub.make_user("bob"), "bob")


def test_an_admin_deletes_a_user_on_the_dashboard(hub):
    eve = hub.make_user("eve")
    leave_work(hub, "eve", eve)

    refused = hub.api(eve, "DELETE", "dashboard/users/ada")
    assert refused.status_code == 403
    assert "for nbjobs admins" in refused.json()["message"]
    hubs_own = hub.api(hub.root, "DELETE", "dashboard/users/hubadmin")
    assert hubs_own.status_code == 403
    assert "only the hub's admin page deletes them" in hubs_own.json()["message"]
    nobody = hub.api(hub.root, "DELETE", "dashboard/users/nobody-here")
    assert nobody.status_code == 404
    assert nobody.json()["message"] == "the hub has no user 'nobody-here', and nbjobs knows none"
    done = hub.api(hub.root, "DELETE", "dashboard/users/eve")

    assert done.status_code == 200, done.text
    assert done.json()["why"] == "deleted by root through nbjobs"
    assert hub.hub("GET", "users/eve").status_code == 404  # gone from the hub, tokens too
    # her token, which the service may have had the hub's word on for a few seconds,
    # makes nothing of hers again
    deadline = time.monotonic() + 30
    while (late := hub.api(eve, "GET", "jobs")).status_code == 200:
        assert late.json()["jobs"] == []
        assert time.monotonic() < deadline, "the deleted eve's token still works"
        time.sleep(0.5)
    assert late.status_code == 401
    sees_nothing_of_before(hub, hub.make_user("eve"), "eve")


def test_a_schedule_of_the_earlier_person_never_runs_as_the_new_one(quiet_hub):
    """Nobody calls as the new sid and the service's rounds are an hour apart: the
    schedule's own next tick finds that its owner is someone else now."""
    hub = quiet_hub
    sid = hub.make_user("sid")
    folder = hub.folder("sid")
    folder.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(), folder / "every-minute.ipynb")
    made = hub.api(
        sid,
        "POST",
        "definitions",
        json={"path": "every-minute.ipynb", "flavor": "cpu", "schedule": {"cron": "* * * * *"}},
    )
    assert made.status_code == 201, made.text
    definition = made.json()["id"]

    hub.delete_user("sid")
    hub.make_user("sid")  # the new sid, who has not called nbjobs yet

    # retiring pauses the definitions first and writes its record last: the record
    # is what says it is over
    deadline = time.monotonic() + 120
    while not (deleted := [d for d in hub.deleted() if d["name"] == "sid"]):
        assert time.monotonic() < deadline, "the schedule's tick retired nobody"
        time.sleep(1)
    assert hub.api(hub.root, "GET", f"definitions/{definition}").json()["paused"] is True
    [retired] = deleted
    assert retired["why"].startswith("made again in the hub")
    assert [j for j in hub.jobs_of_everyone() if j["user"] == "sid"] == []


def test_a_server_started_first_by_a_new_person_of_a_name_holds_nothing_of_the_earlier(
    quiet_hub,
):
    """A user deleted and made again who starts a notebook server before anything else
    (no call to nbjobs yet, the service's round an hour away) starts in a folder of
    their own, not the earlier person's: the spawner introduces them to the job service
    first, which retires the earlier person then."""
    hub = quiet_hub
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
    try:
        deadline = time.monotonic() + 90
        while not server_ready(hub.url, as_ada):
            assert time.monotonic() < deadline, "ada's server did not start"
            time.sleep(0.5)
        listed = requests.get(f"{hub.url}/user/ada/api/contents", headers=as_ada, timeout=60)
        assert listed.status_code == 200, listed.text
        names = [item["name"] for item in listed.json()["content"]]
        retired = [d for d in hub.deleted() if d["name"] == "ada"]
    finally:
        requests.delete(f"{hub.url}/hub/api/users/ada/server", headers=as_ada, timeout=60)

    assert "private-notes.txt" not in names
    assert not (hub.folder("ada") / "private-notes.txt").exists()
    assert len(retired) == 1
    assert retired[0]["why"].startswith("made again in the hub")


def server_ready(url: str, headers: dict[str, str]) -> bool:
    ada = requests.get(f"{url}/hub/api/users/ada", headers=headers, timeout=30).json()
    return bool(ada["servers"].get("", {}).get("ready"))

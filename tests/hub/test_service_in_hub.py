"""The job service as a real JupyterHub-managed service: hub tokens, groups, RBAC scopes."""

from __future__ import annotations

import json
import secrets
import time

import nbformat
import psutil
import pytest
import requests
import yaml

from nbjobs.storage import escape_username

from .hubproc import basics, free_port, running_hub

HUB_CONFIG = """
import sys
c.Authenticator.allowed_users = {{"ada", "bob", "root", "op"}}
c.Authenticator.admin_users = {{"root"}}
c.JupyterHub.load_groups = {{"staff": {{"users": ["bob"]}}}}
c.JupyterHub.custom_scopes = {{
    "custom:nbjobs:admin": {{"description": "see and manage everyone's nbjobs jobs"}},
    "custom:nbjobs:submit": {{"description": "submit notebooks as nbjobs jobs"}},
}}
c.JupyterHub.load_roles = [
    # every user may reach the service (what configure() grants); submitting needs more here
    {{"name": "user", "scopes": ["self", "access:services!service=nbjobs"]}},
    {{"name": "nbjobs-operators", "users": ["op"], "scopes": ["custom:nbjobs:admin"]}},
    {{"name": "nbjobs-users", "groups": ["staff"], "scopes": ["custom:nbjobs:submit"]}},
    {{"name": "token-maker", "services": ["test-admin"], "scopes": ["tokens", "admin:users"]}},
]
c.JupyterHub.services = [
    {{
        "name": "nbjobs",
        "url": "http://127.0.0.1:{service_port}",
        "command": [
            sys.executable, "-m", "nbjobs.cli", "service", "--config", "{tmp}/nbjobs.yaml",
            "--HubTokenAuth.require_submit_scope=True",
        ],
        "display": False,
    }},
    {{"name": "test-admin", "api_token": "{admin_token}"}},
]
"""


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hub")
    port, hub_port, service_port = free_port(), free_port(), free_port()
    admin_token = secrets.token_hex(16)
    (tmp / "nbjobs.yaml").write_text(
        yaml.safe_dump(
            {
                "storage": {"root": str(tmp / "home")},
                "database": {"url": f"sqlite:///{tmp}/jobs.sqlite"},
                "backend": {"local": {"gpus": [], "cpu_slots": 2}},
                "flavors": [
                    {"name": "cpu", "gpus": 0},
                    {"name": "staff-cpu", "gpus": 0, "groups": ["staff"]},
                ],
            }
        )
    )
    config = HUB_CONFIG.format(service_port=service_port, admin_token=admin_token, tmp=tmp)
    with running_hub(tmp, basics(tmp, port, hub_port) + config, port) as url:
        admin = {"Authorization": f"token {admin_token}"}
        tokens = {}
        for user in ("ada", "bob", "root", "op"):
            requests.post(f"{url}/hub/api/users/{user}", headers=admin, timeout=30)
            r = requests.post(
                f"{url}/hub/api/users/{user}/tokens", headers=admin, json={"note": "t"}, timeout=30
            )
            r.raise_for_status()
            tokens[user] = str(r.json()["token"])
        yield url + "/services/nbjobs/api/", tokens, tmp / "home"


def api(hub, user, method, path, **kwargs):
    url, tokens, _ = hub
    headers = {"Authorization": f"token {tokens[user]}"} if user else {}
    return requests.request(method, url + path, headers=headers, timeout=60, **kwargs)


def test_the_hub_token_says_who_is_calling(hub):
    assert api(hub, "ada", "GET", "health").json()["user"] == "ada"
    assert api(hub, None, "GET", "health").status_code == 401
    wrong = requests.get(hub[0] + "jobs", headers={"Authorization": "token nope"}, timeout=30)
    assert wrong.status_code == 401


def test_groups_come_from_the_hub(hub):
    ada = [f["name"] for f in api(hub, "ada", "GET", "flavors").json()]
    bob = [f["name"] for f in api(hub, "bob", "GET", "flavors").json()]

    assert "staff-cpu" not in ada
    assert "staff-cpu" in bob


def test_jobs_belong_to_the_token_owner_and_admins_come_from_hub_rbac(hub):
    home = hub[2] / escape_username("bob")
    home.mkdir(parents=True, exist_ok=True)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("print('bob was here')")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nbformat.write(nb, home / "b.ipynb")

    job = api(hub, "bob", "POST", "jobs", json={"path": "b.ipynb", "flavor": "cpu"}).json()
    deadline = time.monotonic() + 90
    while api(hub, "bob", "GET", f"jobs/{job['id']}").json()["state"] != "succeeded":
        assert time.monotonic() < deadline
        time.sleep(0.3)

    assert job["user"] == "bob"
    # root is a hub admin; op holds the custom:nbjobs:admin scope through a role.
    assert api(hub, "root", "GET", f"jobs/{job['id']}").status_code == 200
    assert api(hub, "op", "GET", "jobs", params={"user": "bob"}).json()["total"] == 1
    # Plain users cannot look at others' jobs.
    assert api(hub, "ada", "GET", f"jobs/{job['id']}").status_code == 404
    assert api(hub, "ada", "GET", "jobs", params={"user": "bob"}).status_code == 403


def test_submitting_can_require_the_custom_submit_scope(hub):
    home = hub[2] / escape_username("ada")
    home.mkdir(parents=True, exist_ok=True)
    nb = nbformat.v4.new_notebook()
    nbformat.write(nb, home / "a.ipynb")

    refused = api(hub, "ada", "POST", "jobs", json={"path": "a.ipynb", "flavor": "cpu"})

    assert refused.status_code == 403
    assert "lacks the custom:nbjobs:submit scope" in refused.json()["message"]
    assert api(hub, "ada", "GET", "jobs").status_code == 200  # reading is still allowed


def test_a_job_gets_none_of_the_hub_credentials_of_the_service(hub):
    # The hub starts the service with its own token (JUPYTERHUB_API_TOKEN and
    # JPY_API_TOKEN, which can create users and groups) and the hub's URLs.
    tmp = hub[2].parent
    service = next(
        p
        for p in psutil.process_iter(["cmdline"])
        if "service" in (p.info["cmdline"] or []) and f"{tmp}/nbjobs.yaml" in p.info["cmdline"]
    )
    service_env = service.environ()
    secrets = {n: v for n, v in service_env.items() if n.startswith(("JUPYTERHUB_", "JPY_"))}
    assert service_env["JUPYTERHUB_API_TOKEN"] == service_env["JPY_API_TOKEN"]
    home = hub[2] / escape_username("bob")
    home.mkdir(parents=True, exist_ok=True)
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "import json, os\njson.dump(dict(os.environ), open('env-seen.json', 'w'))"
        )
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nbformat.write(nb, home / "env.ipynb")

    job = api(hub, "bob", "POST", "jobs", json={"path": "env.ipynb", "flavor": "cpu"}).json()
    deadline = time.monotonic() + 90
    while (state := api(hub, "bob", "GET", f"jobs/{job['id']}").json()["state"]) != "succeeded":
        assert state not in ("failed", "cancelled", "timed_out")
        assert time.monotonic() < deadline
        time.sleep(0.3)

    seen = (home / "env-seen.json").read_text()
    env = json.loads(seen)
    assert [n for n in env if n.startswith(("JUPYTERHUB_", "JPY_API"))] == []
    assert [n for n, value in secrets.items() if len(value) > 8 and value in seen] == []
    assert env["HOME"] == str(home)

"""hub_config's ``configure(c)`` in JupyterHub's MockHub: the service, its roles and scopes.

What an admin relies on after starting the hub: the job service is registered
(and started) by the hub, nbjobs' custom scopes exist, the roles that carry them
are in the hub's database with the right members, and a person's token gets
exactly the nbjobs powers their role gives (submit; teach; administer).
"""

from __future__ import annotations

import asyncio
import time

import pytest
from jupyterhub import orm, scopes
from jupyterhub.tests.utils import api_request, async_requests, auth_header, public_url
from nbjobs.hub_config.setup import CUSTOM_SCOPES, SERVICE_NAME, SERVICE_SCOPES

from tests.machine import this_runs

NBJOBS_SCOPES = set(CUSTOM_SCOPES)


@pytest.fixture(scope="module")
def nbjobs_yaml():
    return this_runs(
        {
            "backend": {"kind": "local", "local": {"gpus": [], "cpu_slots": 1}},
            "flavors": [{"name": "cpu", "display_name": "CPU only", "gpus": 0}],
            "teachers": {"users": ["tess"]},
            "admin": {"users": ["ada"]},
            "classes": [{"name": "ml101", "teachers": ["tess"], "students": ["stu"]}],
        }
    )


async def token_scopes(app, name: str) -> set[str]:
    """The scopes the hub reports for a fresh token of ``name`` (GET /hub/api/user)."""
    response = await api_request(app, "user", headers=auth_header(app.db, name))
    assert response.status_code == 200, response.text
    return set(response.json()["scopes"])


async def test_the_hub_starts_with_nbjobs_roles_scopes_and_service(app):
    # the custom scopes, with the descriptions admins see in the hub's role pages
    for scope, definition in CUSTOM_SCOPES.items():
        assert scopes.scope_definitions[scope]["description"] == definition["description"]

    # the roles are in the hub's database, holding the scopes and the people nbjobs.yaml names
    roles = {role.name: role for role in app.db.query(orm.Role)}
    assert "custom:nbjobs:submit" in roles["user"].scopes
    service_role = roles["nbjobs-service"]
    assert sorted(service_role.scopes) == sorted(SERVICE_SCOPES)
    assert [s.name for s in service_role.services] == [SERVICE_NAME]
    assert set(roles["nbjobs-teachers"].scopes) == {"custom:nbjobs:teach", "custom:nbjobs:submit"}
    assert [u.name for u in roles["nbjobs-teachers"].users] == ["tess"]
    assert set(roles["nbjobs-admins"].scopes) == {"custom:nbjobs:admin", "custom:nbjobs:submit"}
    assert [u.name for u in roles["nbjobs-admins"].users] == ["ada"]
    # the class is a hub group of its own namespace holding its roster
    assert orm.Group.find(app.db, "ml101") is None
    group = orm.Group.find(app.db, "nbjobs-class-ml101")
    assert sorted(u.name for u in group.users) == ["stu", "tess"]

    # each person's token carries exactly the nbjobs powers of their role
    assert await token_scopes(app, "stu") & NBJOBS_SCOPES == {"custom:nbjobs:submit"}
    assert await token_scopes(app, "tess") & NBJOBS_SCOPES == {
        "custom:nbjobs:submit",
        "custom:nbjobs:teach",
    }
    assert await token_scopes(app, "ada") & NBJOBS_SCOPES == {
        "custom:nbjobs:submit",
        "custom:nbjobs:admin",
    }

    # the admin sees the service in the hub's API, with its role
    response = await api_request(app, "services", SERVICE_NAME)
    assert response.status_code == 200, response.text
    service = response.json()
    assert service["roles"] == ["nbjobs-service"]
    assert service["prefix"] == f"/@/space%20word/services/{SERVICE_NAME}/"
    assert service["command"][-3:-1] == ["service", "--config"]

    # the hub started the job service; a student's token reaches it through the hub's proxy
    url = public_url(app, path=f"services/{SERVICE_NAME}/api/flavors")
    headers = auth_header(app.db, "stu")
    deadline = time.monotonic() + 60
    while True:
        response = await async_requests.get(url, headers=headers)
        if response.status_code == 200 or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.3)
    assert response.status_code == 200, response.text
    assert "cpu" in response.text


async def test_a_new_user_may_submit_but_not_teach_or_administer(app):
    created = await api_request(app, "users", "newcomer", method="post")
    assert created.status_code == 201, created.text
    assert await token_scopes(app, "newcomer") & NBJOBS_SCOPES == {"custom:nbjobs:submit"}
    # and the hub says so when asked about the user (the admin's view)
    model = (await api_request(app, "users", "newcomer")).json()
    assert model["roles"] == ["user"]


async def test_servers_are_told_the_job_service_address_under_the_hubs_base_url(app):
    assert (await api_request(app, "users", "basil", method="post")).status_code == 201
    assert app.base_url != "/"
    env = app.users["basil"].spawner.get_env()
    assert env["NBJOBS_URL"].endswith(f"{app.base_url}services/{SERVICE_NAME}/")

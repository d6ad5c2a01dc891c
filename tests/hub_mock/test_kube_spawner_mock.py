"""nbjobs' Kubernetes spawner in JupyterHub's MockHub: the profiles each user is offered.

hub_config's ``configure(c)`` on a Kubernetes nbjobs.yaml makes
``NbjobsKubeSpawner`` the hub's spawner (the job service runs elsewhere, so the
hub only routes to it). No Kubernetes API server runs here, so these tests stop
where the hub answers without one: the options form a user sees on the spawn
page, and the hub's answer to a spawn asking for a profile that user was not
offered, which is refused before any call to Kubernetes.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from jupyterhub.tests.utils import api_request, get_page
from nbjobs.spawner.kubernetes import NbjobsKubeSpawner

PROFILES = {
    "small": "Small (1 CPU, 2 GiB)",
    "large": "Large (4 CPU, 16 GiB), staff",
    "ml101": "ML 101 class server",
}


class _NoToken(BaseHTTPRequestHandler):
    """What the job service answers a request without a token (the hub checks it is up)."""

    def do_GET(self) -> None:
        self.send_response(401)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def hub_env():
    """The job service runs elsewhere (its own Deployment): here, a stand-in on loopback."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NoToken)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield {
        "NBJOBS_SERVICE_URL_EXTERNAL": f"http://127.0.0.1:{server.server_port}/",
        "NBJOBS_SERVICE_API_TOKEN": "the-job-services-token",
    }
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def nbjobs_yaml():
    return {
        "storage": {
            "user_dir": "home/{username}",
            "volume": {"nfs": {"server": "nfs.example.org", "path": "/export/nbjobs"}},
        },
        "backend": {"kind": "kubernetes"},
        "profiles": [
            {"name": "small", "display_name": PROFILES["small"], "default": True},
            {
                "name": "large",
                "display_name": PROFILES["large"],
                "cpu": "4",
                "memory": "16Gi",
                "groups": ["staff"],
            },
            {"name": "ml101", "display_name": PROFILES["ml101"], "groups": ["ml101"]},
        ],
    }


async def add_user_in_group(app, name: str, group: str) -> None:
    """Create the user and the group with them in it, through the hub's API (as an admin)."""
    assert (await api_request(app, "users", name, method="post")).status_code == 201
    created = await api_request(app, "groups", group, method="post", json={"users": [name]})
    assert created.status_code == 201, created.text


@pytest.mark.parametrize(
    ("group", "offered"),
    [("staff", ["small", "large"]), ("ml101", ["small", "ml101"])],
)
async def test_the_spawn_page_offers_only_the_profiles_of_the_users_groups(app, group, offered):
    name = f"in-{group}"
    await add_user_in_group(app, name, group)
    assert isinstance(app.users[name].spawner, NbjobsKubeSpawner)

    cookies = await app.login_user(name)
    page = await get_page("spawn", app, cookies=cookies)
    assert page.status_code == 200, page.text
    for slug, display_name in PROFILES.items():
        assert (display_name in page.text) == (slug in offered), (slug, page.text)


@pytest.mark.parametrize("profile", ["large", "huge"])
async def test_a_profile_not_offered_is_a_400_that_lists_the_users_profiles(app, profile):
    await add_user_in_group(app, "student", "ml101")

    # the user asks for it themselves, with their own token, through the hub's API
    response = await api_request(
        app, "users", "student", "server", method="post", json={"profile": profile}, name="student"
    )
    assert response.status_code == 400, response.text
    message = response.json()["message"]
    assert f"No such profile: {profile}" in message
    assert message.endswith("the profiles you may choose are: small, ml101")

    # and nothing was left starting: the user can pick again
    model = (await api_request(app, "users", "student")).json()
    assert model["servers"] == {}
    assert model["pending"] is None

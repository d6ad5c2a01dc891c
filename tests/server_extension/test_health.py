"""The Lab extension's first call: is the server side there, and is it guarded."""

from __future__ import annotations

from importlib.metadata import version


def test_health_answers_with_the_version_and_mode(server):
    response = server.get("nbjobs/api/health")

    assert response.status_code == 200
    body = response.json()
    assert body["version"] == version("nbjobs")
    assert body["status"] == "ok"
    assert body["mode"] == "local"


def test_every_route_needs_the_servers_token(server):
    for method, path in [
        ("GET", "nbjobs/api/health"),
        ("GET", "nbjobs/api/jobs"),
        ("POST", "nbjobs/api/jobs"),
        ("GET", "nbjobs/api/flavors"),
        ("POST", "nbjobs/api/jobs/abc/cancel"),
        ("DELETE", "nbjobs/api/jobs/abc"),
    ]:
        assert server.request(method, path, token="").status_code == 403, (method, path)
        assert server.request(method, path, token="wrong").status_code == 403, (method, path)

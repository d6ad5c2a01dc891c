"""The Lab extension's first call: is the server side there, and is it guarded."""

from __future__ import annotations

from importlib.metadata import version


def test_health_answers_with_the_version(server):
    response = server.get("nbjobs/api/health")

    assert response.status_code == 200
    assert response.json() == {"status": "ok", "version": version("nbjobs")}


def test_health_needs_a_token(server):
    assert server.get("nbjobs/api/health", token="").status_code == 403
    assert server.get("nbjobs/api/health", token="wrong").status_code == 403

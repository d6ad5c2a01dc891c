"""Hub tokens at the job service end when the hub says they end.

JupyterHub's HubAuth keeps its answer for a token five minutes by default, so a
revoked or expired token went on working that long. The service keeps the
answer for ``HubTokenAuth.cache_seconds`` (5 s) at most.
"""

from __future__ import annotations

import time

import requests

from .test_service_in_hub import hub  # noqa: F401 (the module's real hub, as a fixture)

#: the service's default cache_seconds, and slack for a busy machine (HubAuth's own
#: cache would keep a token 300 s)
CACHE = 5.0
SLACK = 15.0


def _hub_api(hub, method, path, **kwargs):  # noqa: F811
    services_url, tokens, _ = hub
    base = services_url.split("/services/nbjobs/")[0]
    headers = {"Authorization": f"token {tokens['root']}"}  # a hub admin
    return requests.request(method, f"{base}/hub/api/{path}", headers=headers, timeout=30, **kwargs)


def _health(hub, token):  # noqa: F811
    return requests.get(
        hub[0] + "health", headers={"Authorization": f"token {token}"}, timeout=30
    ).status_code


def _seconds_until_refused(hub, token, limit):  # noqa: F811
    start = time.monotonic()
    while _health(hub, token) != 401:
        assert time.monotonic() - start < limit, f"token still accepted after {limit:.0f} s"
        time.sleep(0.2)
    return time.monotonic() - start


def test_a_revoked_token_stops_working_within_seconds(hub):  # noqa: F811
    made = _hub_api(hub, "POST", "users/ada/tokens", json={"note": "to revoke"})
    made.raise_for_status()
    token, token_id = made.json()["token"], made.json()["id"]
    assert _health(hub, token) == 200  # the service now holds the hub's answer

    _hub_api(hub, "DELETE", f"users/ada/tokens/{token_id}").raise_for_status()
    took = _seconds_until_refused(hub, token, CACHE + SLACK)
    assert took <= CACHE + SLACK


def test_an_expired_token_stops_working_within_seconds(hub):  # noqa: F811
    made = _hub_api(hub, "POST", "users/ada/tokens", json={"note": "short", "expires_in": 2})
    made.raise_for_status()
    token = made.json()["token"]
    made_at = time.monotonic()
    assert _health(hub, token) == 200
    _seconds_until_refused(hub, token, 2 + CACHE + SLACK)
    assert time.monotonic() - made_at <= 2 + CACHE + SLACK


def test_a_new_token_works_at_once_after_a_refusal(hub):  # noqa: F811
    """A refusal is not kept: a token the hub has just made is not refused from memory."""
    assert _health(hub, "not-yet-a-token") == 401
    made = _hub_api(hub, "POST", "users/ada/tokens", json={"note": "fresh"})
    made.raise_for_status()
    assert _health(hub, made.json()["token"]) == 200


def test_a_token_made_for_something_else_is_no_key_to_nbjobs(hub):  # noqa: F811
    """The attack: a token with only read:users:name!user=ada submitted, changed settings
    and listed jobs. Now it is a 403 that names the scopes it lacks."""
    narrow = _hub_api(
        hub,
        "POST",
        "users/ada/tokens",
        json={"note": "narrow", "scopes": ["read:users:name!user=ada"]},
    )
    narrow.raise_for_status()
    full = _hub_api(hub, "POST", "users/ada/tokens", json={"note": "as the Token page makes it"})
    full.raise_for_status()
    headers = {"Authorization": f"token {narrow.json()['token']}"}

    listed = requests.get(hub[0] + "jobs", headers=headers, timeout=30)
    submitted = requests.post(
        hub[0] + "jobs", headers=headers, json={"path": "x.ipynb", "flavor": "cpu"}, timeout=30
    )
    settings = requests.put(
        hub[0] + "notifications/settings", headers=headers, json={"email": None}, timeout=30
    )

    for answer in (listed, submitted, settings):
        assert answer.status_code == 403, answer.text
        assert answer.json()["message"] == (
            "this token may not use nbjobs: it holds neither custom:nbjobs:submit nor "
            "access:services!service=nbjobs; make one with those scopes (the hub's Token page "
            "gives them by default) or use your notebook server's"
        )
    assert _health(hub, full.json()["token"]) == 200  # a token as users make them works

"""No verb of any route of the extension answers a caller jupyter-server has not
authenticated, and a browser's cookie alone cannot change anything (XSRF)."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from importlib.metadata import version
from typing import Any

import pytest
import requests
from nbjobs.server_extension import handlers
from tornado import web

from .test_jobs import wait_ready

#: the code object every ``@web.authenticated`` wrapper runs
AUTHENTICATED_CODE = web.authenticated(lambda self: None).__code__
VERBS = ("get", "post", "put", "patch", "delete", "head", "options")


def extension_routes() -> list[tuple[str, type[web.RequestHandler]]]:
    """What ``setup_handlers`` mounts, exactly as jupyter-server receives it."""
    mounted: list[tuple[str, type[web.RequestHandler]]] = []

    class WebApp:
        settings: dict[str, Any] = {"base_url": "/user/ada/"}

        def add_handlers(self, host: str, rules: list[tuple[str, Any]]) -> None:
            mounted.extend(rules)

    handlers.setup_handlers(WebApp(), handlers.Upstream(None, None, mode="local"))
    return mounted


def verbs_of(cls: type[web.RequestHandler]) -> dict[str, Any]:
    """The verbs a handler class answers: the ones it (or a base of ours) overrides."""
    return {
        verb: getattr(cls, verb)
        for verb in VERBS
        if getattr(cls, verb) is not getattr(web.RequestHandler, verb)
        and getattr(cls, verb) is not getattr(handlers.APIHandler, verb, None)
    }


def test_the_walk_sees_every_handler_and_verb():
    routes = extension_routes()

    found = {cls.__name__: sorted(verbs_of(cls)) for _, cls in routes}

    # A new handler or verb shows up here first; the test below then guards it.
    assert found == {
        "HealthHandler": ["get"],
        "ForwardHandler": ["delete", "get", "patch", "post", "put"],
        "TrustHandler": ["post"],
    }
    in_module = {
        obj
        for obj in vars(handlers).values()
        if inspect.isclass(obj)
        and issubclass(obj, web.RequestHandler)
        and obj.__module__ == handlers.__name__
    }
    # shared bases (a leading underscore) are mounted only through their subclasses,
    # and answer no verb of their own
    bases = {cls for cls in in_module if cls.__name__.startswith("_")}
    assert all(not verbs_of(cls) for cls in bases)
    assert in_module - bases == {cls for _, cls in routes}, "a handler class is not mounted"


@pytest.mark.parametrize(
    ("cls", "verb"),
    [(cls, verb) for _, cls in extension_routes() for verb in verbs_of(cls)],
    ids=lambda v: v if isinstance(v, str) else v.__name__,
)
def test_every_verb_of_every_handler_is_web_authenticated(cls, verb):
    method = getattr(cls, verb)

    assert method.__code__ is AUTHENTICATED_CODE, f"{cls.__name__}.{verb} lacks @web.authenticated"


def test_no_verb_of_any_route_answers_without_credentials(server):
    for path in (
        "nbjobs/api/health",
        "nbjobs/api/jobs",
        "nbjobs/api/jobs/abc/cancel",
        "nbjobs/api/jobs/0123456789ab/trust",
    ):
        for verb in ("GET", "POST", "PATCH", "DELETE", "PUT"):
            for token in ("", "wrong"):
                response = server.request(verb, path, token=token, json={})

                # 403 even for a verb no handler answers: refused before any of our code;
                # a GET of the trust route (POST only) is tornado's 405, equally early
                expected = 405 if (verb, path.rsplit("/", 1)[-1]) == ("GET", "trust") else 403
                assert response.status_code == expected, (verb, path, token, response.text)


def browser_session(server) -> requests.Session:
    """Log in through the login page like a browser: a cookie, and the XSRF cookie."""
    session = requests.Session()
    session.get(f"{server.url}login", timeout=30).raise_for_status()
    login = session.post(
        f"{server.url}login",
        data={"password": server.token, "_xsrf": session.cookies["_xsrf"]},
        allow_redirects=False,
        timeout=30,
    )
    assert login.status_code == 302, login.text
    return session


def test_a_cookie_without_the_xsrf_token_changes_nothing(server):
    wait_ready(server)
    session = browser_session(server)
    assert session.get(f"{server.url}nbjobs/api/health", timeout=30).status_code == 200
    xsrf = {"X-XSRFToken": session.cookies["_xsrf"]}

    for verb, path in [
        ("POST", "nbjobs/api/jobs"),
        ("PATCH", "nbjobs/api/jobs/abc"),
        ("DELETE", "nbjobs/api/jobs/abc"),
        ("POST", "nbjobs/api/jobs/0123456789ab/trust"),
    ]:
        url = f"{server.url}{path}"
        refused = session.request(verb, url, json={"path": "x.ipynb"}, timeout=30)
        allowed = session.request(verb, url, json={"path": "x.ipynb"}, headers=xsrf, timeout=30)

        assert refused.status_code == 403, (verb, path)
        assert "_xsrf" in refused.json()["message"]
        # With the token the request reaches the job service, which answers for itself.
        assert allowed.status_code not in (403, 502, 503), (verb, path, allowed.text)


def test_the_extension_is_listed_enabled_and_validated_ok():
    out = subprocess.run(
        [sys.executable, "-m", "jupyter", "server", "extension", "list"],
        capture_output=True,
        text=True,
        check=True,
    )
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)
    lines = [line.strip() for line in text.splitlines()]

    assert "nbjobs.server_extension enabled" in lines, text
    assert f"nbjobs.server_extension {version('nbjobs')} OK" in lines, text

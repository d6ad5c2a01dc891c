"""Signing in to a real hub (configurable-http-proxy in front) from allowed and other
client addresses, with addresses forged in headers: network.sign_in in nbjobs.yaml."""

from __future__ import annotations

import pytest
import requests
from requests.adapters import HTTPAdapter

from .hubproc import basics, free_port, local_nbjobs_yaml, running_hub


class FromAddress(HTTPAdapter):
    """Connections from a chosen local address (127.0.0.2, 127.0.0.3: other clients)."""

    def __init__(self, address: str) -> None:
        self.address = address
        super().__init__()

    def init_poolmanager(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        kwargs["source_address"] = (self.address, 0)
        super().init_poolmanager(*args, **kwargs)


def sign_in(url: str, address: str, headers: dict[str, str] | None = None) -> requests.Response:
    s = requests.Session()
    s.mount("http://", FromAddress(address))
    s.headers.update(headers or {})  # on the form and its answer, as a forger would
    s.get(f"{url}/hub/login", timeout=30)
    return s.post(
        f"{url}/hub/login",
        data={"username": "ada", "password": "nbjobs", "_xsrf": s.cookies.get("_xsrf")},
        allow_redirects=False,
        timeout=30,
    )


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    folder = tmp_path_factory.mktemp("signin")
    port, hub_port = free_port(), free_port()
    nbjobs_yaml = local_nbjobs_yaml(
        folder,
        # the school's network is 127.0.0.2 here; the hub's own proxy, on 127.0.0.1, is
        # the one proxy believed
        network={"sign_in": {"allow": ["127.0.0.2/32"], "trusted_proxies": ["127.0.0.1/32"]}},
    )
    config = basics(folder, port, hub_port) + (
        f"from nbjobs.hub_config import configure\nconfigure(c, {str(nbjobs_yaml)!r}, "
        f"{free_port()})\n"
    )
    with running_hub(folder, config, port) as url:
        yield url, folder


def test_a_client_on_an_allowed_network_signs_in(hub):
    url, _ = hub
    answer = sign_in(url, "127.0.0.2")
    assert answer.status_code == 302
    assert "/hub/" in answer.headers["Location"]


def test_a_client_elsewhere_is_refused_with_a_page_that_says_why(hub):
    url, folder = hub
    answer = sign_in(url, "127.0.0.3")
    assert answer.status_code == 403
    assert "Signing in from 127.0.0.3 is not allowed" in answer.text
    assert "127.0.0.2/32 only" in answer.text
    assert "refused the sign-in of ada from 127.0.0.3" in (folder / "hub.log").read_text()


def test_an_address_forged_in_headers_gets_nobody_in(hub):
    url, _ = hub
    for forged in (
        {"X-Forwarded-For": "127.0.0.2"},
        {"X-Real-Ip": "127.0.0.2"},
        {"X-Forwarded-For": "127.0.0.2, 127.0.0.2", "X-Real-Ip": "127.0.0.2"},
    ):
        answer = sign_in(url, "127.0.0.3", forged)
        assert answer.status_code == 403, forged
        assert "Signing in from 127.0.0.3" in answer.text

"""HTTP handlers of the server extension."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

import tornado.web
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join


def nbjobs_version() -> str:
    """The installed distribution's version (``0+unknown`` in a bare checkout)."""
    try:
        return version("nbjobs")
    except PackageNotFoundError:
        return "0+unknown"


class HealthHandler(APIHandler):
    """``GET nbjobs/api/health``: lets the Lab extension check the server side is there."""

    @tornado.web.authenticated
    def get(self) -> None:
        self.finish({"status": "ok", "version": nbjobs_version()})


def setup_handlers(web_app: Any) -> None:
    """Mount the handlers under the server's base URL."""
    base = url_path_join(web_app.settings["base_url"], "nbjobs", "api")
    web_app.add_handlers(".*$", [(url_path_join(base, "health"), HealthHandler)])

"""nbjobs' jupyter-server extension: the API the JupyterLab extension talks to.

It serves ``{base_url}nbjobs/api/...``. Loaded by ``jupyter-config`` (installed
with the wheel into ``etc/jupyter/jupyter_server_config.d``).
"""

from __future__ import annotations

from typing import Any

from .handlers import setup_handlers


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    return [{"module": "nbjobs.server_extension"}]


def _load_jupyter_server_extension(server_app: Any) -> None:
    setup_handlers(server_app.web_app)
    server_app.log.info("nbjobs server extension loaded at %snbjobs/api/", server_app.base_url)

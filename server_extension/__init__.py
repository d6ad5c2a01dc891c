"""nbjobs' jupyter-server extension: the API the JupyterLab extension talks to.

It serves ``{base_url}nbjobs/api/...`` and is enabled on install (the wheel
puts ``jupyter-config/server-config/nbjobs.json`` into
``etc/jupyter/jupyter_server_config.d``).

In a JupyterHub user server it forwards to the hub's job service
(``$NBJOBS_URL``, which the spawner sets) with the server's own JupyterHub
token. Without a hub it hosts a job service in-process.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tornado.ioloop import IOLoop

from .handlers import Upstream, nbjobs_version, setup_handlers

#: shown by ``jupyter server extension list`` ("nbjobs.server_extension 0.1.0 OK")
__version__ = nbjobs_version()


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    return [{"module": "nbjobs.server_extension"}]


def _load_jupyter_server_extension(server_app: Any) -> None:
    if os.environ.get("JUPYTERHUB_API_TOKEN"):
        # In a hub: the spawner sets NBJOBS_URL to the job service's address.
        url = os.environ.get("NBJOBS_URL")
        upstream = Upstream(url, os.environ["JUPYTERHUB_API_TOKEN"], mode="hub")
        setup_handlers(server_app.web_app, upstream)
        if url:
            server_app.log.info("nbjobs: forwarding %snbjobs/api/ to %s", server_app.base_url, url)
        else:
            server_app.log.error("nbjobs: NBJOBS_URL is not set; Submit Job cannot work")
        return

    upstream = Upstream(None, None, mode="local")
    setup_handlers(server_app.web_app, upstream)
    root = Path(server_app.root_dir).absolute()

    async def start() -> None:
        from .local import start_local_service

        try:
            server_app.web_app.settings["nbjobs_service"] = await start_local_service(
                root, upstream, server_app.log
            )
        except Exception:
            server_app.log.exception("nbjobs: the single-user job service did not start")

    IOLoop.current().add_callback(start)

"""Single-user mode: no hub, so this server hosts a job service of its own.

One person with one GPU box runs ``jupyter lab`` and gets the whole feature:
the job service runs inside this server's process on a loopback port, with a
token only this process knows, the local backend, SQLite in Jupyter's data
folder, and the server's root folder as the user's folder. ``nbjobs.yaml``
is read from ``$NBJOBS_CONFIG`` or Jupyter's config folder when present;
without it there is a ``cpu`` flavor, and a ``gpu`` flavor (one GPU) when
this machine has GPUs.
"""

from __future__ import annotations

import getpass
import os
import secrets
import socket
from pathlib import Path
from typing import Any

from jupyter_core.paths import jupyter_config_dir, jupyter_data_dir
from nbjobs.job_service.app import api_settings, routes
from nbjobs.job_service.auth import StaticTokenAuth
from nbjobs.job_service.backends.local import LocalBackend, discover_gpus
from nbjobs.job_service.service import JobService, build
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets

from nbjobs.config import Flavor, NbjobsConfig, load_config

from .handlers import Upstream


def single_user_config(root: Path) -> NbjobsConfig:
    """nbjobs.yaml if the user has one, else defaults fitted to this machine."""
    path = os.environ.get("NBJOBS_CONFIG") or os.path.join(jupyter_config_dir(), "nbjobs.yaml")
    if os.path.isfile(path):
        config = load_config(path)
    else:
        flavors = [Flavor(name="cpu", display_name="CPU only", gpus=0)]
        if discover_gpus():
            flavors.append(Flavor(name="gpu", display_name="1 GPU", gpus=1))
        config = NbjobsConfig(flavors=flavors)
    database = config.database
    if database.url == "sqlite:///nbjobs.sqlite":  # the default: keep it out of the user's folder
        folder = Path(jupyter_data_dir()) / "nbjobs"
        folder.mkdir(parents=True, exist_ok=True)
        database = database.model_copy(update={"url": f"sqlite:///{folder / 'jobs.sqlite'}"})
    return config.model_copy(update={"database": database})


async def start_local_service(root: Path, upstream: Upstream, log: Any) -> JobService:
    """Start the in-process job service and point ``upstream`` at it."""
    config = single_user_config(root)
    user = getpass.getuser()
    token = secrets.token_urlsafe(32)
    # given at construction: StaticTokenAuth reads its tokens once, when it is made
    auth = StaticTokenAuth(log=log, tokens={token: user})
    auth.admins = config.admin.model_copy(update={"users": [*config.admin.users, user]})
    backend = LocalBackend(config, log=log)
    service = build(config, backend, log=log, folder_for=lambda _name: root)
    await service.start()
    from tornado import web

    app = web.Application(routes("/"), **api_settings(service, auth))
    sockets = bind_sockets(0, "127.0.0.1", family=socket.AF_INET)
    server = HTTPServer(app)
    server.add_sockets(sockets)
    port = sockets[0].getsockname()[1]
    upstream.url = f"http://127.0.0.1:{port}/"
    upstream.token = token
    log.info("nbjobs: single-user job service on 127.0.0.1:%s for %s (%s)", port, user, root)
    return service

"""A real jupyter-server, started as a user would start it, with nbjobs installed."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.ports import free_port
from tests.waiting import wait_until_answering


@dataclass
class Server:
    url: str
    token: str
    root: Path
    log: Path

    def request(self, method: str, path: str, token: str | None = None, **kwargs: Any):
        headers = {"Authorization": f"token {self.token if token is None else token}"}
        return requests.request(method, f"{self.url}{path}", headers=headers, timeout=60, **kwargs)

    def get(self, path: str, token: str | None = None, **kwargs: Any) -> requests.Response:
        return self.request("GET", path, token, **kwargs)


#: ``jupyter server`` as nbjobs's own single-user servers start it (spawner/singleuser.py):
#: jsonschema's optional format checkers declined first (job_runner/lean_imports.py) and
#: JupyterLab's question to yarn skipped, 2 s of CPU less for each of the servers these
#: tests start; the extension under it is the same. Plain ``jupyter lab`` as a user types
#: it is test_lab_standalone.py's.
LEAN_SERVER = [
    sys.executable,
    "-c",
    "from nbjobs.job_runner.lean_imports import decline_format_checkers as d; d(); "
    "from nbjobs.spawner.singleuser import skip_yarn_registry_lookup as y; y(); "
    "from jupyter_server.serverapp import main; main()",
]


class Servers:
    """jupyter-servers started in ``folder`` (in folders of their own, so that no user
    config leaks in), stopped together by :meth:`close`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[Any] = []

    def start(self, env: dict[str, str] | None = None) -> Server:
        tmp_path = self.folder
        root = tmp_path / "home"
        root.mkdir(exist_ok=True)
        port, token = free_port(), secrets.token_hex(16)
        base_env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTERHUB_")}
        base_env.pop("NBJOBS_URL", None)
        base_env.update(
            JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
            JUPYTER_DATA_DIR=str(tmp_path / "data"),
            JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
            **(env or {}),
        )
        log_path = tmp_path / f"server-{len(self.procs)}.log"
        log = log_path.open("w")
        self.logs.append(log)
        command = [*LEAN_SERVER, "--no-browser", f"--port={port}"]
        command += ["--ip=127.0.0.1", f"--ServerApp.root_dir={root}", "--allow-root"]
        command += [f"--IdentityProvider.token={token}", "--ServerApp.base_url=/user/ada/"]
        proc = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, cwd=root, env=base_env
        )
        self.procs.append(proc)
        url = f"http://127.0.0.1:{port}/user/ada/"
        wait_until_answering(
            f"{url}api/status",
            ready=lambda r: r.status_code in (200, 403),
            process=proc,
            log=log_path,
        )
        return Server(url, token, root, log_path)

    def close(self) -> None:
        for proc in self.procs:
            proc.terminate()
            proc.wait(timeout=30)
        for log in self.logs:
            log.close()


@pytest.fixture
def start_server(tmp_path) -> Iterator[Callable[..., Server]]:
    """Start jupyter-servers of the test's own (with the environment given)."""
    servers = Servers(tmp_path)
    yield servers.start
    servers.close()


@pytest.fixture(scope="session")
def _plain_server(tmp_path_factory) -> Iterator[tuple[Server, subprocess.Popen[bytes]]]:
    servers = Servers(tmp_path_factory.mktemp("plain-server"))
    server = servers.start()
    yield server, servers.procs[0]
    servers.close()


@pytest.fixture
def server(_plain_server) -> Server:
    """A jupyter-server without a hub (it hosts its job service), one per test worker for
    every test that needs no server of its own: each start costs seconds of CPU. Tests
    on it name their own notebooks and jobs; what they leave is no other test's subject."""
    server, proc = _plain_server
    assert proc.poll() is None, f"the shared jupyter-server has stopped: {server.log.read_text()}"
    return server

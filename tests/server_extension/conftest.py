"""A real jupyter-server, started as a user would start it, with nbjobs installed."""

from __future__ import annotations

import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests


@dataclass
class Server:
    url: str
    token: str
    root: Path

    def get(self, path: str, token: str | None = None, **kwargs) -> requests.Response:
        headers = {"Authorization": f"token {self.token if token is None else token}"}
        return requests.get(f"{self.url}{path}", headers=headers, timeout=30, **kwargs)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def server(tmp_path) -> Iterator[Server]:
    root = tmp_path / "home"
    root.mkdir()
    port, token = free_port(), secrets.token_hex(16)
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter_server",
            "--no-browser",
            f"--port={port}",
            "--ip=127.0.0.1",
            f"--ServerApp.root_dir={root}",
            f"--IdentityProvider.token={token}",
            "--ServerApp.base_url=/user/ada/",
            "--allow-root",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=root,
    )
    url = f"http://127.0.0.1:{port}/user/ada/"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(f"{url}api/status", timeout=2).status_code in (200, 403):
                    break
            except requests.ConnectionError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError((tmp_path / "server.log").read_text())
            time.sleep(0.1)
        yield Server(url, token, root)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()

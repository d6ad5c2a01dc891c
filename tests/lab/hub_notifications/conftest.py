"""One hub and one browser for the Lab tests of notifications and of a job on two nodes.

The usual test hub, with mail to uni.example (an SMTP server of the test's) and
webhooks to the test's receiver, and a flavor of two nodes (2 of its 4 GPUs) with a
notebook that says which rank runs it. Neither test sees the other's settings: the
notifications' fields show in no picture of the two-node test, and its job ends before
any notification is set (the files run in name order: multinode, then notifications).
"""

from __future__ import annotations

import copy
import http.server
import json
import threading
from collections.abc import Iterator
from email import message_from_bytes
from email.message import Message

import nbformat
import pytest
from aiosmtpd.controller import Controller

from ..conftest import HUB_JOBS_CONFIG, Hub, free_port, notebook, run_hub
from ..one_hub import browser, chromium, folder, lab, playwright, starts_afresh  # noqa: F401

HOOK_PORT = free_port()
SMTP_PORT = free_port()

TWO_NODES = {
    "name": "t4x2",
    "display_name": "Two T4 nodes",
    "gpus": 1,
    "gpu_type": "T4",
    "nodes": 2,
    "cpu": "2",
    "memory": "8Gi",
    "time_limit": "30m",
}


class Inbox:
    mails: list[Message] = []

    async def handle_DATA(self, server: object, session: object, envelope: object) -> str:
        Inbox.mails.append(message_from_bytes(envelope.content))  # type: ignore[attr-defined]
        return "250 OK"


class Hook(http.server.BaseHTTPRequestHandler):
    received: list[dict] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        Hook.received.append(json.loads(self.rfile.read(length)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="package")
def hook() -> Iterator[list[dict]]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", HOOK_PORT), Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield Hook.received
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="package")
def inbox() -> Iterator[list[Message]]:
    controller = Controller(Inbox(), hostname="127.0.0.1", port=SMTP_PORT)
    controller.start()
    yield Inbox.mails
    controller.stop()


@pytest.fixture(scope="package")
def hub(tmp_path_factory, hook, inbox) -> Iterator[Hub]:
    """The test hub with mail and webhooks set up, and a flavor of two nodes."""
    config = copy.deepcopy(HUB_JOBS_CONFIG)
    config["notifications"] = {
        "email": {
            "smtp_host": "127.0.0.1",
            "smtp_port": SMTP_PORT,
            "from": "jobs@uni.example",
            "security": "none",
            "allowed_domains": ["uni.example"],
        },
        "webhook": {"allowed_hosts": [f"127.0.0.1:{HOOK_PORT}"], "allow_http": True},
        "first_delay": "1s",
    }
    config["flavors"].append(TWO_NODES)
    config["classes"][0]["flavors"].append(TWO_NODES["name"])
    hubs = run_hub(tmp_path_factory.mktemp("hub"), config)
    hub = next(hubs)
    nbformat.write(
        notebook(
            "import os\n"
            'print("hello from rank", os.environ["RANK"], "of", os.environ["WORLD_SIZE"],'
            ' "via", os.environ["MASTER_ADDR"], flush=True)'
        ),
        hub.home("ada") / "ranks.ipynb",
    )
    yield hub
    next(hubs, None)  # stops it

"""A notebook's live output reaches its owner alone.

The kernels of users' notebook servers once listened on loopback TCP: another student
read the owner's listening ports from /proc/net/tcp, connected a SUB socket to each and
received the owner's cell output as it was printed (reading IOPub needs no key). Now
the kernels of a server under an OS account listen on Unix sockets in that server's own
folder. A real hub, a real server and kernel of one account; the attack run as
another account, while a cell prints.
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import psutil
import pytest
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect

from nbjobs.cgroups import Cgroups
from tests.job_service.test_job_environment import python_for

from .hubproc import basics, free_port, local_nbjobs_yaml, login, running_hub, start_server, xsrf

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not Cgroups().enforced,
    reason="OS accounts need root (CI runs as root)",
)

HUB_CONFIG = """
from nbjobs.hub_config import configure
configure(c, {config!r}, service_port={service_port})
c.Authenticator.allow_all = True
c.DummyAuthenticator.password = "nbjobs"
"""

#: what another account runs: every loopback TCP port the owner listens on and every
#: kernel socket path on the machine, a SUB socket connected to each, for a few seconds
LISTEN_IN = """
import json, sys, time, zmq
owner = int(sys.argv[1])
ports, paths = [], []
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    for line in open(table).readlines()[1:]:
        fields = line.split()
        if fields[3] == "0A" and int(fields[7]) == owner:
            ports.append(int(fields[1].rsplit(":", 1)[1], 16))
for line in open("/proc/net/unix").readlines()[1:]:
    fields = line.split()
    if len(fields) > 7 and "kernel-" in fields[7]:
        paths.append(fields[7])
ctx = zmq.Context()
sub = ctx.socket(zmq.SUB)
sub.setsockopt(zmq.SUBSCRIBE, b"")
sub.setsockopt(zmq.LINGER, 0)
for port in ports:
    sub.connect(f"tcp://127.0.0.1:{port}")
for path in paths:
    sub.connect(f"ipc://{path}")
heard = []
deadline = time.monotonic() + 4
while time.monotonic() < deadline:
    if sub.poll(200):
        heard.append(b"".join(sub.recv_multipart()).decode("utf-8", "replace"))
print(json.dumps({"ports": ports, "paths": paths, "heard": heard}))
"""

PRINTS = """
import time
for i in range(300):
    print("owner-output", i, flush=True)
    time.sleep(0.1)
"""


@pytest.fixture(scope="module")
def accounts_hub():
    public = Path(tempfile.mkdtemp(prefix="nbjobs-kernels-"))
    public.chmod(0o755)
    prefix = f"nbk{uuid.uuid4().hex[:5]}-"
    accounts = {"mode": "create", "prefix": prefix}
    nbjobs_yaml = local_nbjobs_yaml(
        public,
        backend={"kind": "local", "local": {"gpus": [], "cpu_slots": 1, "accounts": accounts}},
    )
    port = free_port()
    config = basics(public, port, free_port())
    config += HUB_CONFIG.format(config=str(nbjobs_yaml), service_port=free_port())
    other = f"nbkother{uuid.uuid4().hex[:5]}"
    subprocess.run(["useradd", "--no-create-home", "--user-group", other], check=True)
    try:
        with running_hub(public, config, port) as url:
            yield url, prefix, other, public
    finally:
        for name in (f"{prefix}ada", other):
            try:
                uid = pwd.getpwnam(name).pw_uid
            except KeyError:
                continue
            for process in psutil.process_iter(["uids"]):
                if process.info["uids"] and process.info["uids"].real == uid:
                    process.kill()
            subprocess.run(["userdel", name], capture_output=True, check=False)
        shutil.rmtree(public, ignore_errors=True)


def execute_request(code: str) -> dict:
    header = {
        "msg_id": uuid.uuid4().hex,
        "msg_type": "execute_request",
        "username": "ada",
        "session": uuid.uuid4().hex,
        "version": "5.3",
        "date": "",
    }
    content = {"code": code, "silent": False, "store_history": False}
    return {
        "header": header,
        "parent_header": {},
        "metadata": {},
        "content": content,
        "channel": "shell",
        "buffers": [],
    }


def test_another_account_hears_nothing_of_a_kernel_while_it_prints(accounts_hub):
    url, prefix, other, public = accounts_hub
    s = login(url, "ada")
    start_server(url, s, "ada")
    owner = pwd.getpwnam(f"{prefix}ada")
    made = s.post(
        f"{url}/user/ada/api/kernels",
        json={"name": "python3"},
        headers={"X-XSRFToken": xsrf(s, "/user/ada/")},
    )
    assert made.status_code == 201, made.text
    kernel = made.json()["id"]
    python = python_for(pwd.getpwnam(other), public)
    cookie = "; ".join(f"{c.name}={c.value}" for c in s.cookies)
    ws_url = url.replace("http", "ws", 1) + f"/user/ada/api/kernels/{kernel}/channels"

    async def attack_while_it_prints() -> tuple[dict, list[str]]:
        ws = await websocket_connect(HTTPRequest(ws_url, headers={"Cookie": cookie}))
        owner_saw: list[str] = []
        ws.write_message(json.dumps(execute_request(PRINTS)))

        async def read() -> None:
            while True:
                message = await ws.read_message()
                if message is None:
                    return
                if isinstance(message, str):
                    msg = json.loads(message)
                    if msg["msg_type"] == "stream":
                        owner_saw.append(msg["content"]["text"])

        reader = asyncio.ensure_future(read())
        deadline = time.monotonic() + 60
        while not owner_saw:
            assert time.monotonic() < deadline, "the owner's cell printed nothing"
            await asyncio.sleep(0.1)
        attacker = await asyncio.create_subprocess_exec(
            "runuser",
            "-u",
            other,
            "--",
            python,
            "-c",
            LISTEN_IN,
            str(owner.pw_uid),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd="/",
        )
        out, err = await attacker.communicate()
        assert attacker.returncode == 0, err.decode()
        heard_while = len(owner_saw)
        await asyncio.sleep(0.5)
        assert len(owner_saw) > heard_while, "the cell stopped printing during the attack"
        # closed, and waited for: the reader ends when the connection has closed. Left
        # closing as asyncio.run closes this loop, its socket stayed in tornado's map of
        # loops until the next test file made a loop, and warned there (a CI error in
        # another file)
        ws.close()
        await asyncio.wait_for(reader, 30)
        return json.loads(out), owner_saw

    seen, owner_saw = asyncio.run(attack_while_it_prints())
    assert any("owner-output" in text for text in owner_saw)
    assert seen["heard"] == [], "another account read the owner's kernel output"
    # the kernel listens on no loopback port of its own: only the server's HTTP port and
    # ipykernel's subprocess pipe (a PULL socket that sends nothing) remain
    assert len(seen["ports"]) <= 2, seen
    kernel_folder = next(p for p in seen["paths"] if kernel in p)
    assert kernel_folder.startswith("/run/nbjobs/servers/")
    runtime = Path(kernel_folder).parent
    assert (runtime.stat().st_uid, runtime.stat().st_mode & 0o777) == (owner.pw_uid, 0o700)

    # stopped through the hub, the server leaves no runtime folder behind (each stop once
    # left one under /run, forgotten when the hub's poll saw the process end)
    stopped = s.delete(f"{url}/hub/api/users/ada/server", headers={"X-XSRFToken": xsrf(s, "/hub/")})
    assert stopped.status_code in (202, 204), stopped.text
    deadline = time.monotonic() + 90
    while s.get(f"{url}/hub/api/users/ada").json()["servers"]:
        assert time.monotonic() < deadline, "ada's server did not stop"
        time.sleep(0.5)
    assert not runtime.exists(), f"{runtime} outlived its server"

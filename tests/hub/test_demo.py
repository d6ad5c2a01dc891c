"""`nbjobs demo` end to end, the way a browser uses it: log in, spawn, submit, read."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time

import nbformat
import psutil
import pytest
import requests
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("demo")
    port = free_port()
    command = [sys.executable, "-m", "nbjobs.cli", "demo", "--workdir", str(workdir)]
    command += [f"--port={port}", f"--hub-port={free_port()}", f"--service-port={free_port()}"]
    command += [f"--proxy-api-port={free_port()}"]
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    lines = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        lines.append(line)
        if "Ctrl-C stops the demo" in line or proc.poll() is not None:
            break
    assert proc.poll() is None, "".join(lines)
    yield f"http://127.0.0.1:{port}", workdir, proc, "".join(lines)
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    proc.stdout.close()


def login(url: str, user: str) -> requests.Session:
    s = requests.Session()
    s.get(f"{url}/hub/login", timeout=30)
    r = s.post(
        f"{url}/hub/login",
        data={"username": user, "password": "nbjobs", "_xsrf": s.cookies.get("_xsrf")},
        allow_redirects=False,
        timeout=30,
    )
    assert r.status_code == 302, r.text
    return s


def xsrf(s: requests.Session, path: str) -> str:
    return next(c.value for c in s.cookies if c.name == "_xsrf" and c.path == path)


def start_server(url: str, s: requests.Session, user: str) -> None:
    r = s.post(f"{url}/hub/api/users/{user}/server", headers={"X-XSRFToken": xsrf(s, "/hub/")})
    assert r.status_code in (201, 202) or "already running" in r.text, r.text
    deadline = time.monotonic() + 90
    while not s.get(f"{url}/hub/api/users/{user}").json()["servers"].get("", {}).get("ready"):
        assert time.monotonic() < deadline
        time.sleep(0.5)
    assert s.get(f"{url}/user/{user}/lab").status_code == 200


def test_the_demo_prints_where_to_go_and_who_to_be(demo):
    url, _, _, out = demo
    assert f"nbjobs demo is running at {url}" in out
    assert "password: nbjobs" in out


def test_a_student_submits_from_her_notebook_server_and_gets_the_result(demo):
    url, workdir, _, _ = demo
    s = login(url, "ada")
    start_server(url, s, "ada")
    api = f"{url}/user/ada/nbjobs/api/"

    flavors = s.get(api + "flavors").json()
    refused = s.post(api + "jobs", json={"path": "hello.ipynb", "flavor": "cpu"})
    job = s.post(
        api + "jobs",
        json={"path": "hello.ipynb", "flavor": "cpu", "parameters": {"steps": 5}},
        headers={"X-XSRFToken": xsrf(s, "/user/ada/")},
    ).json()
    deadline = time.monotonic() + 90
    while (state := s.get(api + f"jobs/{job['id']}").json())["state"] not in (
        "succeeded",
        "failed",
    ):
        assert time.monotonic() < deadline
        time.sleep(0.5)

    assert [f["name"] for f in flavors][:1] == ["cpu"]
    assert refused.status_code == 403  # a cookie without the XSRF token
    assert job["user"] == "ada"
    assert state["state"] == "succeeded", state
    output = workdir / "home" / "ada" / state["output_path"]
    assert nbformat.read(output, as_version=4).metadata["nbjobs"]["parameters"] == {"steps": 5}


def test_notebook_servers_are_cpu_only_and_know_the_service(demo):
    url, workdir, _, _ = demo
    s = login(url, "bob")
    start_server(url, s, "bob")
    servers = [
        p
        for p in psutil.process_iter(["cmdline", "environ"])
        if p.info["environ"] and p.info["environ"].get("JUPYTERHUB_USER") == "bob"
    ]
    assert servers
    env = servers[0].info["environ"]
    assert env["CUDA_VISIBLE_DEVICES"] == ""
    assert env["NVIDIA_VISIBLE_DEVICES"] == "void"
    assert env["NBJOBS_URL"].endswith("/services/nbjobs/")
    assert env["NBJOBS_ROOT"] == str(workdir / "home" / "bob")


def test_the_teacher_provisions_a_class_from_a_terminal_in_her_server(demo):
    url, workdir, _, _ = demo
    s = login(url, "tess")
    start_server(url, s, "tess")
    server = next(
        p
        for p in psutil.process_iter(["environ"])
        if p.info["environ"] and p.info["environ"].get("JUPYTERHUB_USER") == "tess"
    )
    env = server.info["environ"]  # what a JupyterLab terminal of hers has
    roster = workdir / "home" / "tess" / "roster.csv"
    roster.write_text("username\ncarl\ndee\n")

    made = subprocess.run(
        [sys.executable, "-m", "nbjobs.cli", "class", "create", "extra", "--roster", str(roster)],
        env={
            "PATH": os.environ["PATH"],
            **{k: env[k] for k in env if k.startswith(("NBJOBS", "JUPYTERHUB"))},
        },
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert made.returncode == 0, made.stderr
    assert "students:   2: carl, dee" in made.stdout
    # carl can log in to the demo at once and is in the class
    carl = login(url, "carl")
    assert carl.get(f"{url}/hub/api/user").json()["groups"] == ["extra"]


def terminal_says(url: str, s: requests.Session, user: str, command: str) -> str:
    """Run ``command`` in a new JupyterLab terminal of ``user``'s server, as typed there;
    what the terminal printed."""
    made = s.post(
        f"{url}/user/{user}/api/terminals", headers={"X-XSRFToken": xsrf(s, f"/user/{user}/")}
    )
    assert made.status_code == 200, made.text
    name = made.json()["name"]
    ws_url = url.replace("http", "ws", 1) + f"/user/{user}/terminals/websocket/{name}"
    cookie = "; ".join(f"{c.name}={c.value}" for c in s.cookies)

    async def talk() -> str:
        request = HTTPRequest(ws_url, headers={"Cookie": cookie})
        ws = await websocket_connect(request)
        ws.write_message(json.dumps(["stdin", f"{command}; echo END-OF-$((6*7))\r"]))
        said = ""
        deadline = time.monotonic() + 60
        while "END-OF-42" not in said and time.monotonic() < deadline:
            message = await asyncio.wait_for(ws.read_message(), 60)
            if message is None:
                break
            kind, *rest = json.loads(message)
            if kind == "stdout":
                said += rest[0]
        # Close and wait for the server's answer: a socket still open when asyncio.run
        # ends is left to the garbage collector, which warns in some later test.
        ws.close()
        while await asyncio.wait_for(ws.read_message(), 10) is not None:
            pass
        return said

    return asyncio.run(talk())


def test_the_nbjobs_command_works_in_a_lab_terminal_as_the_readme_says(demo):
    url, _, _, _ = demo
    s = login(url, "ada")
    start_server(url, s, "ada")
    said = terminal_says(url, s, "ada", "nbjobs list")
    assert "command not found" not in said
    assert "hello" in said  # her job from the submit test, listed by the CLI


def test_the_demo_class_has_two_students_and_a_teacher(demo):
    url, _, _, _ = demo
    s = login(url, "tess")
    r = s.post(f"{url}/hub/api/users/tess/server", headers={"X-XSRFToken": xsrf(s, "/hub/")})
    assert r.status_code in (201, 202, 400), r.text  # 400: already running
    deadline = time.monotonic() + 90
    while not s.get(f"{url}/hub/api/users/tess").json()["servers"].get("", {}).get("ready"):
        assert time.monotonic() < deadline
        time.sleep(0.5)
    server = next(
        p
        for p in psutil.process_iter(["environ"])
        if p.info["environ"] and p.info["environ"].get("JUPYTERHUB_USER") == "tess"
    )
    env = server.info["environ"]

    listed = subprocess.run(
        [sys.executable, "-m", "nbjobs.cli", "class", "list", "demo-class", "--json"],
        env={
            "PATH": os.environ["PATH"],
            **{k: env[k] for k in env if k.startswith(("NBJOBS", "JUPYTERHUB"))},
        },
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert listed.returncode == 0, listed.stderr
    cls = json.loads(listed.stdout)
    assert cls["name"] == "demo-class"
    assert sorted(cls["students"]) == ["ada", "bob"]
    assert cls["teachers"] == ["tess"]
    # the students' flavors are the class's
    ada = login(url, "ada")
    assert ada.get(f"{url}/hub/api/user").json()["name"] == "ada"


def test_without_a_gpu_the_demo_simulates_some_and_says_so_everywhere(demo):
    url, workdir, _, out = demo
    assert "GPUs: 2 SIMULATED (this machine has none)" in out
    s = login(url, "bob")
    start_server(url, s, "bob")
    api = f"{url}/user/bob/nbjobs/api/"
    headers = {"X-XSRFToken": xsrf(s, "/user/bob/")}
    gpu = next(f for f in s.get(api + "flavors").json() if f["name"] == "gpu")
    assert (gpu["display_name"], gpu["simulated"], gpu["total_gpus"]) == (
        "1 GPU (simulated)",
        True,
        2,
    )
    # bob may hold one GPU at a time: his second GPU job queues behind the first
    body = {"path": "hello.ipynb", "flavor": "gpu", "parameters": {"steps": 40}}
    first = s.post(api + "jobs", json=body, headers=headers).json()
    second = s.post(api + "jobs", json=body, headers=headers).json()
    deadline = time.monotonic() + 90
    while not (waiting := s.get(api + f"jobs/{second['id']}").json())["waiting_reason"]:
        assert time.monotonic() < deadline
        time.sleep(0.3)
    assert waiting["state"] == "queued"
    assert "you may use 1 GPU(s) at once" in waiting["waiting_reason"]
    while (done := s.get(api + f"jobs/{first['id']}").json())["state"] not in (
        "succeeded",
        "failed",
    ):
        assert time.monotonic() < deadline + 90
        time.sleep(0.5)
    assert done["state"] == "succeeded", done
    output = nbformat.read(workdir / "home" / "bob" / done["output_path"], as_version=4)
    assert output.metadata["nbjobs"]["gpus_simulated"] is True
    assert "It ran on a simulated GPU" in output.cells[0].source
    log = s.get(api + f"jobs/{first['id']}/logs").text
    assert "are simulated" in log
    s.post(api + f"jobs/{second['id']}/cancel", headers=headers)


def test_ctrl_c_while_starting_stops_all_it_started(tmp_path):
    ports = {name: free_port() for name in ("port", "hub-port", "service-port", "proxy-api-port")}
    command = [sys.executable, "-m", "nbjobs.cli", "demo", "--workdir", str(tmp_path)]
    command += [f"--{name}={port}" for name, port in ports.items()]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    demo_process = psutil.Process(proc.pid)
    # Interrupt once the hub has started its proxy and the job service, before it is up.
    deadline = time.monotonic() + 90
    while True:
        family = demo_process.children(recursive=True)
        commands = []
        for child in family:
            with contextlib.suppress(psutil.NoSuchProcess):
                commands.append(" ".join(child.cmdline()))
        proxy = any("configurable-http-proxy" in c for c in commands)
        if proxy and any("nbjobs.cli service" in c for c in commands):
            break
        assert proc.poll() is None, commands
        assert time.monotonic() < deadline, commands
        time.sleep(0.02)

    os.kill(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=90)

    assert "Ctrl-C stops the demo" not in out, "interrupted too late to test start-up"
    assert "interrupted while starting" in out
    assert "nbjobs demo: stopped" in out
    assert proc.returncode == 130
    _, alive = psutil.wait_procs(family, timeout=30)
    assert [p for p in alive if p.status() != psutil.STATUS_ZOMBIE] == []
    for name, port in ports.items():
        with pytest.raises(ConnectionRefusedError):  # nothing listens there
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        with socket.socket() as s:
            # a new demo can listen there (servers reuse ports in TIME_WAIT, as here)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", port))
            s.listen()
            assert s.getsockname()[1] == port, name


def test_ctrl_c_stops_the_demo_and_its_hub(demo):
    _, _, proc, _ = demo
    children = psutil.Process(proc.pid).children(recursive=True)

    os.kill(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=60)

    assert proc.returncode == 0
    assert "nbjobs demo: stopped" in out
    _, alive = psutil.wait_procs(children, timeout=30)
    assert [p for p in alive if p.status() != psutil.STATUS_ZOMBIE] == []

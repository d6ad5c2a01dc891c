"""A real JupyterHub (with configurable-http-proxy) as a subprocess, for tests."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import requests
import yaml
from nbjobs.job_runner.lean_imports import FORMAT_CHECKERS
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect

from tests.machine import INSTANCE, end_runners_in, this_runs
from tests.ports import free_port
from tests.waiting import stretched, wait_until_answering


def run_nbjobs(
    service: str, token: str, *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real ``nbjobs`` command with ``args`` against the job service at
    ``service`` (its URL through the hub), as the owner of ``token``; what it said."""
    env = dict(os.environ, NBJOBS_URL=service, NBJOBS_TOKEN=token)
    return subprocess.run(
        [sys.executable, "-m", "nbjobs.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
    )


def nbjobs_here(
    service: str, token: str, *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """What :func:`run_nbjobs` gives, from the same ``nbjobs`` main run in this process:
    its exit code and what it printed, with the same environment and folder, for tests
    about what a command says and does rather than about its being a process of its
    own (each ``python -m nbjobs.cli`` costs a third of a second of CPU before it does
    anything). The modules the command declines for this process are let back after."""
    from nbjobs.cli import main  # the command, as ``python -m nbjobs.cli`` runs it

    declined = [name for name in FORMAT_CHECKERS if name not in sys.modules]
    # stdout with a byte buffer beneath, as a process's has (``nbjobs logs`` writes bytes)
    out_bytes, err = io.BytesIO(), io.StringIO()
    out = io.TextIOWrapper(out_bytes, encoding="utf-8", write_through=True)
    env = {"NBJOBS_URL": service, "NBJOBS_TOKEN": token}
    before = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        with (
            contextlib.chdir(cwd or os.getcwd()),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse's usage errors; as the interpreter exits
                if exc.code is None or isinstance(exc.code, int):
                    code = exc.code or 0
                else:
                    print(exc.code, file=sys.stderr)
                    code = 1
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        for name in declined:
            if sys.modules.get(name, "") is None:
                del sys.modules[name]
    command = ["nbjobs", *args]
    out.flush()
    printed = out_bytes.getvalue().decode("utf-8")
    return subprocess.CompletedProcess(command, code, printed, err.getvalue())


def basics(folder: Path, port: int, hub_port: int) -> str:
    """The settings every test hub needs: loopback ports of its own, files in ``folder``."""
    return f"""
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {port}
c.JupyterHub.hub_port = {hub_port}
c.JupyterHub.db_url = "sqlite:///{folder}/hub.sqlite"
c.JupyterHub.cookie_secret_file = "{folder}/cookie_secret"
c.ConfigurableHTTPProxy.pid_file = "{folder}/proxy.pid"
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{free_port()}"
c.JupyterHub.authenticator_class = "dummy"
"""


def local_nbjobs_yaml(folder: Path, **extra: object) -> Path:
    """An nbjobs.yaml for a test hub on the local backend (no GPU, one CPU slot), with
    its shared storage and database in ``folder``; ``extra`` adds top-level sections."""
    path = folder / "nbjobs.yaml"
    settings = {
        "storage": {"root": str(folder / "shared"), "user_dir": "home/{username}"},
        "database": {"url": f"sqlite:///{folder}/jobs.sqlite"},
        "backend": {"kind": "local", "local": {"gpus": [], "cpu_slots": 1, "instance": INSTANCE}},
        **extra,
    }
    path.write_text(yaml.safe_dump(this_runs(settings)))
    return path


@contextmanager
def running_hub(
    folder: Path, config: str, port: int, base_url: str = "/", end_jobs: bool = True
) -> Iterator[str]:
    """Start the hub as nbjobs does (``python -m nbjobs.hub_config.run -f``) on ``config``
    (the text of a jupyterhub_config.py).

    Waits until the nbjobs service answers through the hub's proxy, yields the
    hub's URL (with its ``base_url``), and stops the hub afterwards, then the jobs its
    service left running in ``folder`` (``end_jobs=False``: a restart's, which the next
    hub's service adopts). A hub that does not come up fails with the end of its log.
    """
    (folder / "jupyterhub_config.py").write_text(config)
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    assert shutil.which("configurable-http-proxy", path=env["PATH"]), "run scripts/install.sh"
    log_path = folder / "hub.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "nbjobs.hub_config.run",
                "-f",
                str(folder / "jupyterhub_config.py"),
            ],
            cwd=folder,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}{base_url.rstrip('/')}"
        try:
            wait_until_answering(
                f"{url}/services/nbjobs/api/health",
                ready=lambda r: r.status_code == 401,  # up, and asking for a token
                process=proc,
                log=log_path,
                timeout=90,
                interval=0.3,
            )
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=60)
            if end_jobs:
                end_runners_in(folder)  # no hub's now: nobody would end them
            keep_log(log_path)


#: where each hub's log is kept after its tests (the hub's folder goes with them): what
#: a failure that only shows under load (CI) left behind
HUB_LOGS = Path(__file__).resolve().parents[1] / "artifacts" / "hub-logs"


def keep_log(log_path: Path) -> None:
    HUB_LOGS.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        shutil.copyfile(log_path, HUB_LOGS / f"{log_path.parent.name}.log")


def login(url: str, user: str, password: str = "nbjobs") -> requests.Session:
    """A browser's session of ``user``, logged in through the hub's form."""
    s = requests.Session()
    s.get(f"{url}/hub/login", timeout=30)
    r = s.post(
        f"{url}/hub/login",
        data={"username": user, "password": password, "_xsrf": s.cookies.get("_xsrf")},
        allow_redirects=False,
        timeout=30,
    )
    assert r.status_code == 302, r.text
    return s


def xsrf(s: requests.Session, path: str) -> str:
    """The XSRF cookie the hub or a server set for ``path``."""
    return next(c.value for c in s.cookies if c.name == "_xsrf" and c.path == path)


def start_server(url: str, s: requests.Session, user: str) -> None:
    """Start ``user``'s server from their session and wait until Lab answers."""
    r = s.post(f"{url}/hub/api/users/{user}/server", headers={"X-XSRFToken": xsrf(s, "/hub/")})
    assert r.status_code in (201, 202) or "already running" in r.text, r.text
    start = time.monotonic()
    while not s.get(f"{url}/hub/api/users/{user}").json()["servers"].get("", {}).get("ready"):
        assert time.monotonic() - start < stretched(90), f"{user}'s server never got ready"
        time.sleep(0.5)
    assert s.get(f"{url}/user/{user}/lab").status_code == 200


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
        said = ""
        try:
            ws.write_message(json.dumps(["stdin", f"{command}; echo END-OF-$((6*7))\r"]))
            deadline = time.monotonic() + 120
            while "END-OF-42" not in said:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"the terminal did not finish {command!r}: {said!r}")
                message = await asyncio.wait_for(ws.read_message(), left)
                if message is None:
                    break
                kind, *rest = json.loads(message)
                if kind == "stdout":
                    said += rest[0]
        finally:
            # Close and wait for the server's answer: a socket still open when asyncio.run
            # ends is left to the garbage collector, which warns in some later test. A
            # server too busy to answer in time is no failure of the test.
            ws.close()
            try:
                while await asyncio.wait_for(ws.read_message(), 10) is not None:
                    pass
            except asyncio.TimeoutError:
                pass
        return said

    return asyncio.run(talk())

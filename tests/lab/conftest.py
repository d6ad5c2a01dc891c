"""A real JupyterHub (the demo's machinery) and a real browser (Debian's chromium).

The hub is set up by `nbjobs.programs.demo.prepare` and then given a config of our own:
one CPU slot, so a second job visibly waits; four GPU ids for the local
backend (no GPU is needed: a job only gets CUDA_VISIBLE_DEVICES), so the dialog
counts free GPUs and jobs of two flavors run side by side; and a flavor this
machine could never run, so the dialog shows it disabled with the reason.
Screenshots go to tests/artifacts/ (gitignored): look at them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
import yaml
from nbjobs.programs.demo import PASSWORD, Ports, prepare
from playwright.sync_api import (
    Browser,
    BrowserContext,
    Page,
    Playwright,
    expect,
    sync_playwright,
)

from tests.machine import INSTANCE, end_runners_in, this_runs
from tests.ports import free_port
from tests.waiting import stretched, wait_until_answering

#: how long an assertion (and an action: a click waits for its button) waits for the page
#: to become what it expects: Playwright's 5 s held on a quiet machine; a submit answered
#: in 6 s at load 5 on two cores left its dialog open past them, and at load 28 (two
#: suites beside a demo) the Submit dialog opened 21 s after its click (the save and
#: three requests it waits for, each sent seconds late by a starved browser and
#: server), past the 20 s that followed. A wait ends as soon as the page is right; only
#: a failure takes this long.
PAGE_LIMIT_MS = 60_000
expect.set_options(timeout=PAGE_LIMIT_MS)

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

HUB_JOBS_CONFIG = {
    "storage": {"root": "home"},
    "database": {"url": "sqlite:///jobs.sqlite"},
    "backend": {
        "kind": "local",
        "local": {"gpus": [0, 1, 2, 3], "cpu_slots": 1, "instance": INSTANCE},
    },
    "flavors": [
        {"name": "cpu", "display_name": "CPU only", "gpus": 0, "cpu": "1", "time_limit": "10m"},
        {
            "name": "t4",
            "display_name": "1 \N{MULTIPLICATION SIGN} T4",
            "gpus": 1,
            "gpu_type": "T4",
            "cpu": "4",
            "memory": "16Gi",
            "time_limit": "1h",
        },
        {
            "name": "t4-half",
            "display_name": "Half a T4",
            "gpus": 1,
            "shared": True,
            "fraction": 0.5,
            "gpu_type": "T4",
            "cpu": "2",
            "memory": "8Gi",
            "time_limit": "1h",
        },
        {
            "name": "a100x8",
            "display_name": "8 \N{MULTIPLICATION SIGN} A100",
            "gpus": 8,
            "gpu_type": "A100",
            "cpu": "32",
            "memory": "256Gi",
            "time_limit": "4h",
        },
    ],
    "quotas": {"default": {"max_running_gpus": 8, "max_queued_jobs": 20}},
    "classes": [
        {
            "name": "demo-class",
            "teachers": ["tess"],
            "students": ["ada", "bob"],
            "flavors": ["cpu", "t4", "t4-half", "a100x8"],
        },
    ],
    "admin": {"users": ["admin"]},
}


def notebook(*cells: str, parameters: str | None = None) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    if parameters is not None:
        nb.cells.append(nbformat.v4.new_code_cell(parameters, metadata={"tags": ["parameters"]}))
    nb.cells.extend(nbformat.v4.new_code_cell(c) for c in cells)
    return nb


def ticks(cells: int) -> nbformat.NotebookNode:
    """A notebook whose cells each print "tick N" and sleep ``pause`` (1.5 s, a parameter)."""
    return notebook(
        *[f"print('tick {i}', flush=True); time.sleep(pause)" for i in range(1, cells + 1)],
        parameters="import time\npause = 1.5",
    )


@dataclass
class Hub:
    url: str
    workdir: Path

    def home(self, user: str) -> Path:
        return self.workdir / "home" / user


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> Iterator[Hub]:
    """A JupyterHub with the local spawner and the nbjobs service, as `nbjobs demo` runs it."""
    yield from run_hub(tmp_path_factory.mktemp("hub"), HUB_JOBS_CONFIG)


def run_hub(workdir: Path, jobs_config: dict) -> Iterator[Hub]:
    """Start the hub in `workdir` with `jobs_config` as its nbjobs.yaml; yield it; stop it.

    For a fixture: a test module that needs another nbjobs.yaml defines its own
    `hub` fixture with this (the `lab` fixture then logs in there).
    """
    port = free_port()
    # no OS accounts: the demo's (demo-ada, ...) are the machine's, and moving them to
    # this hub's folder would take them from a demo running beside it (another worker)
    ports = Ports(port, free_port(), free_port(), free_port(), free_port(), free_port())
    hub_config = prepare(workdir, "127.0.0.1", ports, accounts=False, showcase=False)
    (workdir / "nbjobs.yaml").write_text(yaml.safe_dump(this_runs(jobs_config), sort_keys=False))
    # The proxy's API port defaults to 8001: another hub on this machine may hold it.
    with hub_config.open("a") as f:
        f.write(f'c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{free_port()}"\n')
    home = workdir / "home" / "ada"
    nbformat.write(
        notebook(
            *["import time; time.sleep(seconds)"] * 4,
            parameters="seconds = 1.5  # per cell",
        ),
        home / "slow.ipynb",
    )
    nbformat.write(
        notebook("print('loading')", "raise ValueError('bad input: no rows')", "print('never')"),
        home / "fail.ipynb",
    )
    nbformat.write(
        notebook("for i in range(60_000):\n    print(f'chatty line {i:05d}', 'x' * 10)"),
        home / "chatty.ipynb",
    )
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.pop("JUPYTERHUB_API_TOKEN", None)
    assert shutil.which("configurable-http-proxy", path=env["PATH"]), "run scripts/install.sh"
    log = (workdir / "jupyterhub.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "nbjobs.hub_config.run", "-f", str(hub_config)],
        cwd=workdir,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()  # the hub writes to its own copy
    url = f"http://127.0.0.1:{port}"
    wait_until_answering(
        f"{url}/hub/api/",
        ready=lambda answer: answer.ok,
        process=proc,
        log=workdir / "jupyterhub.log",
        timeout=120,
        interval=0.3,
    )
    yield Hub(url, workdir)
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    end_runners_in(workdir)  # the jobs its tests left running, no hub's now


@contextlib.contextmanager
def standalone_service(workdir: Path, tokens: dict[str, str], **config: object) -> Iterator[str]:
    """A job service without a hub (its dashboard at its root, behind a token) on a free
    port: one CPU slot, the flavor ``cpu``, root its admin, ``tokens`` (token: user) its
    users, and more of nbjobs.yaml in ``config``. Gives its URL (ending in ``/``) once it
    answers; stops it after."""
    port = free_port()
    settings = {
        "storage": {"root": str(workdir / "home")},
        "database": {"url": f"sqlite:///{workdir / 'jobs.sqlite'}"},
        "backend": {"kind": "local", "local": {"gpus": [], "cpu_slots": 1}},
        "flavors": [{"name": "cpu", "gpus": 0}],
        "admin": {"users": ["root"]},
        **config,
    }
    (workdir / "nbjobs.yaml").write_text(yaml.safe_dump(settings))
    tokens_file = workdir / "tokens.yaml"
    tokens_file.write_text(yaml.safe_dump(tokens))
    tokens_file.chmod(0o600)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTERHUB_")}
    service = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nbjobs.cli",
            "service",
            f"--config={workdir / 'nbjobs.yaml'}",
            f"--port={port}",
            f"--StaticTokenAuth.tokens_file={tokens_file}",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        # it answers, if only to say it is unwell
        wait_until_answering(url + "api/health", process=service, timeout=60, interval=0.5)
        yield url
    finally:
        service.terminate()
        service.wait(timeout=30)
        end_runners_in(workdir)


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    """One Playwright per module (its sync API runs one at a time)."""
    assert Path(CHROMIUM).exists(), "apt-get install -y chromium"
    with sync_playwright() as pw:
        yield pw


@pytest.fixture(scope="module")
def chromium(playwright: Playwright) -> Iterator[Browser]:
    """One chromium for the module (Playwright cannot download its own browser here),
    with a fresh profile of its own: test workers side by side, or a second suite on the
    machine, never share one. Each user of a test gets a context in it (cookies and
    storage of their own, see `user_context`) rather than a chromium of their own: a
    chromium's start, its GPU and network processes, are paid once."""
    browser = launch_chromium(playwright)
    yield browser
    browser.close()


def launch_chromium(playwright: Playwright) -> Browser:
    """Debian's chromium, headless, on a fresh profile of its own."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)


def user_context(chromium: Browser, height: int = 860) -> BrowserContext:
    """A context of its own in the module's chromium: a user's own cookies, as a
    browser of their own would hold them."""
    context = chromium.new_context(viewport={"width": 1360, "height": height})
    context.set_default_timeout(PAGE_LIMIT_MS)
    return context


@pytest.fixture(scope="module")
def browser(chromium: Browser) -> Iterator[BrowserContext]:
    """Ada's browser: a context of the module's chromium."""
    context = user_context(chromium)
    yield context
    context.close()


@pytest.fixture(scope="module")
def lab(hub: Hub, browser: BrowserContext) -> Page:
    """Ada, logged in through the hub's login page, in her JupyterLab."""
    return log_in(hub, browser)


def start_limit() -> float:
    """Milliseconds a login, a server's start or Lab's first load may take: two minutes,
    stretched on a loaded machine (tests.waiting.stretched)."""
    return stretched(120) * 1000


def log_in(hub: Hub, browser: BrowserContext) -> Page:
    """A new page of `browser`: Ada, logged in through the hub's login page, in her
    JupyterLab."""
    page = browser.new_page()
    page.goto(f"{hub.url}/hub/login")
    page.fill("#username_input", "ada")
    page.fill("#password_input", PASSWORD)
    page.click("#login_submit", no_wait_after=True)  # the wait below is the limit
    page.wait_for_url("**/user/ada/lab**", timeout=start_limit())
    page.wait_for_selector(".jp-LabShell", timeout=start_limit())
    expect(page.locator(".jp-DirListing-item").first).to_be_visible(timeout=60_000)
    dismiss_news(page)
    return page


def dismiss_news(page: Page) -> None:
    """Say no to JupyterLab's "get notified about news?" toast, so screenshots show ours."""
    no = page.locator(".jp-toast-button", has_text="No")
    try:
        no.first.click(timeout=5_000)
    except Exception:  # it does not show in every version
        return


def shot(page: Page, name: str) -> Path:
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


def api(page: Page, method: str, path: str, body: object = None) -> tuple[int, object]:
    """Call the server extension's API from inside the page (with its cookies and XSRF)."""
    status, text = page.evaluate(
        """async ([method, path, body]) => {
            const xsrf = document.cookie.match(/(?:^|; )_xsrf=([^;]*)/);
            const headers = {'Content-Type': 'application/json'};
            if (xsrf) headers['X-XSRFToken'] = decodeURIComponent(xsrf[1]);
            const init = {method, credentials: 'same-origin', headers};
            if (body !== null) init.body = JSON.stringify(body);
            const r = await fetch(path, init);
            return [r.status, await r.text()];
        }""",
        [method, path, body],
    )
    return status, json.loads(text) if text else None


def api_json(page: Page, path: str) -> object:
    """GET the server extension's API from inside the page (with its cookies)."""
    return json.loads(
        page.evaluate(
            """async path => {
                const xsrf = document.cookie.match(/(?:^|; )_xsrf=([^;]*)/);
                const headers = xsrf ? {'X-XSRFToken': decodeURIComponent(xsrf[1])} : {};
                const r = await fetch(path, {credentials: 'same-origin', headers});
                return await r.text();
            }""",
            path,
        )
    )

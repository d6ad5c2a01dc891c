"""The Lab extension in a plain `jupyter lab` (no hub): the server hosts the job service.

And when the server extension is not enabled, the panel says so in words.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from tests.machine import end_runners_in
from tests.waiting import wait_until_answering

from .conftest import ROOT, dismiss_news, free_port, shot
from .steps import JOB_TIMEOUT, job_row, jobs_panel, open_notebook, submit


def start_jupyter_lab(
    folder: Path, procs: list[subprocess.Popen[bytes]], server_config: dict | None = None
) -> str:
    """Start `jupyter lab` in its own folders under ``folder`` (adding it to ``procs``);
    return the URL with its token once it answers."""
    root = folder / "root"
    root.mkdir()
    shutil.copyfile(ROOT / "examples" / "hello.ipynb", root / "hello.ipynb")
    config = folder / "config"
    config.mkdir()
    if server_config:
        (config / "jupyter_server_config.json").write_text(json.dumps(server_config))
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTERHUB_")}
    env.pop("NBJOBS_URL", None)
    env.update(
        JUPYTER_CONFIG_DIR=str(config),
        JUPYTER_DATA_DIR=str(folder / "data"),
        JUPYTER_RUNTIME_DIR=str(folder / "runtime"),
    )
    port, token = free_port(), secrets.token_hex(16)
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root"]
    command += [f"--port={port}", "--ip=127.0.0.1", f"--ServerApp.root_dir={root}"]
    command += [f"--IdentityProvider.token={token}"]
    log = (folder / "lab.log").open("wb")
    proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    procs.append(proc)
    url = f"http://127.0.0.1:{port}"
    wait_until_answering(
        f"{url}/api/status?token={token}",
        ready=lambda answer: answer.ok,
        process=proc,
        log=folder / "lab.log",
        # a plain `jupyter lab` imports more than the servers nbjobs starts; at a CI run's
        # peak load (19 on two cores) one printed nothing in its first 60 s
        timeout=120,
        interval=0.3,
    )
    return f"{url}/lab?token={token}"


def stop(procs: list[subprocess.Popen[bytes]], folder: Path) -> None:
    """Stop the `jupyter lab`s, then the jobs their in-process services left running in
    ``folder`` (nobody would end them)."""
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=30)
    end_runners_in(folder)


@pytest.fixture(scope="module")
def plain_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """One plain `jupyter lab` (the server extension enabled, as installed) for the
    tests that need no other: its URL with its token, and its folder."""
    procs: list[subprocess.Popen[bytes]] = []
    folder = tmp_path_factory.mktemp("plain-lab")
    yield start_jupyter_lab(folder, procs), folder
    stop(procs, folder)


@pytest.fixture
def start_lab(tmp_path: Path) -> Iterator[Callable[..., str]]:
    """Start `jupyter lab` of a configuration of its own; return the URL with its token."""
    procs: list[subprocess.Popen[bytes]] = []
    yield lambda server_config=None: start_jupyter_lab(tmp_path, procs, server_config)
    stop(procs, tmp_path)


#: notes the text of every notice (toast) the page shows from now on, in
#: window.nbjobsToasts, however briefly it stays
NOTE_TOASTS = """() => {
  window.nbjobsToasts = [];
  new MutationObserver(() => {
    for (const toast of document.querySelectorAll('.Toastify__toast')) {
      if (!window.nbjobsToasts.includes(toast.textContent)) {
        window.nbjobsToasts.push(toast.textContent);
      }
    }
  }).observe(document.body, { childList: true, subtree: true, characterData: true });
}"""


def open_lab(browser: BrowserContext, url: str) -> Page:
    page = browser.new_page()
    page.goto(url)
    page.wait_for_selector(".jp-LabShell", timeout=60_000)
    expect(page.locator(".jp-DirListing-item").first).to_be_visible(timeout=60_000)
    dismiss_news(page)
    return page


def test_plain_jupyter_lab_saves_then_runs_a_job_in_process(
    plain_lab: tuple[str, Path], browser: BrowserContext
):
    url, folder = plain_lab
    page = open_lab(browser, url)
    try:
        hello = open_notebook(page, "hello.ipynb")
        hello.locator(".jp-CodeCell .cm-content").last.click()
        page.keyboard.press("End")
        page.keyboard.type("  # edited before submit")
        # the notice shows for 4 s, perhaps over before the dialog is filled in and sent
        # on a loaded machine: every notice shown meanwhile is noted as it comes
        page.evaluate(NOTE_TOASTS)
        submit(page, hello, "standalone", steps="3")

        shown = page.evaluate("() => window.nbjobsToasts")
        assert any("Saved hello.ipynb before submitting it." in text for text in shown), shown
        assert "# edited before submit" in (folder / "root" / "hello.ipynb").read_text()
        row = job_row(page, "standalone")
        expect(row.locator(".nbjobs-Job-state")).to_have_text("Succeeded", timeout=JOB_TIMEOUT)
        shot(page, "10-standalone-succeeded")
    finally:
        page.close()


def test_the_panel_stops_asking_when_closed_and_nothing_runs(
    plain_lab: tuple[str, Path], browser: BrowserContext
):
    # the Lab as it opens the first time (another test's open panel and notebook, which
    # its workspace kept, left behind)
    page = open_lab(browser, plain_lab[0] + "&reset")
    asked: list[float] = []
    page.on(
        "request",
        lambda r: asked.append(time.monotonic()) if "/nbjobs/api/jobs" in r.url else None,
    )
    try:
        jobs_panel(page)
        page.wait_for_timeout(12_000)
        open_asks = len(asked)
        page.locator(".jp-SideBar .lm-TabBar-tab[data-id='nbjobs-jobs-panel']").click()
        expect(page.locator("#nbjobs-jobs-panel")).to_be_hidden()
        asked.clear()
        page.wait_for_timeout(12_000)
        closed_asks = len(asked)
        jobs_panel(page)
        page.wait_for_timeout(1_000)

        # Open and idle: 5 s, then 10 s apart (backing off); closed: not at all.
        assert 1 <= open_asks <= 3
        assert closed_asks == 0
        assert len(asked) == 1  # opening the panel asks at once
    finally:
        page.close()


def test_without_the_server_extension_the_panel_says_what_to_do(start_lab, browser: BrowserContext):
    url = start_lab({"ServerApp": {"jpserver_extensions": {"nbjobs.server_extension": False}}})
    page = open_lab(browser, url)
    try:
        notice = jobs_panel(page).locator(".nbjobs-JobsPanel-notice")

        expect(notice).to_contain_text("The nbjobs server extension is not running")
        expect(notice).to_contain_text("jupyter server extension list")
        assert "Error" not in notice.inner_text()
        shot(page, "11-no-server-extension")
    finally:
        page.close()

"""Fixtures for a folder of Lab test files that share one hub, one chromium and one
logged-in page (a package of tests/lab): each file used to start all three for its one
test, which cost more CPU than the test itself.

A package's conftest defines its own `hub` fixture, of package scope, and imports these::

    from ..one_hub import browser, chromium, folder, lab, playwright, starts_afresh  # noqa: F401

Between two tests `starts_afresh` gives the next one what a hub of its own gave it: no
jobs (cancelled and removed), none of the last test's output files in Ada's home, no
kernel running, and JupyterLab's layout as it is after a login (its workspace reset).
tests/conftest.py's scheduler sends such a folder whole to one worker (ONE_HUB_FOLDERS).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Playwright, expect, sync_playwright

from .conftest import CHROMIUM, Hub, api, launch_chromium, log_in, start_limit, user_context
from .steps import clear_jobs


@pytest.fixture(scope="package")
def playwright() -> Iterator[Playwright]:
    """One Playwright for the folder's files."""
    assert Path(CHROMIUM).exists(), "apt-get install -y chromium"
    with sync_playwright() as pw:
        yield pw


@pytest.fixture(scope="package")
def chromium(playwright: Playwright) -> Iterator[Browser]:
    """One chromium for the folder's files, on a fresh profile of its own."""
    browser = launch_chromium(playwright)
    yield browser
    browser.close()


@pytest.fixture(scope="package")
def browser(chromium: Browser) -> Iterator[BrowserContext]:
    """Ada's browser: a context of the folder's chromium."""
    context = user_context(chromium)
    yield context
    context.close()


@pytest.fixture(scope="package")
def lab(hub: Hub, browser: BrowserContext) -> Page:
    """Ada, logged in once for the folder's files, in her JupyterLab."""
    return log_in(hub, browser)


@dataclass
class Folder:
    """What the folder's tests found: Ada's files before the first, the tests begun."""

    first_files: set[Path]
    begun: list[str] = field(default_factory=list)


@pytest.fixture(scope="package")
def folder(hub: Hub) -> Folder:
    return Folder(set(hub.home("ada").iterdir()))


@pytest.fixture(autouse=True)
def starts_afresh(hub: Hub, lab: Page, folder: Folder, request: pytest.FixtureRequest) -> None:
    """Before each test but the first (which has them from the start): no jobs (the last
    test's stopped and removed), none of the files the tests made in Ada's home, no
    kernel running, and JupyterLab as it is after a login; the test's screenshots show
    its own jobs, files and kernels only, as they did on a hub of its own. Not after the
    last test, whose page nobody looks at again."""
    folder.begun.append(request.node.nodeid)
    if len(folder.begun) == 1:
        return  # the folder's first test, on the page the login opened
    home = hub.home("ada")
    clear_jobs(lab)
    # the kernels of the notebooks it opened: the status bar counts them
    status, sessions = api(lab, "GET", "/user/ada/api/sessions")
    assert status == 200, sessions
    assert isinstance(sessions, list), sessions
    for session in sessions:
        api(lab, "DELETE", f"/user/ada/api/sessions/{session['id']}")
    for made in set(home.iterdir()) - folder.first_files:
        if made.is_file() and not made.name.startswith("."):
            made.unlink()
    # ?reset: the default layout (the file browser, no notebook open), not the last one
    lab.goto(f"{hub.url}/user/ada/lab?reset")
    lab.wait_for_selector(".jp-LabShell", timeout=start_limit())
    expect(lab.locator(".jp-DirListing-item").first).to_be_visible(timeout=60_000)

"""Steps of the Lab tests as Ada takes them (open a notebook, the Jobs panel, Submit Job)
and the API calls that set up what a test is not about: shared by every Lab test file.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from urllib.parse import quote

from nbjobs.programs.demo import PASSWORD
from playwright.sync_api import Browser, Locator, Page, expect

from .conftest import ARTIFACTS, Hub, api, api_json, start_limit, user_context

JOB_TIMEOUT = 120_000  # a job on two busy cores: kernel start, cells, output
API = "/user/ada/nbjobs/api/"
DASHBOARD = "/services/nbjobs/"
ACTIVE = {"queued", "starting", "running"}


def show_file_browser(page: Page) -> None:
    # A sidebar tab toggles: click it only when its panel is not shown.
    if not page.locator("#filebrowser").is_visible():
        page.locator(".jp-SideBar .lm-TabBar-tab[data-id='filebrowser']").click()
    expect(page.locator("#filebrowser")).to_be_visible()


def open_notebook(page: Page, name: str) -> Locator:
    """Open a notebook from the file browser; its panel."""
    show_file_browser(page)
    item = page.locator(".jp-DirListing-itemText", has_text=re.compile(f"^{re.escape(name)}$"))
    current = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current")
    for attempt in range(3):
        # a double-click that lands while the listing redraws opens nothing: again, as a
        # person would
        item.dblclick()
        try:
            expect(current).to_contain_text(name)
            break
        except AssertionError:
            if attempt == 2:
                raise
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    expect(panel.locator(".jp-Notebook")).to_be_visible()
    return panel


def view_log(page: Page, row: Locator) -> Locator:
    """Open a job's log from its row in the Jobs panel (its Log button); the log's tab."""
    row.locator("button[aria-label='View log']").click()
    return page.locator(".nbjobs-LogView:visible")


def jobs_panel(page: Page) -> Locator:
    panel = page.locator("#nbjobs-jobs-panel")
    if not panel.is_visible():
        page.locator(".jp-SideBar .lm-TabBar-tab[data-id='nbjobs-jobs-panel']").click()
    expect(panel).to_be_visible()
    return panel


def job_row(page: Page, name: str) -> Locator:
    """The newest job of that name in the Jobs panel."""
    return (
        jobs_panel(page)
        .locator(".nbjobs-Job")
        .filter(has=page.locator(".nbjobs-Job-name", has_text=re.compile(f"^{re.escape(name)}$")))
        .first
    )


def panel_shot(page: Page, name: str) -> None:
    """The Jobs panel down to its last job (the picture in the README)."""
    # No hover or focus ring on the picture.
    page.mouse.move(900, 600)
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    box = jobs_panel(page).bounding_box()
    last = jobs_panel(page).locator(".nbjobs-Job").last.bounding_box()
    assert box is not None
    assert last is not None
    height = last["y"] + last["height"] - box["y"] + 8
    clip = {"x": box["x"], "y": box["y"], "width": box["width"], "height": height}
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), clip=clip)


def my_jobs(page: Page) -> list[dict]:
    return api_json(page, API + "jobs?limit=100")["jobs"]  # type: ignore[index]


def settle(page: Page) -> None:
    """Cancel whatever of Ada's jobs still waits or runs, so a test starts on free slots."""
    for job in my_jobs(page):
        if job["state"] in ACTIVE:
            api(page, "POST", API + f"jobs/{job['id']}/cancel")
    deadline = time.monotonic() + JOB_TIMEOUT / 1000
    while any(job["state"] in ACTIVE for job in my_jobs(page)):
        assert time.monotonic() < deadline, "jobs did not stop after cancel"
        time.sleep(0.5)


def clear_jobs(page: Page) -> None:
    """Stop and remove all of Ada's jobs: the panel starts from an empty list."""
    settle(page)
    for job in my_jobs(page):
        status, body = api(page, "DELETE", API + f"jobs/{job['id']}")
        assert status in (200, 204), body


def submit_by_api(page: Page, path: str, flavor: str, name: str, **parameters: object) -> dict:
    """Submit without the dialog, for a test whose subject is something else."""
    request = {"path": path, "flavor": flavor, "name": name, "parameters": parameters}
    status, job = api(page, "POST", API + "jobs", request)
    assert status == 201, job
    assert isinstance(job, dict)
    return job


def wait_for(page: Page, job_id: str, *states: str) -> dict:
    deadline = time.monotonic() + JOB_TIMEOUT / 1000
    while True:
        status, job = api(page, "GET", API + f"jobs/{job_id}")
        assert status == 200, job
        assert isinstance(job, dict)
        if job["state"] in states:
            return job
        assert time.monotonic() < deadline, f"job {job_id} is still {job['state']}"
        time.sleep(0.5)


def finished_job(page: Page, name: str) -> dict:
    """A job that succeeded: hello.ipynb on a GPU flavor (it does not wait for the CPU slot)."""
    job = submit_by_api(page, "hello.ipynb", "t4", name, steps=5)
    return wait_for(page, job["id"], "succeeded")


def rows_named(page: Page, name: str) -> Locator:
    """The panel's rows of the jobs called exactly ``name`` (a re-run adds one)."""
    exactly = re.compile(rf"^{re.escape(name)}$")
    return (
        jobs_panel(page)
        .locator(".nbjobs-Job")
        .filter(has=page.locator(".nbjobs-Job-name", has_text=exactly))
    )


def forget_last_flavor(page: Page) -> None:
    """The Submit dialog starts from the flavor picked last in this browser: forget it."""
    page.evaluate("() => localStorage.removeItem('nbjobs:last-flavor')")


def refresh_panel(page: Page) -> None:
    jobs_panel(page).locator(".nbjobs-JobsPanel-refresh").click()


def submit_dialog(page: Page) -> Locator:
    dialog = page.locator(".nbjobs-SubmitDialog")
    expect(dialog).to_be_visible()
    return dialog


def submit(
    page: Page, panel: Locator, name: str, flavor: str | None = None, **parameters: str
) -> None:
    """Submit Job from the notebook toolbar, by pressing Enter; by default with the
    flavor the dialog picks (the first that can start now)."""
    panel.locator(".jp-Toolbar-item[data-jp-item-name='nbjobs-submit'] button").click()
    dialog = submit_dialog(page)
    if flavor:
        dialog.locator(f".nbjobs-Flavor[data-flavor='{flavor}'] input").check()
    for parameter, value in parameters.items():
        dialog.locator(f".nbjobs-Parameter input[name='{parameter}']").fill(value)
    dialog.locator(".nbjobs-SubmitForm-name input").fill(name)
    dialog.locator(".nbjobs-SubmitForm-name input").press("Enter")
    expect(dialog).to_be_hidden()


def close_current_tab(page: Page, discard: bool = False) -> None:
    tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current")
    tab.locator(".lm-TabBar-tabCloseIcon").click()
    if discard:
        page.locator(".jp-Dialog button", has_text=re.compile("^Discard")).click()


def at_path(path: str) -> re.Pattern[str]:
    """A page's address whose path is ``path`` (a login's or an invitation's own address
    names the page it leads to in its query: that is not being there)."""
    return re.compile(f"^https?://[^/]+{re.escape(path)}([?#].*)?$")


def user_logged_in(chromium: Browser, hub: Hub, user: str, then: str = DASHBOARD) -> Iterator[Page]:
    """``user`` in a browser of their own (their own cookies: a context of the
    test's chromium), logged in at the hub's login page and taken from there to ``then`` (the
    dashboard by default: a user whose JupyterLab no test opens has no server started
    and no Lab loaded for nothing)."""
    context = user_context(chromium, height=1000)
    page = context.new_page()
    page.goto(f"{hub.url}/hub/login?next={quote(then)}")
    page.fill("#username_input", user)
    page.fill("#password_input", PASSWORD)
    page.click("#login_submit", no_wait_after=True)  # the wait below is the limit
    # the whole way there (the hub's OAuth for the dashboard), before a test goes on
    page.wait_for_url(at_path(then), timeout=start_limit())
    yield page
    context.close()

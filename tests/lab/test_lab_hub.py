"""The Lab extension in a real browser, through a real JupyterHub, as a student uses it.

The tests share one hub and one logged-in page and build on each other's
jobs, in file order: the last one photographs a panel with jobs in every state.
"""

from __future__ import annotations

import re

from playwright.sync_api import Locator, Page, expect

from .conftest import ARTIFACTS, Hub, api_json, shot

JOB_TIMEOUT = 120_000  # a job on two busy cores: kernel start, cells, output


def show_file_browser(page: Page) -> None:
    # A sidebar tab toggles: click it only when its panel is not shown.
    if not page.locator("#filebrowser").is_visible():
        page.locator(".jp-SideBar .lm-TabBar-tab[data-id='filebrowser']").click()
    expect(page.locator("#filebrowser")).to_be_visible()


def open_notebook(page: Page, name: str) -> Locator:
    """Open a notebook from the file browser; its panel."""
    show_file_browser(page)
    page.locator(".jp-DirListing-itemText", has_text=re.compile(f"^{re.escape(name)}$")).dblclick()
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    expect(panel.locator(".jp-Notebook")).to_be_visible()
    expect(page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current")).to_contain_text(name)
    return panel


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
    box = jobs_panel(page).bounding_box()
    last = jobs_panel(page).locator(".nbjobs-Job").last.bounding_box()
    assert box is not None
    assert last is not None
    height = last["y"] + last["height"] - box["y"] + 8
    clip = {"x": box["x"], "y": box["y"], "width": box["width"], "height": height}
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), clip=clip)


def submit_dialog(page: Page) -> Locator:
    dialog = page.locator(".nbjobs-SubmitDialog")
    expect(dialog).to_be_visible()
    return dialog


def submit(page: Page, panel: Locator, name: str, **parameters: str) -> None:
    """Submit Job from the notebook toolbar with the first free flavor, by pressing Enter."""
    panel.locator(".jp-Toolbar-item[data-jp-item-name='nbjobs-submit'] button").click()
    dialog = submit_dialog(page)
    for parameter, value in parameters.items():
        dialog.locator(f".nbjobs-Parameter input[name='{parameter}']").fill(value)
    dialog.locator(".nbjobs-SubmitForm-name input").fill(name)
    dialog.locator(".nbjobs-SubmitForm-name input").press("Enter")
    expect(dialog).to_be_hidden()


def test_the_panel_starts_empty_and_says_how_to_begin(lab: Page):
    panel = jobs_panel(lab)

    expect(panel.locator(".nbjobs-JobsPanel-notice")).to_contain_text("No jobs yet")
    shot(lab, "01-empty-panel")


def test_the_dialog_shows_flavors_with_availability_and_parameters_from_the_cell(lab: Page):
    panel = open_notebook(lab, "slow.ipynb")
    item = panel.locator(".jp-Toolbar-item[data-jp-item-name='nbjobs-submit']")
    button = item.locator("button")
    expect(item).to_contain_text("Submit Job")

    button.click()
    dialog = submit_dialog(lab)
    cpu = dialog.locator(".nbjobs-Flavor[data-flavor='cpu']")
    big = dialog.locator(".nbjobs-Flavor[data-flavor='a100x8']")
    seconds = dialog.locator(".nbjobs-Parameter input[name='seconds']")

    expect(cpu.locator("input")).to_be_checked()
    expect(cpu).to_contain_text("no GPU · 1 CPU · up to 10m 00s")
    expect(cpu).to_contain_text("1 free now · no queue")
    expect(big.locator("input")).to_be_disabled()
    expect(big).to_contain_text(
        "8 \N{MULTIPLICATION SIGN} A100 GPU · 32 CPU · 256Gi memory · up to 4h 00m"
    )
    expect(big).to_contain_text("needs 8 GPU(s) and this machine has 0 GPUs")
    expect(seconds).to_have_value("1.5")
    expect(
        dialog.locator(".nbjobs-Parameter").filter(has=lab.locator("input[name='seconds']"))
    ).to_contain_text("float")

    seconds.fill("soon")
    seconds.press("Enter")
    expect(dialog.locator(".nbjobs-Parameter-error")).to_have_text(
        "seconds must be a number, like 0.5"
    )
    expect(seconds).to_be_focused()
    shot(lab, "02-dialog-invalid-parameter")
    dialog.locator("button", has_text="Cancel").click()
    expect(dialog).to_be_hidden()


def test_submit_queue_run_succeed_and_open_the_output(lab: Page, hub: Hub):
    slow = open_notebook(lab, "slow.ipynb")
    submit(lab, slow, "slow first", seconds="2")
    hello = open_notebook(lab, "hello.ipynb")
    submit(lab, hello, "hello quick", steps="5")

    first, second = job_row(lab, "slow first"), job_row(lab, "hello quick")
    # One CPU slot: the second job waits for the first, and says where it stands.
    expect(second.locator(".nbjobs-Job-state")).to_have_text("Queued, #1 in line", timeout=10_000)
    expect(first.locator(".nbjobs-Job-state")).to_have_text("Running", timeout=JOB_TIMEOUT)
    expect(first.locator(".nbjobs-Job-progressText")).to_have_text(
        re.compile(r"^[1-4] of [56] cells$"), timeout=JOB_TIMEOUT
    )
    expect(first.locator(".nbjobs-Job-progress")).to_be_visible()
    shot(lab, "03-running-and-queued")

    expect(second.locator(".nbjobs-Job-state")).to_have_text("Succeeded", timeout=JOB_TIMEOUT)
    expect(first.locator(".nbjobs-Job-state")).to_have_text("Succeeded")
    # A notification says so, with the way to the result.
    toast = lab.locator(".Toastify__toast", has_text='Job "hello quick" succeeded')
    expect(toast).to_be_visible()
    expect(toast.locator("button", has_text="Open output")).to_be_visible()

    second.locator("button[aria-label='Open output']").click()
    output = lab.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    expect(lab.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current")).to_contain_text(
        re.compile(r"hello\.\d{4}-.*\.ipynb")
    )
    expect(output.locator(".jp-OutputArea-output").last).to_contain_text("'steps': 5")
    shot(lab, "04-output-opened")
    job = api_json(lab, "/user/ada/nbjobs/api/jobs?limit=5")["jobs"][0]  # type: ignore[index]
    assert job["name"] == "hello quick"
    assert job["parameters"] == {"steps": 5}
    assert (hub.home("ada") / job["output_path"]).exists()


def test_a_failed_job_opens_at_the_failing_cell(lab: Page):
    # From the file browser's context menu this time.
    show_file_browser(lab)
    lab.locator(".jp-DirListing-itemText", has_text=re.compile(r"^fail\.ipynb$")).click(
        button="right"
    )
    lab.locator(".lm-Menu-item", has_text="Submit Job").click()
    dialog = submit_dialog(lab)
    expect(dialog).to_contain_text('no cell tagged "parameters"')
    dialog.locator("button", has_text="Submit").click()
    expect(dialog).to_be_hidden()

    row = job_row(lab, "fail")
    expect(row.locator(".nbjobs-Job-state")).to_have_text("Failed", timeout=JOB_TIMEOUT)
    expect(row.locator(".nbjobs-Job-message")).to_contain_text("raised ValueError: bad input")
    expect(lab.locator(".Toastify__toast", has_text='Job "fail" failed')).to_be_visible()

    row.locator("button[aria-label='Open output']").click()
    active = lab.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell.jp-mod-active")
    expect(active).to_contain_text("raise ValueError('bad input: no rows')")
    expect(active.locator(".jp-OutputArea-output")).to_contain_text("ValueError")
    expect(active).to_be_in_viewport()
    shot(lab, "05-failed-output-at-failing-cell")


def test_the_log_viewer_shows_the_job_log(lab: Page):
    row = job_row(lab, "hello quick")
    row.locator("button[aria-label='View log']").click()

    log = lab.locator(".nbjobs-LogView:visible")
    expect(log.locator(".nbjobs-LogView-text")).to_contain_text("step   5  loss")
    expect(log.locator(".nbjobs-LogView-status")).to_have_text(
        "The job has ended; this is its whole log."
    )
    shot(lab, "06-log-viewer")


def test_cancel_a_running_job(lab: Page):
    slow = open_notebook(lab, "slow.ipynb")
    submit(lab, slow, "slow to cancel", seconds="30")
    row = job_row(lab, "slow to cancel")
    expect(row.locator(".nbjobs-Job-state")).to_have_text("Running", timeout=JOB_TIMEOUT)

    row.locator("button[aria-label='Cancel']").click()

    expect(row.locator(".nbjobs-Job-state")).to_have_text("Cancelled", timeout=JOB_TIMEOUT)
    expect(row.locator("button[aria-label='Cancel']")).to_be_hidden()
    expect(row.locator("button[aria-label='Re-run']")).to_be_visible()


def test_a_refusal_is_shown_in_the_dialog_as_the_services_sentence(lab: Page, hub: Hub):
    hello = open_notebook(lab, "hello.ipynb")
    hello.locator(".jp-Toolbar-item[data-jp-item-name='nbjobs-submit'] button").click()
    dialog = submit_dialog(lab)
    # The file goes away while the dialog is open: the service refuses the job.
    (hub.home("ada") / "hello.ipynb").rename(hub.home("ada") / "hello.bak")
    try:
        dialog.locator("button", has_text="Submit").click()
        error = dialog.locator(".nbjobs-SubmitForm-error")
        expect(error).to_be_visible()
        expect(error).to_contain_text("hello.ipynb")
        assert "Traceback" not in error.inner_text()
        shot(lab, "07-dialog-server-refusal")
    finally:
        (hub.home("ada") / "hello.bak").rename(hub.home("ada") / "hello.ipynb")
    dialog.locator("button", has_text="Cancel").click()
    expect(dialog).to_be_hidden()


def test_remove_a_finished_job_from_the_list(lab: Page):
    before = jobs_panel(lab).locator(".nbjobs-Job").count()
    row = job_row(lab, "slow to cancel")

    row.locator("button[aria-label='Remove from list']").click()

    expect(jobs_panel(lab).locator(".nbjobs-Job")).to_have_count(before - 1)
    expect(job_row(lab, "slow to cancel")).to_have_count(0)


def test_the_panel_with_jobs_in_every_state(lab: Page):
    slow = open_notebook(lab, "slow.ipynb")
    submit(lab, slow, "slow to cancel", seconds="30")
    row = job_row(lab, "slow to cancel")
    expect(row.locator(".nbjobs-Job-state")).to_have_text("Running", timeout=JOB_TIMEOUT)
    row.locator("button[aria-label='Cancel']").click()
    expect(row.locator(".nbjobs-Job-state")).to_have_text("Cancelled", timeout=JOB_TIMEOUT)
    submit(lab, slow, "train resnet", seconds="20")
    submit(lab, slow, "sweep lr=0.3", seconds="1")
    running = job_row(lab, "train resnet")
    expect(running.locator(".nbjobs-Job-progressText")).to_have_text(
        re.compile(r"^[1-5] of [56] cells$"), timeout=JOB_TIMEOUT
    )
    expect(job_row(lab, "sweep lr=0.3").locator(".nbjobs-Job-state")).to_have_text(
        "Queued, #1 in line"
    )
    lab.locator(".Toastify__close-button").evaluate_all("bs => bs.forEach(b => b.click())")
    states = (
        jobs_panel(lab)
        .locator(".nbjobs-Job")
        .evaluate_all("rows => rows.map(r => r.dataset.state)")
    )
    assert {"queued", "running", "succeeded", "failed", "cancelled"} <= set(states)
    shot(lab, "08-jobs-panel-light")
    panel_shot(lab, "jobs-panel")

    lab.keyboard.press("Control+Shift+C")
    palette = lab.locator("#command-palette input")
    palette.fill("Use Theme: JupyterLab Dark")
    palette.press("Enter")
    expect(lab.locator("body[data-jp-theme-light='false']")).to_have_count(1)
    expect(running.locator(".nbjobs-Job-state")).to_be_visible()
    shot(lab, "09-jobs-panel-dark")
    panel_shot(lab, "jobs-panel-dark")
    running.locator("button[aria-label='Cancel']").click()
    job_row(lab, "sweep lr=0.3").locator("button[aria-label='Cancel']").click()

"""The Lab extension in a real browser, through a real JupyterHub, as a student uses it:
the Jobs panel and the Submit Job dialog, a job's log, output, cancel and re-run, and
what she is told when something fails (a refusal, a notebook gone, a save that fails,
the job service down).

The tests share the folder's hub and logged-in page (./conftest.py) but each sets up the
jobs it needs (through the API where the UI is not what it tests), so they pass in any
order.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import time
from pathlib import Path

import nbformat
from playwright.sync_api import Locator, Page, expect

from ..conftest import Hub, api, api_json, notebook, shot
from ..steps import (
    API,
    JOB_TIMEOUT,
    clear_jobs,
    close_current_tab,
    finished_job,
    forget_last_flavor,
    job_row,
    jobs_panel,
    my_jobs,
    open_notebook,
    refresh_panel,
    rows_named,
    settle,
    show_file_browser,
    submit,
    submit_by_api,
    submit_dialog,
    view_log,
    wait_for,
)


def test_the_panel_starts_empty_and_says_how_to_begin(lab: Page):
    clear_jobs(lab)
    panel = jobs_panel(lab)
    refresh_panel(lab)

    expect(panel.locator(".nbjobs-JobsPanel-notice")).to_contain_text("No jobs yet")
    shot(lab, "01-empty-panel")


def test_the_dialog_shows_flavors_with_availability_and_parameters_from_the_cell(lab: Page):
    settle(lab)
    forget_last_flavor(lab)
    panel = open_notebook(lab, "slow.ipynb")
    item = panel.locator(".jp-Toolbar-item[data-jp-item-name='nbjobs-submit']")
    button = item.locator("button")
    expect(item).to_contain_text("Submit Job")

    button.click()
    dialog = submit_dialog(lab)
    # nothing was edited: no "saved" notice (a kernel filling in metadata is no edit)
    expect(lab.locator(".Toastify__toast", has_text="before submitting")).to_have_count(0)
    cpu = dialog.locator(".nbjobs-Flavor[data-flavor='cpu']")
    t4 = dialog.locator(".nbjobs-Flavor[data-flavor='t4']")
    big = dialog.locator(".nbjobs-Flavor[data-flavor='a100x8']")
    seconds = dialog.locator(".nbjobs-Parameter input[name='seconds']")

    expect(cpu.locator("input")).to_be_checked()
    expect(cpu).to_contain_text("no GPU · 1 CPU · up to 10 min")
    expect(cpu).to_contain_text("1 free now · no queue")
    # A GPU flavor counts GPUs, not job slots.
    expect(t4.locator("input")).to_be_enabled()
    expect(t4).to_contain_text("1 \N{MULTIPLICATION SIGN} T4 (t4)")
    expect(t4).to_contain_text("4 of 4 GPUs free · no queue")
    # A flavor that is half a GPU counts halves: 4 GPUs of 2 slots each.
    half = dialog.locator(".nbjobs-Flavor[data-flavor='t4-half']")
    expect(half).to_contain_text("half of one T4 GPU · 2 CPU · 8Gi memory · up to 1 h")
    expect(half).to_contain_text("8 of 8 slices free · no queue")
    shot(lab, "02-dialog-flavors")
    expect(big.locator("input")).to_be_disabled()
    expect(big).to_contain_text(
        "8 \N{MULTIPLICATION SIGN} A100 GPU · 32 CPU · 256Gi memory · up to 4 h"
    )
    expect(big).to_contain_text("needs 8 GPU(s) and this machine has 4 GPUs")
    expect(seconds).to_have_value("1.5")
    expect(
        dialog.locator(".nbjobs-Parameter").filter(has=lab.locator("input[name='seconds']"))
    ).to_contain_text("float")
    # where the result is written, as the user knows the place, and the room left there
    expect(dialog.locator(".nbjobs-SubmitForm-where")).to_have_text(
        re.compile(r"^Written in /\S+ \(\d[\d.]* (B|KiB|MiB|GiB|TiB) free there\)$")
    )
    expect(dialog.locator(".nbjobs-SubmitForm-warning")).to_have_count(0)  # it fits

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
    settle(lab)
    # The first job holds the one CPU slot until the test has seen the second one wait
    # (a job of a few seconds once ended before a loaded machine showed the second
    # submitted, which then never queued): its third cell waits for a file.
    gate = hub.home("ada") / f"held-open-{time.monotonic_ns()}"
    nbformat.write(
        notebook(
            "import os, time",
            "while not os.path.exists(gate):\n    time.sleep(0.2)",
            "print('let through')",
            parameters=f"gate = {str(gate)!r}",
        ),
        hub.home("ada") / "held.ipynb",
    )
    try:
        held = open_notebook(lab, "held.ipynb")
        submit(lab, held, "held first", flavor="cpu")
        hello = open_notebook(lab, "hello.ipynb")
        submit(lab, hello, "hello quick", flavor="cpu", steps="5")

        first, second = job_row(lab, "held first"), job_row(lab, "hello quick")
        # One CPU slot: the second job waits for the first, and says where it stands.
        expect(second.locator(".nbjobs-Job-state")).to_have_text(
            "Queued, #1 in line", timeout=JOB_TIMEOUT
        )
        expect(first.locator(".nbjobs-Job-state")).to_have_text("Running", timeout=JOB_TIMEOUT)
        expect(first.locator(".nbjobs-Job-progressText")).to_have_text(
            re.compile(r"^code cell [1-5] of [45]$"), timeout=JOB_TIMEOUT
        )
        expect(first.locator(".nbjobs-Job-progress")).to_be_visible()
        # Each row says on what it runs and for how long (ticking in the browser).
        expect(first.locator(".nbjobs-Job-flavor")).to_have_text("cpu")
        expect(first.locator(".nbjobs-Job-elapsed")).to_have_text(
            re.compile(r"^\d+s$|^\d+m \d\ds$")
        )
        expect(second.locator(".nbjobs-Job-flavor")).to_have_text("cpu")
        expect(second.locator(".nbjobs-Job-elapsed")).to_have_text(re.compile(r"^waiting \d+s$"))
        shot(lab, "03-running-and-queued")
    finally:
        gate.touch()  # never left holding the slot the next tests need

    expect(second.locator(".nbjobs-Job-state")).to_have_text("Succeeded", timeout=JOB_TIMEOUT)
    expect(first.locator(".nbjobs-Job-state")).to_have_text("Succeeded")
    # A notification says so, with the way to the result.
    toast = lab.locator(".Toastify__toast", has_text='Job "hello quick" succeeded')
    expect(toast).to_be_visible()
    expect(second.locator(".nbjobs-Job-elapsed")).to_have_text(re.compile(r"^\d+s$|^\d+m \d\ds$"))

    toast.locator("button", has_text="Open output").click()
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


def test_the_log_viewer_follows_a_running_job(lab: Page, hub: Hub):
    # After "tick 2" the job waits for a file the test makes once it has seen the log
    # follow a running job: on a loaded machine the browser's steps took most of the
    # seconds a job of ticks had left (its end would be a race, not an event).
    gate = hub.home("ada") / f"log-gate-{time.monotonic_ns()}"
    ticking = [f"print('tick {i}', flush=True); time.sleep(0.3)" for i in range(1, 9)]
    ticking.insert(2, "while not os.path.exists(gate):\n    time.sleep(0.2)")
    nbformat.write(
        notebook("import os, time", *ticking, parameters=f"gate = {str(gate)!r}"),
        hub.home("ada") / "ticks-held.ipynb",
    )
    try:
        ticks = open_notebook(lab, "ticks-held.ipynb")
        submit(lab, ticks, "ticking")
        row = job_row(lab, "ticking")
        expect(row.locator(".nbjobs-Job-state")).to_have_text("Running", timeout=JOB_TIMEOUT)

        log = view_log(lab, row)
        text, status = log.locator(".nbjobs-LogView-text"), log.locator(".nbjobs-LogView-status")
        expect(text).to_contain_text("tick 2", timeout=JOB_TIMEOUT)
        # Lines arrive while the job runs: the last ones are still to come.
        assert "tick 3" not in text.inner_text()
        expect(status).to_have_text("Following the log…")
        expect(row.locator(".nbjobs-Job-state")).to_have_text("Running")
        shot(lab, "06-log-viewer-following")
    finally:
        gate.touch()  # never left holding the slot the next tests need

    expect(text).to_contain_text("tick 5", timeout=JOB_TIMEOUT)
    expect(text).to_contain_text("tick 8", timeout=JOB_TIMEOUT)
    expect(status).to_have_text("The job has ended; this is its whole log.", timeout=JOB_TIMEOUT)
    expect(row.locator(".nbjobs-Job-state")).to_have_text("Succeeded", timeout=JOB_TIMEOUT)
    assert text.inner_text().count("tick 3") == 1  # a reconnect never repeats lines
    shot(lab, "06-log-viewer-ended")


def test_a_long_log_opens_at_its_end_and_says_what_is_not_shown(lab: Page):
    """2 MB of log: the tab asks for the last 1 MiB, not all of it, and says so."""
    job = submit_by_api(lab, "chatty.ipynb", "cpu", "chatty")
    wait_for(lab, job["id"], "succeeded")
    row = job_row(lab, "chatty")
    expect(row.locator(".nbjobs-Job-state")).to_have_text("Succeeded", timeout=JOB_TIMEOUT)

    log = view_log(lab, row)
    text, notice = log.locator(".nbjobs-LogView-text"), log.locator(".nbjobs-LogView-notice")
    expect(text).to_contain_text("chatty line 59999", timeout=JOB_TIMEOUT)
    expect(notice).to_be_visible()
    expect(notice).to_contain_text("of the log are not shown")
    expect(notice).to_contain_text(f"nbjobs logs {job['id']}")
    expect(log.locator(".nbjobs-LogView-status")).to_have_text(
        "The job has ended; this is the end of its log.", timeout=JOB_TIMEOUT
    )
    assert "chatty line 00000" not in text.inner_text()
    assert len(text.inner_text().encode()) <= 1024 * 1024
    shot(lab, "07-log-viewer-tail")


def test_cancel_a_running_job(lab: Page):
    slow = open_notebook(lab, "slow.ipynb")
    submit(lab, slow, "slow to cancel", seconds="30")
    row = job_row(lab, "slow to cancel")
    expect(row.locator(".nbjobs-Job-state")).to_have_text("Running", timeout=JOB_TIMEOUT)

    # while it runs, the buttons that cannot act say why, and stay where they are
    rerun = row.locator("button[aria-label='Re-run']")
    expect(rerun).to_be_disabled()
    expect(rerun).to_have_attribute("title", "running: cancel it first")
    expect(row.locator("button[aria-label='Open output']")).to_have_attribute(
        "title", "running: see the log"
    )
    box = rerun.bounding_box()
    row.locator("button[aria-label='Cancel']").click()
    # a running job is not cancelled by a stray click: the user is asked
    confirm = lab.locator(".jp-Dialog")
    expect(confirm).to_contain_text('Cancel job "slow to cancel"?')
    shot(lab, "09-confirm-cancel")
    confirm.locator("button", has_text="Keep running").click()
    expect(confirm).to_be_hidden()
    expect(row.locator(".nbjobs-Job-state")).to_have_text("Running")
    row.locator("button[aria-label='Cancel']").click()
    confirm.locator("button", has_text="Cancel job").click()

    expect(row.locator(".nbjobs-Job-state")).to_have_text("Cancelled", timeout=JOB_TIMEOUT)
    expect(row.locator("button[aria-label='Cancel']")).to_be_disabled()
    expect(row.locator("button[aria-label='Cancel']")).to_have_attribute(
        "title", "ended: nothing to cancel"
    )
    expect(rerun).to_be_enabled()
    assert rerun.bounding_box() == box  # nothing moved under the pointer


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
    finished_job(lab, "to remove")
    refresh_panel(lab)
    row = job_row(lab, "to remove")
    expect(row.locator(".nbjobs-Job-state")).to_have_text("Succeeded")
    before = jobs_panel(lab).locator(".nbjobs-Job").count()

    row.locator("button[aria-label='Remove from list']").click()
    lab.locator(".jp-Dialog button", has_text="Remove").click()

    expect(jobs_panel(lab).locator(".nbjobs-Job")).to_have_count(before - 1)
    expect(job_row(lab, "to remove")).to_have_count(0)
    assert "to remove" not in {job["name"] for job in my_jobs(lab)}


def test_a_job_submitted_elsewhere_appears_in_the_idle_panel_before_its_next_poll(lab: Page):
    """Pushed, not polled: the panel has been idle long enough to poll only every 20 s
    or more (what it did before the service pushed changes), and the job comes from
    outside the panel (as from a terminal or a schedule). How soon it appears on a quiet
    machine is bench/panel_bench.py's figure; here, only before the poll would have."""
    settle(lab)
    expect(jobs_panel(lab)).to_be_visible()
    refresh_panel(lab)
    time.sleep(16)  # quiet polls at 5, then 10 s: the next would be 20 s away
    job = submit_by_api(lab, "hello.ipynb", "t4", "from the terminal", steps=5)
    sent = time.monotonic()
    expect(job_row(lab, "from the terminal")).to_be_visible(timeout=8000)
    assert time.monotonic() - sent < 8  # the next poll is at least 14 s away
    # ... and its end arrives the same way: no refresh pressed
    expect(job_row(lab, "from the terminal").locator(".nbjobs-Job-state")).to_have_text(
        "Succeeded", timeout=JOB_TIMEOUT
    )
    assert wait_for(lab, job["id"], "succeeded")["state"] == "succeeded"


def test_without_mail_or_webhooks_the_bell_says_so_and_asks_for_nothing(lab: Page):
    """This hub's nbjobs.yaml sets up no notifications: no field to fill in vain."""
    jobs_panel(lab).locator(".nbjobs-JobsPanel-notifications").click()
    dialog = lab.locator(".jp-Dialog")
    expect(dialog.locator(".jp-Dialog-header")).to_have_text("Notifications")
    expect(dialog).to_contain_text("This nbjobs sends no email or webhook messages")
    expect(dialog.locator("input[name='email'], input[name='webhook']")).to_have_count(0)
    expect(dialog.locator("button", has_text="Save")).to_have_count(0)
    dialog.locator("button", has_text="Close").click()
    expect(dialog).to_be_hidden()


def test_the_submit_dialog_starts_from_the_flavor_picked_last(lab: Page):
    panel = open_notebook(lab, "hello.ipynb")
    submit(lab, panel, "on half a T4", flavor="t4-half", steps="3")
    panel.locator(".jp-Toolbar-item[data-jp-item-name='nbjobs-submit'] button").click()
    dialog = submit_dialog(lab)
    expect(dialog.locator(".nbjobs-Flavor[data-flavor='t4-half'] input")).to_be_checked()
    dialog.press("Escape")
    expect(dialog).to_be_hidden()
    forget_last_flavor(lab)  # the next tests' dialogs start from the usual default


def test_rerun_queues_a_new_job_that_runs(lab: Page):
    old = finished_job(lab, "run twice")
    refresh_panel(lab)
    rows = rows_named(lab, "run twice")
    expect(rows).to_have_count(1)

    rows.first.locator("button[aria-label='Re-run']").click()
    # the Submit dialog, filled in as the job ran: its flavor, parameters and name
    dialog = lab.locator(".nbjobs-SubmitDialog")
    expect(dialog.locator(".jp-Dialog-header")).to_have_text("Re-run")
    expect(dialog.locator(".nbjobs-Flavor[data-flavor='t4'] input")).to_be_checked()
    steps = dialog.locator(".nbjobs-Parameter input[name='steps']")
    expect(steps).to_have_value("5")
    expect(dialog.locator(".nbjobs-SubmitForm-name input")).to_have_value("run twice")
    steps.fill("7")
    shot(lab, "10-rerun-dialog")
    dialog.locator("button", has_text="Submit").click()

    expect(rows).to_have_count(2)
    expect(lab.locator(".Toastify__toast", has_text='Job "run twice" queued again')).to_be_visible()
    again = rows.first  # newest first
    assert again.get_attribute("data-job-id") != old["id"]
    expect(again.locator(".nbjobs-Job-state")).to_have_text("Succeeded", timeout=JOB_TIMEOUT)
    expect(rows.last).to_have_attribute("data-job-id", old["id"])
    rerun = wait_for(lab, again.get_attribute("data-job-id") or "", "succeeded")
    assert rerun["rerun_of"] == old["id"]
    assert rerun["flavor"] == "t4"
    assert rerun["parameters"] == {"steps": 7}  # changed in the dialog
    assert rerun["output_path"] != old["output_path"]


def test_a_command_job_reruns_from_the_panel_without_a_notebook(lab: Page):
    """A script's or command's job has no notebook for the Submit dialog to read: Re-run
    asks, then sends it again as it ran."""
    request = {"path": ".", "flavor": "t4", "name": "say hi", "command": "echo hi"}
    status, job = api(lab, "POST", API + "jobs", request)
    assert status == 201, job
    assert isinstance(job, dict)
    old = wait_for(lab, job["id"], "succeeded")
    refresh_panel(lab)
    rows = rows_named(lab, "say hi")
    expect(rows).to_have_count(1)

    rows.first.locator("button[aria-label='Re-run']").click()
    question = lab.locator(".jp-Dialog")
    expect(question.locator(".jp-Dialog-header")).to_have_text('Re-run the command "echo hi"?')
    question.locator("button", has_text="Re-run").click()

    expect(rows).to_have_count(2)
    again = rows.first.get_attribute("data-job-id") or ""
    rerun = wait_for(lab, again, "succeeded")
    assert rerun["rerun_of"] == old["id"]
    assert rerun["command"] == "echo hi"
    assert rerun["kind"] == "command"


def test_submit_job_from_the_command_palette(lab: Page):
    open_notebook(lab, "hello.ipynb")
    lab.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook").click()

    lab.keyboard.press("Control+Shift+C")
    palette = lab.locator("#command-palette input")
    palette.fill("Submit Job")
    expect(lab.locator("#command-palette .lm-CommandPalette-item.lm-mod-active")).to_contain_text(
        "Submit Job"
    )
    palette.press("Enter")

    dialog = submit_dialog(lab)
    notebook = dialog.locator(".nbjobs-SubmitForm-notebook")
    expect(notebook).to_have_text("Run hello.ipynb as a job on:")
    dialog.locator("button", has_text="Cancel").click()
    expect(dialog).to_be_hidden()


def focus_by_keys(page: Page, target: Locator, key: str = "Tab", presses: int = 80) -> None:
    """Press `key` until the focus is in `target`, as a keyboard user would."""
    handle = target.element_handle()
    seen = []
    for _ in range(presses):
        if page.evaluate("el => el.contains(document.activeElement)", handle):
            return
        page.keyboard.press(key)
        seen.append(
            page.evaluate(
                "() => { const a = document.activeElement; return a.tagName + '.' + "
                "a.className + ' ' + (a.getAttribute('aria-label') || a.title || ''); }"
            )
        )
    raise AssertionError(f"{key} never reached {target}; it went to:\n" + "\n".join(seen))


def test_keyboard_only_submit_pick_a_flavor_and_act_on_a_job(lab: Page):
    settle(lab)
    panel = open_notebook(lab, "hello.ipynb")
    lab.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook").click()
    lab.keyboard.press("Escape")  # command mode: the notebook, not a cell editor, has the keys

    # Tab reaches the notebook's toolbar, arrows move along it (Lab's toolbars hold
    # one tab stop), Enter presses Submit Job.
    toolbar = panel.locator(".jp-NotebookPanel-toolbar")
    focus_by_keys(lab, toolbar)
    focus_by_keys(
        lab,
        toolbar.locator(".jp-Toolbar-item[data-jp-item-name='nbjobs-submit']"),
        "ArrowRight",
        30,
    )
    forget_last_flavor(lab)  # the first that can start now: the CPU flavor here
    lab.keyboard.press("Enter")
    dialog = submit_dialog(lab)
    cpu = dialog.locator(".nbjobs-Flavor[data-flavor='cpu'] input")
    t4 = dialog.locator(".nbjobs-Flavor[data-flavor='t4'] input")
    expect(cpu).to_be_focused()
    expect(cpu).to_be_checked()

    half = dialog.locator(".nbjobs-Flavor[data-flavor='t4-half'] input")
    lab.keyboard.press("ArrowDown")  # radios: arrows pick, the disabled one is skipped
    expect(t4).to_be_checked()
    expect(t4).to_be_focused()
    lab.keyboard.press("ArrowDown")
    expect(half).to_be_checked()
    lab.keyboard.press("ArrowDown")
    expect(cpu).to_be_checked()  # wraps around past a100x8, which cannot run here
    lab.keyboard.press("ArrowUp")
    expect(half).to_be_checked()
    lab.keyboard.press("ArrowUp")
    expect(t4).to_be_checked()
    lab.keyboard.press("Tab")
    steps = dialog.locator(".nbjobs-Parameter input[name='steps']")
    expect(steps).to_be_focused()
    lab.keyboard.press("Control+A")
    lab.keyboard.type("5")
    shot(lab, "12-keyboard-dialog")
    lab.keyboard.press("Enter")
    expect(dialog).to_be_hidden()

    # The Jobs panel by command, and its buttons by Tab and Enter.
    lab.keyboard.press("Control+Shift+C")
    lab.locator("#command-palette input").fill("Show Jobs")
    lab.locator("#command-palette input").press("Enter")
    row = job_row(lab, "hello")
    expect(row.locator(".nbjobs-Job-flavor")).to_have_text("t4")
    expect(row.locator(".nbjobs-Job-state")).to_have_text("Succeeded", timeout=JOB_TIMEOUT)
    log_button = row.locator("button[aria-label='View log']")
    focus_by_keys(lab, jobs_panel(lab).locator(".nbjobs-JobsPanel-refresh"))
    focus_by_keys(lab, log_button, presses=20)
    expect(log_button).to_be_focused()
    outline = log_button.evaluate("b => getComputedStyle(b).outlineStyle")
    assert outline != "none", "a focused panel button must show where the focus is"
    shot(lab, "13-keyboard-panel-focus")
    lab.keyboard.press("Enter")
    expect(lab.locator(".nbjobs-LogView:visible .nbjobs-LogView-text")).to_contain_text("step   5")
    job = my_jobs(lab)[0]
    assert (job["name"], job["flavor"], job["parameters"]) == ("hello", "t4", {"steps": 5})


def test_a_notebook_whose_file_is_gone_is_refused_in_words(lab: Page, hub: Hub):
    # In Lab 4 every notebook is a file from the start (a new one is Untitled.ipynb
    # at once); one that is open while its file was moved or deleted is the case
    # of a notebook "not saved to a file".
    home = hub.home("ada")
    shutil.copyfile(home / "hello.ipynb", home / "gone.ipynb")
    panel = open_notebook(lab, "gone.ipynb")
    # Loaded, its kernel up and nothing unsaved (else Submit Job would save it back).
    tab = settle_notebook(lab, panel)
    (home / "gone.ipynb").unlink()
    expect(tab).not_to_have_class(re.compile(r"\bjp-mod-dirty\b"))
    before = len(my_jobs(lab))

    panel.locator(".jp-Toolbar-item[data-jp-item-name='nbjobs-submit'] button").click()

    error = lab.locator(".jp-Dialog", has_text="Submit Job")
    expect(error).to_contain_text("gone.ipynb is not saved as a file on the server")
    expect(error).to_contain_text("save the notebook")
    expect(lab.locator(".nbjobs-SubmitDialog")).to_have_count(0)
    shot(lab, "14-file-gone-refused")
    error.locator("button", has_text="Close").click()
    assert len(my_jobs(lab)) == before
    close_current_tab(lab)


def test_a_save_that_fails_stops_the_submit_and_says_so(lab: Page, hub: Hub):
    home = hub.home("ada")
    (home / "drafts").mkdir(exist_ok=True)
    shutil.copyfile(home / "hello.ipynb", home / "drafts" / "draft.ipynb")
    show_file_browser(lab)
    lab.locator(".jp-DirListing-itemText", has_text=re.compile(r"^drafts$")).dblclick()
    panel = open_notebook(lab, "draft.ipynb")
    settle_notebook(lab, panel)
    # The file browser leaves the folder first: one showing a folder that is gone puts up
    # a "Directory not found" dialog at its next refresh (on a slow machine, during the
    # test), which would stand over everything the next tests click.
    browse_home(lab)
    # Its folder goes away: the save before submit cannot succeed.
    (home / "drafts").rename(home / "drafts-moved")
    toast = lab.locator(".Toastify__toast", has_text="drafts/draft.ipynb was not submitted")
    try:
        panel.locator(".jp-CodeCell .cm-content").last.click()
        lab.keyboard.press("End")
        lab.keyboard.type("  # an edit")
        before = len(my_jobs(lab))

        panel.locator(".jp-Toolbar-item[data-jp-item-name='nbjobs-submit'] button").click()

        expect(toast).to_contain_text("it could not be saved")
        expect(lab.locator(".jp-Dialog", has_text="File Save Error")).to_be_visible()
        expect(lab.locator(".nbjobs-SubmitDialog")).to_have_count(0)
        shot(lab, "15-save-failed")
        lab.locator(".jp-Dialog button", has_text="Close").click()
        expect(toast).to_be_visible()  # it stays until the user has read it
        expect(toast).to_be_in_viewport(ratio=1)  # slid in
        shot(lab, "15-save-failed-notice")
        assert len(my_jobs(lab)) == before
    finally:
        (home / "drafts-moved").rename(home / "drafts")
    toast.locator(".jp-Notification-Toast-Close").click()
    lab.locator(".jp-Notebook").last.click()
    close_current_tab(lab, discard=True)
    expect(lab.locator(".jp-Dialog", has_text="Directory not found")).to_have_count(0)


def browse_home(page: Page) -> None:
    """The file browser back in the home folder, where the tests find their notebooks (a
    click that lands while the listing redraws is lost: once more, as a person would)."""
    for attempt in range(3):
        page.locator(".jp-BreadCrumbs-home").click()
        try:
            expect(page.locator(".jp-DirListing-itemText", has_text="hello.ipynb")).to_be_visible()
            return
        except AssertionError:
            if attempt == 2:
                raise


def settle_notebook(page: Page, panel: Locator) -> Locator:
    """Wait until the notebook has loaded, its kernel is idle and nothing is unsaved
    (moving its file before that fails Lab's own load); its tab."""
    expect(panel.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")).to_have_count(
        1, timeout=60_000
    )
    tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current")
    for _ in range(8):  # the kernel's first words may mark it changed again
        if "jp-mod-dirty" in (tab.get_attribute("class") or ""):
            panel.locator(".jp-Notebook").click()
            page.keyboard.press("Control+s")
        page.wait_for_timeout(1500)
        if "jp-mod-dirty" not in (tab.get_attribute("class") or ""):
            break
    expect(tab).not_to_have_class(re.compile(r"\bjp-mod-dirty\b"))
    return tab


def service_pid(hub: Hub) -> int:
    """The hub-managed job service's process (the hub started it from our workdir)."""
    config = str(hub.workdir / "nbjobs.yaml")
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"service" in argv and config.encode() in argv:
            return int(proc.name)
    raise AssertionError("the job service is not running")


def assert_plain_words(said: str) -> None:
    """A sentence for a person: no traceback, no exception class names."""
    assert "Traceback" not in said, said
    assert not re.search(r"\b\w*(Error|Exception):", said), said
    assert 'File "' not in said, said


def test_when_the_job_service_is_down_the_user_is_told_in_words(lab: Page, hub: Hub):
    settle(lab)
    config = hub.workdir / "nbjobs.yaml"
    # The hub restarts a managed service that died; without its config the restart
    # fails, so the service stays down until the test puts the file back.
    config.rename(config.with_suffix(".away"))
    try:
        os.kill(service_pid(hub), signal.SIGTERM)
        deadline = time.monotonic() + 30
        while api(lab, "GET", API + "flavors")[0] == 200:
            assert time.monotonic() < deadline, "the job service did not stop"
            time.sleep(0.3)

        refresh_panel(lab)
        notice = jobs_panel(lab).locator(".nbjobs-JobsPanel-notice")
        expect(notice).to_contain_text("job service")
        expect(notice).to_have_attribute("data-kind", "error")
        assert_plain_words(notice.inner_text())
        shot(lab, "16-service-down-panel")

        panel = open_notebook(lab, "hello.ipynb")
        panel.locator(".jp-Toolbar-item[data-jp-item-name='nbjobs-submit'] button").click()
        error = lab.locator(".jp-Dialog", has_text="Submit Job")
        expect(error.locator(".jp-Dialog-body")).to_contain_text("job service")
        assert_plain_words(error.locator(".jp-Dialog-body").inner_text())
        shot(lab, "17-service-down-submit")
        error.locator("button", has_text="Close").click()
    finally:
        config.with_suffix(".away").rename(config)
        # The hub's next look at the service (every 30 s) starts it again: waited for
        # here even when the test failed, so that the next tests find it up.
        deadline = time.monotonic() + 90
        while api(lab, "GET", API + "flavors")[0] != 200:
            assert time.monotonic() < deadline, "the job service did not come back"
            time.sleep(1)
    refresh_panel(lab)
    notice = jobs_panel(lab).locator(".nbjobs-JobsPanel-notice")
    expect(notice).not_to_have_attribute("data-kind", "error")

"""The Lab extension with many jobs, in a real browser through a real JupyterHub: the
Jobs panel with jobs in every state (the README's pictures, light and dark), searching
and filtering it, a job's details, and the Notebook Jobs page.

The tests run after ./test_lab_student.py on the folder's hub and page (./conftest.py);
the first makes the jobs the others look through.
"""

from __future__ import annotations

import re

import nbformat
from playwright.sync_api import Page, expect

from ..conftest import Hub, api, shot, ticks
from ..steps import (
    API,
    JOB_TIMEOUT,
    clear_jobs,
    close_current_tab,
    finished_job,
    job_row,
    jobs_panel,
    panel_shot,
    refresh_panel,
    settle,
    submit_by_api,
    wait_for,
)


def test_the_panel_with_jobs_in_every_state(lab: Page):
    # Jobs of both flavors in every state, newest first as the panel shows them.
    clear_jobs(lab)
    failed = submit_by_api(lab, "fail.ipynb", "cpu", "clean data")
    finished_job(lab, "hello")
    cancelled = submit_by_api(lab, "slow.ipynb", "t4", "finetune bert", seconds=30)
    wait_for(lab, cancelled["id"], "running")
    api(lab, "POST", API + f"jobs/{cancelled['id']}/cancel")
    wait_for(lab, cancelled["id"], "cancelled")
    wait_for(lab, failed["id"], "failed")
    submit_by_api(lab, "slow.ipynb", "cpu", "eval baseline", seconds=20)
    submit_by_api(lab, "slow.ipynb", "t4", "train resnet", seconds=20)
    submit_by_api(lab, "slow.ipynb", "cpu", "sweep lr=0.3", seconds=1)
    refresh_panel(lab)
    running = job_row(lab, "train resnet")
    expect(running.locator(".nbjobs-Job-progressText")).to_have_text(
        re.compile(r"^code cell [1-6] of [56]$"), timeout=JOB_TIMEOUT
    )
    expect(job_row(lab, "eval baseline").locator(".nbjobs-Job-progressText")).to_have_text(
        re.compile(r"^code cell [1-6] of [56]$"), timeout=JOB_TIMEOUT
    )
    expect(job_row(lab, "sweep lr=0.3").locator(".nbjobs-Job-state")).to_have_text(
        "Queued, #1 in line"
    )
    expect(job_row(lab, "finetune bert").locator(".nbjobs-Job-message")).to_have_text(
        re.compile(r"^cancelled by ada")
    )
    lab.locator(".jp-Notification-Toast-Close").evaluate_all("bs => bs.forEach(b => b.click())")
    states = (
        jobs_panel(lab)
        .locator(".nbjobs-Job")
        .evaluate_all("rows => rows.map(r => r.dataset.state)")
    )
    assert states == ["queued", "running", "running", "cancelled", "succeeded", "failed"]
    shot(lab, "08-jobs-panel-light")
    panel_shot(lab, "jobs-panel")

    use_theme(lab, "JupyterLab Dark")
    try:
        expect(lab.locator("body[data-jp-theme-light='false']")).to_have_count(1)
        expect(running.locator(".nbjobs-Job-state")).to_be_visible()
        shot(lab, "09-jobs-panel-dark")
        panel_shot(lab, "jobs-panel-dark")
    finally:
        use_theme(lab, "JupyterLab Light")
        settle(lab)


def test_search_and_filter_find_a_job_among_many(lab: Page):
    panel = jobs_panel(lab)
    rows = panel.locator(".nbjobs-Job")
    everything = rows.count()
    assert everything > 3
    # each row tells its notebook and when it was asked for
    expect(rows.first.locator(".nbjobs-Job-source")).to_contain_text(".ipynb · ")
    search = panel.locator("input.nbjobs-JobsPanel-search")
    search.fill("clean data")
    # until the service answers, the rows already loaded are filtered here (none match):
    # its answer can take seconds on a loaded machine
    expect(rows).to_have_count(1)
    expect(rows.first.locator(".nbjobs-Job-name")).to_have_text("clean data")
    search.fill("no such job anywhere")
    expect(rows).to_have_count(0)
    expect(panel.locator(".nbjobs-JobsPanel-notice")).to_have_text(
        "No job matches; clear the search or pick All."
    )
    search.fill("")
    panel.locator("select.nbjobs-JobsPanel-show").select_option("failed")
    expect(rows.first).to_have_attribute("data-state", "failed")
    assert set(rows.evaluate_all("rs => rs.map(r => r.dataset.state)")) <= {"failed", "timed_out"}
    shot(lab, "18-jobs-panel-filtered")
    panel.locator("select.nbjobs-JobsPanel-show").select_option("all")
    expect(rows).to_have_count(everything)


def test_a_jobs_details_tell_it_apart_and_lead_to_what_it_ran_and_rerun(lab: Page):
    first = finished_job(lab, "detailed")
    status, again = api(lab, "POST", API + f"jobs/{first['id']}/rerun")
    assert status == 201, again
    assert isinstance(again, dict)
    wait_for(lab, again["id"], "succeeded")
    refresh_panel(lab)
    row = jobs_panel(lab).locator(f".nbjobs-Job[data-job-id='{again['id']}']")
    row.locator(".nbjobs-Job-name").click()
    view = lab.locator(".nbjobs-JobDetail:visible")
    expect(view.locator("h2")).to_have_text("detailed")
    facts = view.locator(".nbjobs-JobDetail-facts")
    expect(facts).to_contain_text("Succeeded")
    expect(facts).to_contain_text("hello.ipynb")
    expect(facts).to_contain_text('{"steps":5}')
    expect(facts).to_contain_text(again["id"])
    expect(facts).to_contain_text(again["output_path"])
    # and where that is on the storage, as the user knows it
    expect(facts.locator(".nbjobs-JobDetail-where")).to_have_text(
        re.compile(r"^in /\S+/" + re.escape(again["output_path"]) + "$")
    )
    shot(lab, "19-job-details")
    # its lineage: the job it re-ran, one click away
    view.locator("button.nbjobs-JobDetail-link", has_text=first["id"]).click()
    original = lab.locator(".nbjobs-JobDetail:visible")
    expect(original.locator(".nbjobs-JobDetail-facts")).to_contain_text(first["output_path"])
    expect(lab.locator(f".lm-TabBar-tab[data-id='nbjobs-job-{first['id']}']")).to_have_class(
        re.compile("lm-mod-current")
    )


def use_theme(page: Page, theme: str) -> None:
    page.keyboard.press("Control+Shift+C")
    palette = page.locator("#command-palette input")
    palette.fill(f"Use Theme: {theme}")
    palette.press("Enter")
    light = "false" if "Dark" in theme else "true"
    expect(page.locator(f"body[data-jp-theme-light='{light}']")).to_have_count(1)
    expect(page.locator("#jupyterlab-splash")).to_have_count(0)  # Lab's veil while it switches


def test_the_notebook_jobs_page_sorts_selects_and_acts_in_bulk_and_on_details(lab: Page, hub: Hub):
    """The full-width page: opened from the panel, its columns sort, a selection is
    cancelled or deleted at once, and a job's details carry every action."""
    running = submit_by_api(lab, "slow.ipynb", "cpu", "page-running", seconds=60)
    done = [finished_job(lab, f"page-done-{n}") for n in (1, 2)]
    wait_for(lab, running["id"], "running")

    jobs_panel(lab).locator("button.nbjobs-JobsPanel-fullView").click()
    page = lab.locator("#nbjobs-jobs-page")
    expect(page).to_be_visible()
    table = page.locator("table[aria-label='Notebook jobs']")
    rows = table.locator("tbody tr")

    def row(job: dict):
        return table.locator(f"tbody tr[data-job-id='{job['id']}']")

    for job in [running, *done]:
        expect(row(job)).to_be_visible()
    # newest first, then by name when asked (again: the other way)
    expect(table.locator("th[aria-sort='descending']")).to_contain_text("Submitted")
    table.locator("button[data-sort='name']").click()
    expect(table.locator("th[aria-sort='ascending']")).to_contain_text("Name")
    names = rows.locator(".nbjobs-JobsPage-name").all_inner_texts()
    assert names == sorted(names, key=str.lower), names
    table.locator("button[data-sort='name']").click()
    expect(table.locator("th[aria-sort='descending']")).to_contain_text("Name")

    # a selection of a running job and two ended ones: each bulk action takes its own
    cancel = page.locator("button[data-action='cancel']")
    remove = page.locator("button[data-action='remove']")
    expect(cancel).to_be_disabled()
    for job in [running, *done]:
        row(job).locator("input[type='checkbox']").check()
    expect(page.locator(".nbjobs-JobsPage-count")).to_contain_text("3 of")
    expect(cancel).to_be_enabled()
    expect(remove).to_be_enabled()
    expect(remove).to_have_attribute("title", re.compile("Delete 2 job"))
    shot(lab, "43-jobs-page")
    cancel.click()
    dialog = lab.locator(".jp-Dialog")
    expect(dialog).to_contain_text("Cancel 1 job(s)?")
    dialog.locator("button", has_text="Cancel them").click()
    assert wait_for(lab, running["id"], "cancelled")["state"] == "cancelled"
    expect(row(running)).to_contain_text("Cancelled")
    remove.click()
    dialog = lab.locator(".jp-Dialog")
    expect(dialog).to_contain_text("Delete 3 job(s) from the list?")  # the cancelled one too
    dialog.locator("button", has_text="Delete them").click()
    for job in [running, *done]:
        expect(row(job)).to_have_count(0)
        status, _ = api(lab, "GET", API + f"jobs/{job['id']}")
        assert status == 404

    # a job's details open beside the table, with its actions on them
    kept = finished_job(lab, "page-kept")
    expect(row(kept)).to_be_visible()
    row(kept).locator(".nbjobs-JobsPage-name").click()
    details = page.locator(".nbjobs-JobsPage-details .nbjobs-JobDetail")
    expect(details.locator("h2")).to_have_text("page-kept")
    bar = details.locator(".nbjobs-JobDetail-actions")
    for action in ("rerun", "output", "download", "log", "remove"):
        expect(bar.locator(f"button[data-action='{action}']")).to_be_enabled()
    expect(bar.locator("button[data-action='cancel']")).to_be_disabled()
    expect(bar.locator("button[data-action='cancel']")).to_have_attribute(
        "title", "ended: nothing to cancel"
    )
    shot(lab, "44-jobs-page-details")
    bar.locator("button[data-action='rerun']").click()
    rerun = lab.locator(".nbjobs-SubmitDialog")
    expect(rerun).to_be_visible()
    rerun.locator("button", has_text="Cancel").click()
    expect(rerun).to_be_hidden()
    bar.locator("button[data-action='log']").click()
    expect(lab.locator(".nbjobs-LogView:visible")).to_be_visible()
    close_current_tab(lab)

    # a press on a running job's Cancel while it moves on (each cell done draws its
    # details again), released after two cells: a click all the same, asked and done.
    # Its cells tick for minutes (it is cancelled long before): a job of 8 cells of 1.5 s
    # was done before the press was over on a machine at load 31.
    nbformat.write(ticks(120), hub.home("ada") / "ticks-long.ipynb")
    ticking = submit_by_api(lab, "ticks-long.ipynb", "cpu", "page-ticking", pause=1.5)
    wait_for(lab, ticking["id"], "running")
    expect(row(ticking)).to_contain_text("Running")
    row(ticking).locator(".nbjobs-JobsPage-name").click()
    expect(details.locator("h2")).to_have_text("page-ticking")
    expect(bar.locator("button[data-action='cancel']")).to_be_enabled()
    bar.locator("button[data-action='cancel']").hover()
    lab.mouse.down()
    _, now = api(lab, "GET", API + f"jobs/{ticking['id']}")
    assert isinstance(now, dict)
    # its row in the table shows two more cells done: the same change drew the details
    # (the row names the running cell, "code cell 4 of 121": three are done)
    lab.wait_for_function(
        """([id, done]) => {
            const row = document.querySelector(`#nbjobs-jobs-page tr[data-job-id='${id}']`);
            const cells = row && row.textContent.match(/code cell (\\d+) of \\d+/);
            return cells !== null && parseInt(cells[1]) - 1 >= done;
        }""",
        arg=[ticking["id"], now["progress"]["cells_done"] + 2],
        timeout=JOB_TIMEOUT,
    )
    lab.mouse.up()
    asked = lab.locator(".jp-Dialog", has_text='Cancel job "page-ticking"?')
    asked.locator("button", has_text="Cancel job").click()
    assert wait_for(lab, ticking["id"], "cancelled")["state"] == "cancelled"
    lab.locator(".lm-TabBar-tab[data-id='nbjobs-jobs-page'] .lm-TabBar-tabCloseIcon").click()
    expect(page).to_have_count(0)

"""A job on two nodes in a real browser, through a real hub, as a student runs one.

The test hub's GPUs (four ids for the local backend, no GPU needed) and a flavor of
two nodes with one T4 each: the job runs as two local ranks that start together, each
with its own log. The Submit dialog says what such a flavor is and what the script
gets; the job's details say how many nodes it ran on; its log tab picks a rank's log.
"""

from __future__ import annotations

from playwright.sync_api import Page, expect

from ..conftest import shot
from ..steps import JOB_TIMEOUT, job_row, open_notebook, submit_dialog, wait_for


def test_a_job_on_two_nodes_is_described_submitted_and_each_ranks_log_read(lab: Page):
    panel = open_notebook(lab, "ranks.ipynb")
    panel.locator(".jp-Toolbar-item[data-jp-item-name='nbjobs-submit'] button").click()
    dialog = submit_dialog(lab)
    flavor = dialog.locator(".nbjobs-Flavor[data-flavor='t4x2']")
    note = flavor.locator(".nbjobs-Flavor-nodes")
    # what each node has, said as such; what the script gets, said once it is picked
    expect(flavor).to_contain_text("Two T4 nodes (t4x2)")
    expect(flavor.locator(".nbjobs-Flavor-resources")).to_have_text(
        "2 nodes \N{MULTIPLICATION SIGN} 1 T4 GPU · 2 CPU per node · 8Gi memory per node"
        " · up to 30 min"
    )
    expect(flavor.locator(".nbjobs-Flavor-availability")).to_contain_text(
        "4 of 4 GPUs free · a job takes 2"
    )
    flavor.locator("input").check()
    expect(note).to_be_visible()
    expect(note).to_contain_text("Runs on 2 nodes that start together")
    expect(note).to_contain_text("MASTER_ADDR, MASTER_PORT, WORLD_SIZE and NODE_RANK")
    # a one-node flavor has no such note
    expect(dialog.locator(".nbjobs-Flavor[data-flavor='t4'] .nbjobs-Flavor-nodes")).to_have_count(0)
    dialog.locator(".nbjobs-SubmitForm-name input").fill("two ranks")
    lab.mouse.move(900, 820)  # no hover on the picture
    shot(lab, "49-dialog-multi-node")
    dialog.locator(".nbjobs-SubmitForm-name input").press("Enter")
    expect(dialog).to_be_hidden()

    row = job_row(lab, "two ranks")
    expect(row.locator(".nbjobs-Job-flavor")).to_have_text("t4x2")
    expect(row.locator(".nbjobs-Job-state")).to_have_text("Succeeded", timeout=JOB_TIMEOUT)
    job = wait_for(lab, row.get_attribute("data-job-id") or "", "succeeded")
    assert (job["flavor"], job["nodes"]) == ("t4x2", 2)

    row.locator(".nbjobs-Job-name").click()
    view = lab.locator(".nbjobs-JobDetail:visible")
    expect(view.locator("h2")).to_have_text("two ranks")
    facts = view.locator(".nbjobs-JobDetail-facts")
    expect(facts.locator("dt:text-is('Nodes') + dd")).to_have_text(
        "2 (ranks 0 to 1, each with a log of its own)"
    )
    view.locator(".nbjobs-JobDetail-actions button[data-action='log']").click()

    log = lab.locator(".nbjobs-LogView:visible")
    text, status = log.locator(".nbjobs-LogView-text"), log.locator(".nbjobs-LogView-status")
    ranks = log.locator(".nbjobs-LogView-ranks")
    select = ranks.locator("select[name='nbjobs-rank']")
    expect(ranks).to_contain_text("Log of")
    expect(select.locator("option")).to_have_text(["Rank 0", "Rank 1"])
    expect(select).to_have_value("0")
    # rank 0's log is the job's: its own line, no other rank's
    expect(text).to_contain_text("hello from rank 0 of 2 via 127.0.0.1", timeout=JOB_TIMEOUT)
    expect(status).to_have_text("The job has ended; this is its whole log.", timeout=JOB_TIMEOUT)
    assert "hello from rank 1" not in text.inner_text()

    select.select_option(label="Rank 1")
    expect(log).to_have_attribute("data-rank", "1")
    expect(text).to_contain_text("hello from rank 1 of 2 via 127.0.0.1", timeout=JOB_TIMEOUT)
    expect(text).to_contain_text("nbjobs-runner: rank 1 of 2 nodes; rank 0 writes the job's result")
    expect(text).not_to_contain_text("hello from rank 0")
    expect(status).to_have_text("The job has ended; this is its whole log.", timeout=JOB_TIMEOUT)
    # the submitted and succeeded toasts: closed, and gone, before the picture
    lab.locator(".jp-Notification-Toast-Close").evaluate_all("bs => bs.forEach(b => b.click())")
    expect(lab.locator(".Toastify__toast")).to_have_count(0)
    lab.mouse.move(900, 820)
    shot(lab, "50-log-of-rank-1")

    # and back: rank 0's again, in place of rank 1's
    select.select_option("0")
    expect(text).to_contain_text("hello from rank 0")
    expect(text).not_to_contain_text("hello from rank 1")

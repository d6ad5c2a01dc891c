"""Notifications in a real browser through a real hub: the bell in the Jobs panel opens
where Ada is told about her jobs; an address her admins do not allow is refused in the
dialog with what she typed kept; an allowed one is mailed a code, which she enters in the
dialog; her mail server and a webhook she saves receive the end of her next job."""

from __future__ import annotations

import json
import re
import time
from email.message import Message

from playwright.sync_api import Page, expect

from ..conftest import api, shot
from ..steps import API, JOB_TIMEOUT, jobs_panel, submit_by_api, wait_for
from .conftest import HOOK_PORT


def open_dialog(lab: Page):
    jobs_panel(lab).locator(".nbjobs-JobsPanel-notifications").click()
    dialog = lab.locator(".jp-Dialog")
    expect(dialog.locator(".jp-Dialog-header")).to_have_text("Notifications")
    return dialog


def test_a_user_chooses_where_to_be_told_and_a_job_s_end_arrives(
    lab: Page, hook: list[dict], inbox: list[Message]
):
    dialog = open_dialog(lab)
    form = dialog.locator(".nbjobs-NotifyForm")
    # nothing set yet: the service's default events are ticked
    for event, checked in [("failed", True), ("timed_out", True), ("succeeded", False)]:
        box = form.locator(f"input[name='{event}']")
        expect(box).to_be_checked() if checked else expect(box).not_to_be_checked()
    expect(form.locator(".nbjobs-NotifyForm-latest")).to_contain_text("None yet.")

    form.locator("input[name='email']").fill("ada@gmail.example")
    dialog.locator("button", has_text="Save").click()
    # refused: the dialog comes back with the service's reason and what was typed
    form = lab.locator(".jp-Dialog .nbjobs-NotifyForm")
    expect(form.locator(".nbjobs-NotifyForm-error")).to_contain_text("uni.example")
    expect(form.locator("input[name='email']")).to_have_value("ada@gmail.example")

    form.locator("input[name='email']").fill("ada@uni.example")
    expect(form.locator(".nbjobs-NotifyForm-error")).to_be_hidden()  # it was about the old one
    form.locator("input[name='webhook']").fill(f"http://127.0.0.1:{HOOK_PORT}/hook")
    form.locator("select[name='webhook_format']").select_option("slack")
    form.locator("input[name='succeeded']").check()
    shot(lab, "35-notifications-dialog")
    lab.locator(".jp-Dialog button", has_text="Save").click()
    # saved, and a code mailed to the address: the dialog asks for it
    form = lab.locator(".jp-Dialog .nbjobs-NotifyForm")
    expect(form.locator(".nbjobs-NotifyForm-confirm")).to_contain_text(
        "Not confirmed yet: nbjobs mailed a code to ada@uni.example"
    )
    deadline = time.monotonic() + 60
    while not inbox:
        assert time.monotonic() < deadline, "the confirmation mail never arrived"
        time.sleep(0.2)
    assert inbox[0]["To"] == "ada@uni.example"
    code = re.search(r"Code: (\S+)", inbox[0].get_payload()).group(1)
    form.locator("input[name='code']").fill(code)
    shot(lab, "35b-notifications-code")
    lab.locator(".jp-Dialog button", has_text="Save").click()
    # the code taken: the toast says the address is confirmed, in the CLI's words
    expect(
        lab.locator(
            ".Toastify__toast",
            has_text="ada@uni.example is confirmed: mail about your jobs goes there.",
        )
    ).to_be_visible()

    status, saved = api(lab, "GET", API + "notifications/settings")
    assert status == 200, saved
    assert isinstance(saved, dict)
    [mine] = saved["settings"]
    assert mine["email"] == "ada@uni.example"
    assert mine["webhook"] == f"http://127.0.0.1:{HOOK_PORT}/hook"
    assert mine["webhook_format"] == "slack"
    assert mine["email_confirmed"] is True
    assert set(mine["on"]) == {"failed", "timed_out", "run_refused", "succeeded"}

    job = submit_by_api(lab, "hello.ipynb", "t4", "tell me", steps=1)
    wait_for(lab, job["id"], "succeeded")
    deadline = time.monotonic() + JOB_TIMEOUT / 1000
    while not hook:
        assert time.monotonic() < deadline, "the webhook never arrived"
        time.sleep(0.5)
    assert "tell me" in json.dumps(hook[0])  # a Slack message naming the job
    while len(inbox) < 2:
        assert time.monotonic() < deadline, "the job's mail never arrived"
        time.sleep(0.5)
    assert '"tell me" succeeded' in inbox[1]["Subject"]

    # the dialog's latest messages say what became of each: the webhook, the job's mail
    # and the confirmation before it sent
    dialog = open_dialog(lab)
    latest = dialog.locator(".nbjobs-NotifyForm-latest li")
    expect(latest.filter(has_text="webhook to")).to_contain_text(", sent (", timeout=JOB_TIMEOUT)
    expect(latest.filter(has_text="email to ada@uni.example")).to_have_count(2)
    expect(dialog.locator(".nbjobs-NotifyForm-confirm")).to_be_hidden()
    shot(lab, "36-notifications-latest")
    dialog.locator("button", has_text="Cancel").click()

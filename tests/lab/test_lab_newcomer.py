"""A newcomer's first session with `nbjobs demo` on a machine without a GPU, in a real
browser: submit to a (simulated) GPU flavor, see the next job queue behind it, open
its details, re-run it with a changed parameter, and find and open the result; every
button in the Jobs panel either works or says why not.

Everything is what a newcomer runs: the demo command (hub, proxy, job service, local
spawner, runner, kernels), its example notebook and its users.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.ports import free_port

from .conftest import ARTIFACTS, Hub, api, shot
from .steps import (
    API,
    DASHBOARD,
    JOB_TIMEOUT,
    job_row,
    jobs_panel,
    open_notebook,
    user_logged_in,
    wait_for,
)


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> Iterator[Hub]:
    """`nbjobs demo`, started as the README says (with free ports), stopped with Ctrl-C."""
    workdir = tmp_path_factory.mktemp("newcomer")
    port = free_port()
    command = [sys.executable, "-m", "nbjobs.cli", "demo", "--workdir", str(workdir)]
    command += [f"--port={port}", f"--hub-port={free_port()}"]
    command += [f"--service-port={free_port()}", f"--proxy-api-port={free_port()}"]
    command += [f"--inbox-port={free_port()}", f"--smtp-port={free_port()}"]
    # accounts of this run's own (n1a2b3c-ada), where it makes any: a demo running on the
    # machine keeps its demo-ada
    command += [f"--prefix=n{uuid.uuid4().hex[:6]}-"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    said = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        said.append(line)
        if "Ctrl-C stops the demo" in line or proc.poll() is not None:
            break
    assert proc.poll() is None, "".join(said)
    assert "SIMULATED" in "".join(said)  # the machine has no GPU, and the demo says so
    yield Hub(f"http://127.0.0.1:{port}", workdir)
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    proc.stdout.close()
    # as root the demo made OS accounts (demo-ada, ...): gone with it, as the README says
    remove = [*command[:4], "--remove-accounts", command[-1]]
    subprocess.run(remove, capture_output=True, check=False)


def submit_hello(page: Page, name: str, steps: str, flavor: str = "gpu") -> None:
    """Submit hello.ipynb from its toolbar to a simulated GPU flavor."""
    panel = open_notebook(page, "hello.ipynb")
    panel.locator(".jp-Toolbar-item[data-jp-item-name='nbjobs-submit'] button").click()
    dialog = page.locator(".nbjobs-SubmitDialog")
    gpu = dialog.locator(f".nbjobs-Flavor[data-flavor='{flavor}']")
    expect(gpu).to_contain_text("simulated")
    gpu.locator("input").check()
    steps_field = dialog.locator(".nbjobs-Parameter input[name='steps']")
    expect(steps_field).to_have_value("400")  # the notebook's own: about 20 s
    steps_field.fill(steps)
    dialog.locator(".nbjobs-SubmitForm-name input").fill(name)
    if name == "first try":
        shot(page, "28-newcomer-submit-simulated-gpu")
    dialog.locator(".nbjobs-SubmitForm-name input").press("Enter")
    expect(dialog).to_be_hidden()


def test_a_newcomer_queues_reruns_and_opens_the_result_on_simulated_gpus(lab: Page, hub: Hub):
    # The example opens as it is: its kernel starts and nothing is marked modified (Lab
    # would fill in the kernel's metadata, and Submit then saved it first).
    panel = open_notebook(lab, "hello.ipynb")
    expect(panel.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")).to_have_count(
        1, timeout=60_000
    )
    lab.wait_for_timeout(1_500)  # the kernel's info reply, which Lab writes in
    tab = lab.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current")
    expect(tab).to_contain_text("hello.ipynb")
    expect(tab).not_to_have_class(re.compile(r"\bjp-mod-dirty\b"))

    submit_hello(lab, "first try", "300")  # about 15 s of "training"
    submit_hello(lab, "second try", "20")

    # One GPU at a time for a student: the second waits behind the first, and says so.
    second = job_row(lab, "second try")
    expect(second.locator(".nbjobs-Job-state")).to_contain_text("Queued", timeout=JOB_TIMEOUT)
    expect(second).to_contain_text("1 GPU")
    second.locator(".nbjobs-Job-name").click()
    detail = lab.locator(".nbjobs-JobDetail:visible")
    expect(detail.locator("h2")).to_have_text("second try")
    facts = detail.locator(".nbjobs-JobDetail-facts")
    expect(facts).to_contain_text("waiting for")
    expect(facts).to_contain_text("1 GPU")
    shot(lab, "29-newcomer-queued-details")

    # Every button of every row works or says why not (a tooltip), in every state shown.
    for button in jobs_panel(lab).locator(".nbjobs-Job button").all():
        if not button.is_enabled():
            why = button.get_attribute("title") or ""
            assert why.strip(), button.get_attribute("aria-label")

    first = job_row(lab, "first try")
    first_id = first.get_attribute("data-job-id") or ""
    ran = wait_for(lab, first_id, "succeeded", "failed")
    assert ran["state"] == "succeeded", ran
    assert ran["gpus"]  # it held one of the simulated GPUs

    # Re-run the first with fewer steps: the dialog comes filled in as it ran.
    first.locator("button[aria-label='Re-run']").click()
    dialog = lab.locator(".nbjobs-SubmitDialog")
    expect(dialog.locator(".nbjobs-Flavor[data-flavor='gpu'] input")).to_be_checked()
    steps = dialog.locator(".nbjobs-Parameter input[name='steps']")
    expect(steps).to_have_value("300")
    steps.fill("40")
    dialog.locator("button", has_text="Submit").click()
    expect(dialog).to_be_hidden()
    rows = (
        jobs_panel(lab)
        .locator(".nbjobs-Job")
        .filter(has=lab.locator(".nbjobs-Job-name", has_text=re.compile(r"^first try$")))
    )
    expect(rows).to_have_count(2)
    again_id = rows.first.get_attribute("data-job-id") or ""
    again = wait_for(lab, again_id, "succeeded", "failed")
    assert again["state"] == "succeeded", again
    assert again["parameters"] == {"steps": 40}
    assert again["rerun_of"] == first_id

    # Its details lead to the result, which opens trusted, saying its GPU was simulated.
    rows.first.locator(".nbjobs-Job-name").click()
    detail = lab.locator(".nbjobs-JobDetail:visible")
    facts = detail.locator(".nbjobs-JobDetail-facts")
    expect(facts).to_contain_text("Succeeded")
    expect(facts).to_contain_text(first_id)  # what it re-ran
    expect(facts).to_contain_text("waited")
    expect(detail.locator("button.nbjobs-JobDetail-link", has_text="Download")).to_be_visible()
    expect(detail.locator("button[data-action='download']")).to_be_enabled()
    shot(lab, "30-newcomer-rerun-details")
    facts.locator("button.nbjobs-JobDetail-link", has_text=again["output_path"]).click()
    opened = lab.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    expect(opened.locator(".jp-Notebook")).to_contain_text("simulated GPU", timeout=60_000)
    expect(opened.locator(".jp-Notebook")).to_contain_text("final_loss")
    expect(lab.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current")).to_contain_text(
        again["output_path"].rsplit("/", 1)[-1]
    )
    # a result is read, not run: it opens with no kernel, and no session is made for it
    expect(opened.locator(".jp-KernelName")).to_have_text("No Kernel")
    status, sessions = api(lab, "GET", "/user/ada/api/sessions")
    assert status == 200, sessions
    assert isinstance(sessions, list)
    assert [s["path"] for s in sessions if s["path"].endswith(again["output_path"])] == []
    status, model = api(lab, "GET", f"/user/ada/api/contents/{again['output_path']}")
    assert status == 200, model
    assert isinstance(model, dict)
    code = [c for c in model["content"]["cells"] if c["cell_type"] == "code"]
    assert all(c["metadata"].get("trusted") for c in code)  # she ran it: trusted for her
    shot(lab, "31-newcomer-result-open")
    # the queued second job ran meanwhile, once the GPU was hers again
    second_id = second.get_attribute("data-job-id") or ""
    assert wait_for(lab, second_id, "succeeded", "failed")["state"] == "succeeded"
    status, _ = api(lab, "GET", API + "jobs")
    assert status == 200


def test_every_role_tries_its_flow_in_the_demo(lab: Page, hub: Hub, chromium: Browser):
    """The teacher manages her class and approves a job; a student's notifications
    arrive in the demo's inbox, which she opens from the hub."""
    # ada asks for mail: the confirmation code arrives in her demo inbox
    jobs_panel(lab).locator(".nbjobs-JobsPanel-notifications").click()
    form = lab.locator(".jp-Dialog .nbjobs-NotifyForm")
    form.locator("input[name='email']").fill("ada@demo.test")
    form.locator("input[name='succeeded']").check()
    lab.locator(".jp-Dialog button", has_text="Save").click()
    form = lab.locator(".jp-Dialog .nbjobs-NotifyForm")
    expect(form.locator(".nbjobs-NotifyForm-confirm")).to_contain_text("ada@demo.test")
    inbox = lab.context.new_page()
    inbox.goto(f"{hub.url}/services/demo-inbox/")
    expect(inbox.locator("h1")).to_have_text("Demo inbox of ada")
    # the page stays as it is (never reloaded) while new mail appears in it
    inbox.evaluate("window.nbjobsKept = true")
    mail = inbox.locator("article[data-kind='mail']")
    expect(mail.first).to_contain_text("confirm your address", timeout=60_000)
    found = re.search(r"Code: (\S+)", mail.first.inner_text())
    assert found is not None
    form.locator("input[name='code']").fill(found.group(1))
    lab.locator(".jp-Dialog button", has_text="Save").click()
    expect(
        lab.locator(".Toastify__toast", has_text="ada@demo.test is confirmed: mail about your jobs")
    ).to_be_visible()

    # a job on the approval flavor, asked for in the Submit dialog, waits for tess; the
    # next dialog starts from the flavor used before it, which needs no approval
    lab.evaluate("localStorage.setItem('nbjobs:last-flavor', 'gpu')")  # as after a job
    submit_hello(lab, "long", "2", flavor="gpu-long")
    row = job_row(lab, "long")
    expect(row.locator(".nbjobs-Job-state")).to_contain_text("Awaiting approval")
    status, job = api(lab, "GET", API + f"jobs/{row.get_attribute('data-job-id')}")
    assert status == 200, job
    assert isinstance(job, dict)
    assert job["state"] == "pending_approval"
    panel = open_notebook(lab, "hello.ipynb")
    panel.locator(".jp-Toolbar-item[data-jp-item-name='nbjobs-submit'] button").click()
    dialog = lab.locator(".nbjobs-SubmitDialog")
    expect(dialog.locator(".nbjobs-Flavor[data-flavor='gpu'] input")).to_be_checked()
    expect(dialog.locator(".nbjobs-Flavor[data-flavor='gpu-long'] input")).not_to_be_checked()
    shot(lab, "43-demo-submit-remembers-flavor-without-approval")
    dialog.locator("button", has_text="Cancel").click()
    expect(dialog).to_be_hidden()

    for tess in user_logged_in(chromium, hub, "tess"):
        # her class: the hub's, so hers to change, with its budget
        tess.goto(hub.url + DASHBOARD + "#classes")
        demo = tess.locator("section[aria-label='Class demo-class']")
        expect(demo).to_contain_text("2 GPU-hours")
        expect(demo).to_contain_text("ada")
        expect(demo.locator("button", has_text="Remove").first).to_be_enabled()
        tess.screenshot(path=str(ARTIFACTS / "40-demo-teacher-class.png"), full_page=True)
        # ada's request, approved
        tess.goto(hub.url + DASHBOARD + "#approvals")
        row = tess.locator("table[aria-label='Approvals'] tbody tr").filter(has_text=job["id"])
        tess.screenshot(path=str(ARTIFACTS / "41-demo-teacher-approvals.png"), full_page=True)
        row.locator("button[data-action='approve']").click()
        expect(tess.locator(".nbjobs-Status")).to_contain_text(f"Approved ada's job {job['id']}")

    # the approved job runs; its end arrives in ada's inbox as mail
    assert wait_for(lab, job["id"], "succeeded", "failed")["state"] == "succeeded"
    told = inbox.locator("article[data-kind='mail']").filter(has_text=job["id"])
    expect(told.first).to_contain_text('"long" succeeded', timeout=90_000)
    assert inbox.evaluate("window.nbjobsKept") is True  # followed, not reloaded
    inbox.screenshot(path=str(ARTIFACTS / "42-demo-inbox.png"), full_page=True)
    inbox.close()

"""The dashboard in a real browser through a real JupyterHub: a student opens it from the
Jobs panel and sees her own usage; an admin, logged in through the hub's OAuth, sees the
GPUs, the queues, a failure and the usage charts, and finds it in the hub's Services menu.

Everything is real (hub, proxy, job service, runner, kernels); the GPUs are the local
backend's four, as the hub of these tests lists them (no GPU is needed: jobs on them see
CUDA_VISIBLE_DEVICES only).
"""

from __future__ import annotations

import copy
import re
import socket
import time
from collections.abc import Iterator
from urllib.parse import quote

import nbformat
import pytest
from playwright.sync_api import Browser, Page, expect

from .conftest import (
    ARTIFACTS,
    HUB_JOBS_CONFIG,
    Hub,
    api,
    notebook,
    run_hub,
    standalone_service,
    start_limit,
    user_context,
)
from .steps import (
    API,
    DASHBOARD,
    jobs_panel,
    open_notebook,
    submit_by_api,
    submit_dialog,
    user_logged_in,
    wait_for,
)


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> Iterator[Hub]:
    """The tests' hub, with a flavor whose jobs wait for approval and one paid for with
    credits (the class's: 20)."""
    config = copy.deepcopy(HUB_JOBS_CONFIG)
    config["flavors"].append(
        {"name": "t4-approved", "display_name": "T4, approved", "gpus": 1, "approval": {}}
    )
    # worst case 1 GPU x 30 min x 4 = 2 credits
    config["flavors"].append(
        {"name": "t4-paid", "gpus": 1, "time_limit": "30m", "cost_per_gpu_hour": 4.0}
    )
    config["classes"][0]["flavors"] += ["t4-approved", "t4-paid"]
    config["credits"] = {"enabled": True, "classes": {"demo-class": 20}}
    yield from run_hub(tmp_path_factory.mktemp("hub"), config)


@pytest.fixture(scope="module")
def admin(hub: Hub, chromium: Browser) -> Iterator[Page]:
    yield from user_logged_in(chromium, hub, "admin")


@pytest.fixture(scope="module")
def teacher(hub: Hub, chromium: Browser) -> Iterator[Page]:
    yield from user_logged_in(chromium, hub, "tess")


def card(page: Page, title: str):
    """The overview's card with that title."""
    heading = page.locator("h2", has_text=re.compile(f"^{re.escape(title)}$"))
    return page.locator(".nbjobs-Card").filter(has=heading)


def test_a_student_opens_the_dashboard_from_the_jobs_panel_and_sees_her_usage(lab: Page):
    job = submit_by_api(lab, "slow.ipynb", "t4", "dash-slow", seconds=0.2)
    wait_for(lab, job["id"], "succeeded")
    link = jobs_panel(lab).locator("a.nbjobs-JobsPanel-dashboard")
    expect(link).to_have_text("Dashboard")
    with lab.context.expect_page() as opened:
        link.click()
    page = opened.value
    page.wait_for_load_state()
    # the hub's OAuth took her straight there: she was logged in at the hub
    expect(page.locator(".nbjobs-Who")).to_contain_text("ada (user)")
    # no overview
    expect(page.locator(".nbjobs-Tabs a")).to_have_text(["Usage", "Storage", "Credits"])
    table = page.locator("table[aria-label='GPU-hours by flavor']")
    expect(table).to_contain_text("t4")
    expect(table.locator("tbody tr").last).to_contain_text("all")
    expect(page.locator("canvas#nbjobs-usage-busy")).to_be_visible()
    # her own use against her budget, called hers, over the period the budgets count
    own = page.locator("table[aria-label='Your GPU-hours in the last 7 days']")
    expect(own.locator("tbody tr")).to_have_count(1)
    expect(page.get_by_text("Top users")).to_have_count(0)
    expect(page.locator("h3", has_text="(whole UTC days)")).to_have_count(1)
    # what she may not see, the service refuses (not only the page hides it)
    status = page.evaluate(
        """async () => {
            const token = document.querySelector('meta[name="nbjobs-token"]').content;
            const headers = {Authorization: 'token ' + token};
            const r = await fetch('api/dashboard/overview', {headers});
            return r.status;
        }"""
    )
    assert status == 403
    page.screenshot(path=str(ARTIFACTS / "20-dashboard-student-usage.png"))
    page.close()


def test_the_admin_sees_gpus_queues_failures_and_usage_charts(lab: Page, admin: Page, hub: Hub):
    running = submit_by_api(lab, "slow.ipynb", "t4", "dash-running", seconds=15)
    failed = submit_by_api(lab, "fail.ipynb", "cpu", "dash-failing")
    wait_for(lab, failed["id"], "failed")
    wait_for(lab, running["id"], "running")

    admin.goto(hub.url + DASHBOARD)
    expect(admin.locator(".nbjobs-Who")).to_contain_text("admin (admin)")
    expect(admin.locator(".nbjobs-Tabs a")).to_have_text(
        [
            "Overview",
            "Queue",
            "Nodes",
            "Approvals",
            "Classes",
            "Usage",
            "Storage",
            "Credits",
            "Audit",
            "Users",
        ]
    )
    expect(card(admin, "GPUs held")).to_contain_text("1 / 4")  # the t4 job holds one of four
    expect(card(admin, "Jobs")).to_contain_text("1 running")
    expect(card(admin, "Backend: local")).to_contain_text("working")
    nodes = admin.locator("table[aria-label='GPUs per node']")
    expect(nodes).to_contain_text(running["id"])
    queues = admin.locator("table[aria-label='Jobs per flavor']")
    expect(queues.locator("tr", has_text="(t4)")).to_contain_text("1")
    failures = admin.locator("table[aria-label='Recent failures']")
    expect(failures).to_contain_text(failed["id"])
    expect(failures).to_contain_text("ValueError")
    # it follows the service's changes as they come, and its last line says so (it said
    # "refreshed every 10 s" when its first draw came before the stream connected)
    expect(admin.locator("[data-role='freshness']")).to_contain_text(
        "Live: drawn again as soon as a job changes"
    )
    admin.screenshot(path=str(ARTIFACTS / "21-dashboard-overview.png"), full_page=True)

    admin.locator(".nbjobs-Tabs a", has_text="Usage").click()
    admin.select_option("#nbjobs-by", "user")
    admin.locator("form.nbjobs-Controls button[type='submit']").click()
    table = admin.locator("table[aria-label='GPU-hours by user']")
    expect(table).to_contain_text("ada")
    expect(admin.locator("canvas#nbjobs-usage-by")).to_be_visible()
    with admin.expect_download() as download:
        admin.locator("#nbjobs-csv").click()
    csv = download.value.path().read_text()
    assert csv.splitlines()[0] == "date,user,gpu_hours_allocated,gpu_hours_busy"
    assert any(line.split(",")[1] == "ada" for line in csv.splitlines()[1:])
    admin.screenshot(path=str(ARTIFACTS / "22-dashboard-usage.png"), full_page=True)
    # by node: each job under the node it ran on, as the overview names it
    admin.select_option("#nbjobs-by", "node")
    admin.locator("form.nbjobs-Controls button[type='submit']").click()
    by_node = admin.locator("table[aria-label='GPU-hours by node'] tbody")
    expect(by_node.locator("tr").first).to_contain_text(socket.gethostname())
    expect(by_node).not_to_contain_text("(none)")

    # the space each user's job files take, against the limit
    admin.locator(".nbjobs-Tabs a", has_text="Storage").click()
    space = admin.locator("table[aria-label='Job files per user']")
    expect(space.locator("tr", has_text="ada")).to_contain_text("/ 5.0 GiB")
    # and where each user's results are written, with the room left there
    expect(space.locator("th")).to_have_text(["User", "Jobs", "Job files", "Folder", "Free there"])
    ada = space.locator("tr", has_text="ada").locator("td")
    expect(ada.nth(3)).to_have_text(re.compile(r"^/\S+/ada$"))
    expect(ada.nth(4)).to_have_text(re.compile(r"^\d[\d.]* (B|KiB|MiB|GiB|TiB)$"))
    expect(admin.locator("#nbjobs-main")).to_contain_text("Each user may keep 5.0 GiB of job files")
    expect(admin.locator("#nbjobs-main")).to_contain_text("removed 7 days after it ended")
    admin.screenshot(path=str(ARTIFACTS / "22b-dashboard-storage.png"), full_page=True)

    # the hub lists it among its services
    admin.goto(f"{hub.url}/hub/home")
    expect(admin.locator(f"a[href$='{DASHBOARD}']").first).to_be_attached()


def test_the_admin_moves_a_queued_job_to_the_front_and_cancels_one(
    lab: Page, admin: Page, hub: Hub
):
    # one CPU slot: the first job runs, the next two wait
    hold = submit_by_api(lab, "slow.ipynb", "cpu", "dash-hold", seconds=8)
    wait_for(lab, hold["id"], "running")
    first = submit_by_api(lab, "slow.ipynb", "cpu", "dash-first", seconds=0.1)
    second = submit_by_api(lab, "slow.ipynb", "cpu", "dash-second", seconds=0.1)

    admin.goto(hub.url + DASHBOARD + "#queue")
    rows = admin.locator("table[aria-label='Queue'] tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text(first["id"])
    expect(rows.nth(1)).to_contain_text("ada")
    expect(rows.nth(0).locator("button[data-move='front']")).to_be_disabled()  # first already

    rows.nth(1).locator("button[data-move='front']").click()
    expect(admin.locator(".nbjobs-Status")).to_have_text(
        f"Moved ada's job {second['id']} to the front: now 1 of 2."
    )
    expect(rows.nth(0)).to_contain_text(second["id"])
    expect(rows.nth(0)).to_contain_text("set by admin")
    # the job's owner sees its new place too
    _, job = api(lab, "GET", API + f"jobs/{second['id']}")
    assert isinstance(job, dict)
    assert job["queue_position"] == 1
    admin.screenshot(path=str(ARTIFACTS / "23-dashboard-queue.png"), full_page=True)

    admin.once("dialog", lambda dialog: dialog.accept())
    rows.nth(1).locator("button[data-move='cancel']").click()
    expect(admin.locator(".nbjobs-Status")).to_have_text(f"Cancelled ada's job {first['id']}.")
    expect(rows).to_have_count(1)
    _, cancelled = api(lab, "GET", API + f"jobs/{first['id']}")
    assert isinstance(cancelled, dict)
    assert cancelled["state"] == "cancelled"
    for job in (hold, second):
        api(lab, "POST", API + f"jobs/{job['id']}/cancel")


def test_the_queue_view_shows_a_job_queued_elsewhere_without_a_reload(
    lab: Page, admin: Page, hub: Hub
):
    hold = submit_by_api(lab, "slow.ipynb", "cpu", "dash-hold2", seconds=30)
    wait_for(lab, hold["id"], "running")
    admin.goto(hub.url + DASHBOARD + "#queue")
    rows = admin.locator("table[aria-label='Queue'] tbody tr")
    expect(admin.locator("#nbjobs-main")).not_to_contain_text("Loading")
    expect(rows).to_have_count(0)
    expect(admin.locator("[data-live='yes']")).to_be_attached()  # its stream is open

    waiting = submit_by_api(lab, "slow.ipynb", "cpu", "dash-pushed", seconds=0.1)
    # no reload, and the Queue view reads nothing on a timer: the service said so
    expect(rows).to_have_count(1)
    expect(rows.nth(0)).to_contain_text(waiting["id"])
    for job in (waiting, hold):
        api(lab, "POST", API + f"jobs/{job['id']}/cancel")
    expect(rows).to_have_count(0)


def test_the_admin_drains_the_machine_and_students_are_told(lab: Page, admin: Page, hub: Hub):
    # a GPU job held running (by a file it waits for) while the admin drains
    gate = hub.home("ada") / f"drain-gate-{time.monotonic_ns()}"
    nbformat.write(
        notebook(
            "import os, time",
            "while not os.path.exists(gate):\n    time.sleep(0.2)",
            parameters=f"gate = {str(gate)!r}",
        ),
        hub.home("ada") / "drain-held.ipynb",
    )
    held = submit_by_api(lab, "drain-held.ipynb", "t4", "dash-held")
    try:
        drain_with_confirmations(admin, hub, lab, held)
    finally:
        gate.touch()
    assert wait_for(lab, held["id"], "succeeded")["state"] == "succeeded"  # it went on

    # ada's GPU flavors say so, and a GPU job waits saying why
    _, flavors = api(lab, "GET", API + "flavors")
    assert isinstance(flavors, list)
    t4 = next(f for f in flavors if f["name"] == "t4")
    assert t4["maintenance"].startswith("this machine's GPUs are in maintenance")
    job = submit_by_api(lab, "slow.ipynb", "t4", "dash-drained", seconds=0.1)
    deadline = time.monotonic() + 20
    while True:
        _, seen = api(lab, "GET", API + f"jobs/{job['id']}")
        assert isinstance(seen, dict)
        if seen["waiting_reason"] or time.monotonic() > deadline:
            break
        lab.wait_for_timeout(250)
    assert seen["state"] == "queued"
    assert "in maintenance" in seen["waiting_reason"]

    row = admin.locator("table[aria-label='Nodes'] tbody tr").first
    row.locator("button[data-action='undrain']").click()
    expect(admin.locator(".nbjobs-Status")).to_contain_text("jobs may start there again")
    expect(row.locator("td").nth(3)).to_have_text("open")
    assert wait_for(lab, job["id"], "succeeded")["state"] == "succeeded"


def drain_with_confirmations(admin: Page, hub: Hub, lab: Page, held: dict) -> None:
    """The admin drains one GPU and keeps it open, then drains the whole machine."""
    wait_for(lab, held["id"], "running")
    admin.goto(hub.url + DASHBOARD + "#nodes")
    row = admin.locator("table[aria-label='Nodes'] tbody tr").first
    state = row.locator("td").nth(3)
    expect(state).to_have_text("open")
    expect(row).to_contain_text(held["id"])
    # one GPU of the four: the confirmation says what leaves the pool and what goes on;
    # kept open, nothing is drained
    row.locator("select").select_option(label="GPU 2")
    row.locator("input[type='text']").fill("new fan on GPU 2")
    row.locator("button[data-action='drain']").click()
    confirm = row.locator(".nbjobs-Confirm")
    expect(confirm).to_contain_text("1 GPU leaves the pool (3 stay)")
    admin.screenshot(path=str(ARTIFACTS / "24a-dashboard-drain-gpu-confirm.png"), full_page=True)
    expect(confirm).to_contain_text("No job runs there now.")
    confirm.locator("button[data-action='keep-open']").click()
    expect(confirm).to_have_count(0)
    admin.reload()  # what the service says now: nothing was drained
    expect(state).to_have_text("open")

    # the whole machine: all four GPUs leave at once, its running job is said to go on
    row.locator("select").select_option(index=0)  # all of the machine
    row.locator("input[type='text']").fill("new fans")
    row.locator("button[data-action='drain']").click()
    expect(confirm).to_contain_text("4 GPUs leave the pool (0 stay)")
    # its GPU jobs, as the row lists them (held's among them), are said to go on
    gpu_jobs = row.locator(".nbjobs-NodeJob", has_text=" on GPU").count()
    assert gpu_jobs >= 1
    expect(confirm).to_contain_text(
        f"The {gpu_jobs} job(s) running there keep running until they end."
    )
    admin.screenshot(path=str(ARTIFACTS / "24b-dashboard-drain-confirm.png"), full_page=True)
    confirm.locator("button[data-action='confirm-drain']").click()
    expect(admin.locator(".nbjobs-Status")).to_contain_text("no new job starts there")
    expect(row).to_contain_text("drained by admin")
    expect(row).to_contain_text("new fans")
    admin.screenshot(path=str(ARTIFACTS / "24-dashboard-nodes-drained.png"), full_page=True)
    expect(row).to_contain_text(held["id"])  # still running there


def test_the_admin_approves_one_request_and_rejects_another_saying_why(
    lab: Page, admin: Page, hub: Hub
):
    yes = submit_by_api(lab, "slow.ipynb", "t4-approved", "dash-please", seconds=2)
    no = submit_by_api(lab, "slow.ipynb", "t4-approved", "dash-too-big", seconds=0.1)
    assert (yes["state"], no["state"]) == ("pending_approval", "pending_approval")
    # ada's Jobs panel says her job waits for a person
    expect(jobs_panel(lab).locator(".nbjobs-Job").first).to_contain_text("Awaiting approval")

    admin.goto(hub.url + DASHBOARD + "#approvals")
    rows = admin.locator("table[aria-label='Approvals'] tbody tr")
    expect(rows).to_have_count(2)
    admin.screenshot(path=str(ARTIFACTS / "25-dashboard-approvals.png"), full_page=True)
    rows.filter(has_text=yes["id"]).locator("button[data-action='approve']").click()
    expect(admin.locator(".nbjobs-Status")).to_have_text(
        f"Approved ada's job {yes['id']}: it is queued."
    )
    # ada hears of it in her Lab, in the service's words
    expect(lab.get_by_text('Job "dash-please": approved by admin.')).to_be_visible()
    assert wait_for(lab, yes["id"], "succeeded")["state"] == "succeeded"
    rejecting = rows.filter(has_text=no["id"])
    rejecting.locator("button[data-action='reject']").click()
    expect(admin.locator(".nbjobs-Error")).to_contain_text("Say why")
    # a request arriving meanwhile redraws the list: what to mend is still said, as an error
    admin.locator("h2").click()
    later = submit_by_api(lab, "slow.ipynb", "t4-approved", "dash-later", seconds=0.1)
    expect(rows).to_have_count(2)
    expect(admin.locator("[role='status']")).to_have_class("nbjobs-Error")
    expect(admin.locator("[role='status']")).to_contain_text("Say why")
    rejecting.locator("input[type='text']").fill("ask for a T4 first")
    rejecting.locator("button[data-action='reject']").click()
    expect(admin.locator(".nbjobs-Status")).to_contain_text(f"Rejected ada's job {no['id']}")
    expect(rows).to_have_count(1)
    assert api(lab, "POST", API + f"jobs/{later['id']}/cancel")[0] == 200
    expect(rows).to_have_count(0)

    _, rejected = api(lab, "GET", API + f"jobs/{no['id']}")
    assert isinstance(rejected, dict)
    assert (rejected["state"], rejected["message"]) == (
        "cancelled",
        "rejected by admin: ask for a T4 first",
    )


def test_a_teacher_creates_a_class_from_a_csv_roster_and_extends_a_budget(
    teacher: Page, hub: Hub, tmp_path
):
    teacher.goto(hub.url + DASHBOARD + "#classes")
    expect(teacher.locator(".nbjobs-Who")).to_contain_text("tess (teacher)")
    expect(teacher.locator(".nbjobs-Tabs a")).to_have_text(
        ["Approvals", "Classes", "Usage", "Storage", "Credits"]
    )
    # her class from nbjobs.yaml is there, read-only
    demo = teacher.locator("section[aria-label='Class demo-class']")
    expect(demo).to_contain_text("from nbjobs.yaml (read-only here)")
    expect(demo.locator("table")).to_contain_text("ada")
    # a student's jobs, one click away, each a link to its own page
    ada = demo.locator("table tbody tr").filter(has_text="ada").first
    ada.locator("button[data-action='student-jobs']").click()
    # the count and the list say what each is: jobs that ran in the period, the latest
    expect(ada.locator("button[data-action='student-jobs']")).to_have_text(re.compile(r"^\d+ ran$"))
    expect(ada).to_contain_text("ran in the last 7 days (a job that never started counts in none)")
    link = ada.locator('table[aria-label="ada\'s latest jobs"] a').first
    expect(link).to_have_attribute("href", re.compile(r"^#job/\w+$"))

    form = teacher.locator("form[aria-label='Create a class']")
    form.locator("#nbjobs-class-name").fill("physics-101")
    form.locator("#nbjobs-flavor-t4").check()
    form.locator("#nbjobs-class-hours").fill("2")
    roster = tmp_path / "roster.csv"
    roster.write_text(
        "username,email\ncarl,carl@example.org\nada,ada@example.org\nCarl,c@x\nDave Smith,d@x\n"
    )
    form.locator("input[type='file']").set_input_files(str(roster))
    preview = form.locator("table[aria-label='Create a class: preview'] tbody tr")
    expect(preview).to_have_count(4)
    # before anything is sent, the preview says what each name would do: who would be
    # refused and why, who joins with a new account
    expect(preview.nth(1)).to_contain_text("refused: already a student of class 'demo-class'")
    expect(preview.nth(2)).to_contain_text("listed twice")
    expect(preview.nth(3)).to_contain_text("not a valid user name")
    expect(preview.nth(0)).to_contain_text("joins the new class: a new account, with an invitation")
    expect(form.locator("[data-role='roster-summary']")).to_have_text(
        "1 to add (1 new account, invited) · 3 refused: nothing changes until they are fixed"
    )
    form.locator("button[type='submit']").click()
    # sent anyway: the service refuses the whole roster, said beside the button, the
    # same problems on their rows
    expect(form.locator(".nbjobs-Error[role='alert']")).to_contain_text(
        "the roster has 3 problem(s), nothing was changed"
    )
    expect(teacher.locator("#nbjobs-main > .nbjobs-Status")).to_have_text("")
    expect(preview.nth(1)).to_contain_text("already a student of class 'demo-class'")
    expect(preview.nth(0)).to_contain_text("a new account, with an invitation")
    teacher.screenshot(path=str(ARTIFACTS / "26-dashboard-roster-problems.png"), full_page=True)

    form.locator("textarea").fill("carl\ndora\n")
    form.locator("button[type='submit']").click()
    expect(teacher.locator(".nbjobs-Status")).to_have_text(
        "Created class physics-101 with 2 student(s)."
    )
    physics = teacher.locator("section[aria-label='Class physics-101']")
    expect(physics).to_contain_text("2 GPU-hours per student in the last 7 days")
    students = physics.locator("table tbody tr")
    expect(students).to_have_count(2)
    carl = students.filter(has_text="carl")
    # the hours box says what it counts
    expect(carl.locator(".nbjobs-WithUnit")).to_have_text("GPU-hours")
    carl.locator("input[type='number']").fill("1.5")
    carl.locator("button[data-action='extend']").click()
    expect(teacher.locator(".nbjobs-Status")).to_have_text(
        "carl may use 1.5 more GPU-hours in physics-101 for the next 7 days."
    )
    expect(physics.locator("table tbody tr").filter(has_text="carl")).to_contain_text("+1.5 h")
    teacher.screenshot(path=str(ARTIFACTS / "27-dashboard-classes.png"), full_page=True)

    # adding: who is in the class already, who has no account yet, who is refused, said
    # before anything is sent
    add = physics.locator("form[aria-label='Add students to physics-101']")
    add.locator("textarea").fill("carl\neve\nada\n")
    rows = add.locator("table tbody tr")
    expect(rows.nth(0)).to_contain_text("already in physics-101: no change")
    expect(rows.nth(1)).to_contain_text("joins physics-101: a new account, with an invitation")
    expect(rows.nth(2)).to_contain_text("refused: already a student of class 'demo-class'")
    expect(add.locator("[data-role='roster-summary']")).to_have_text(
        "1 to add (1 new account, invited) · 1 already in physics-101 · "
        "1 refused: nothing changes until it is fixed"
    )
    add.locator("textarea").fill("carl\neve\n")
    expect(add.locator("[data-role='roster-summary']")).to_have_text(
        "1 to add (1 new account, invited) · 1 already in physics-101"
    )
    add.locator("button[type='submit']").click()
    expect(teacher.locator(".nbjobs-Status")).to_have_text(
        "Added 1 student(s) to physics-101 (1 already in it)."
    )
    expect(students).to_have_count(3)

    # removing: what it does is said beside the button, and Keep changes nothing
    dora = students.filter(has_text="dora")
    dora.locator("button[data-action='remove']").click()
    confirm = dora.locator(".nbjobs-Confirm")
    expect(confirm).to_contain_text(
        "Remove dora from physics-101? They lose its flavors and its GPU-hour budget; "
        "their account, files and jobs stay."
    )
    teacher.screenshot(path=str(ARTIFACTS / "27b-dashboard-remove-confirm.png"), full_page=True)
    confirm.locator("button[data-action='keep']").click()
    expect(confirm).to_have_count(0)
    teacher.reload()
    expect(students).to_have_count(3)
    dora.locator("button[data-action='remove']").click()
    confirm.locator("button[data-action='confirm-remove']").click()
    expect(teacher.locator(".nbjobs-Status")).to_have_text("Removed dora from physics-101.")
    expect(students).to_have_count(2)

    # deleting a class asks in its place first, saying what it does; Keep it deletes nothing
    physics.locator("button[data-action='delete-class']").click()
    asked = physics.locator(".nbjobs-Confirm[aria-label='Delete class physics-101?']")
    expect(asked).to_contain_text(
        "Its 2 student(s) lose its flavors and GPU-hour budget; their accounts, files and "
        "jobs stay."
    )
    asked.locator("button[data-action='keep-class']").click()
    expect(asked).to_have_count(0)
    physics.locator("button[data-action='delete-class']").click()
    asked.locator("button[data-action='confirm-delete-class']").click()
    expect(teacher.locator(".nbjobs-Status")).to_have_text("Deleted class physics-101.")
    expect(teacher.locator("section[aria-label='Class physics-101']")).to_have_count(0)
    # a class from nbjobs.yaml cannot be deleted here
    expect(demo.locator("button[data-action='delete-class']")).to_have_count(0)


def test_a_teacher_opens_a_students_result_and_log_read_only_and_the_admin_sees_it(
    lab: Page, teacher: Page, admin: Page, hub: Hub
):
    job = submit_by_api(lab, "hello.ipynb", "t4", "dash-looked-at", steps=5)
    assert wait_for(lab, job["id"], "succeeded")["state"] == "succeeded"
    teacher.goto(hub.url + DASHBOARD + "#classes")
    demo = teacher.locator("section[aria-label='Class demo-class']")
    ada = demo.locator("table tbody tr").filter(has_text="ada").first
    ada.locator("button[data-action='student-jobs']").click()
    row = ada.locator('table[aria-label="ada\'s latest jobs"] tbody tr').filter(has_text=job["id"])
    # the job opens on a page of its own, the dashboard's whole width (it once opened in
    # a frame 390 px wide squeezed into the roster's table)
    row.locator("a[data-action='open-job']").click()
    expect(teacher).to_have_url(re.compile(f"#job/{job['id']}$"))
    main = teacher.locator("#nbjobs-main")
    expect(main.locator("h2")).to_have_text(f"ada's job dash-looked-at ({job['id']})")
    expect(teacher.locator(".nbjobs-Tabs a[aria-current='page']")).to_have_text("Classes")
    details = main.locator("dl[aria-label='Details']")
    expect(details).to_contain_text("succeeded")
    expect(details).to_contain_text(job["output_path"])
    # the result: the service's rendering, in a frame that runs nothing
    frame = main.locator("iframe.nbjobs-JobPage-frame")
    assert frame.get_attribute("sandbox") == ""
    expect(main.frame_locator("iframe").locator("body")).to_contain_text("final_loss")
    box, room = frame.bounding_box(), main.bounding_box()
    assert box is not None
    assert room is not None
    assert box["width"] > 0.9 * room["width"], (box, room)
    # styled as in Lab: the frame holds the result's own page and policy (its styles),
    # not the dashboard's, which would refuse them
    prompt = main.frame_locator("iframe").locator(".jp-InputPrompt").first
    expect(prompt).to_have_css("white-space", "nowrap")  # a div's is "normal" unstyled
    expect(prompt).not_to_have_css("color", "rgb(0, 0, 0)")
    expect(main.locator("pre.nbjobs-JobPage-log")).to_contain_text("step")
    # the viewport, not the full page: chromium leaves a frame of another origin (the
    # sandbox makes it one) out of full-page captures
    teacher.screenshot(path=str(ARTIFACTS / "45-dashboard-student-result.png"))
    # and back to the class, where it was opened from
    teacher.go_back()
    expect(teacher.locator("section[aria-label='Class demo-class']")).to_be_visible()
    # nothing of the student's changed: her notebook and output are as the job left them
    status, listing = api(lab, "GET", f"/user/ada/api/contents/{job['output_path']}")
    assert status == 200, listing

    admin.goto(hub.url + DASHBOARD + "#audit")
    entries = admin.locator("table[aria-label='Audit list'] tbody tr").filter(has_text=job["id"])
    expect(entries).to_have_count(2)
    expect(entries.filter(has_text="result")).to_contain_text("tess")
    expect(entries.filter(has_text="log")).to_contain_text("ada")
    admin.screenshot(path=str(ARTIFACTS / "46-dashboard-audit.png"), full_page=True)


def test_the_admins_jobs_panel_lists_everyone_or_only_theirs(lab: Page, admin: Page, hub: Hub):
    theirs = submit_by_api(lab, "hello.ipynb", "t4", "seen by the admin", steps=1)
    wait_for(lab, theirs["id"], "succeeded", "failed")
    # the admin's server starts now (the hub's spawn page, then their Lab)
    admin.goto(f"{hub.url}/hub/spawn?next={quote('/user/admin/lab')}")
    admin.wait_for_selector(".jp-LabShell", timeout=start_limit())
    panel = jobs_panel(admin)
    whose = panel.locator("select.nbjobs-JobsPanel-whose")
    expect(whose).to_be_visible()
    expect(whose.locator("option")).to_have_text(["Mine", "My classes", "Everyone"])
    expect(whose).to_have_value("all")
    row = panel.locator(f".nbjobs-Job[data-job-id='{theirs['id']}']")
    expect(row).to_contain_text("ada")  # whose it is, on another user's job
    # acting on it says whose it is: its output is in ada's folder, not the admin's
    output = row.locator("button[aria-label='Open output']")
    expect(output).to_be_disabled()
    expect(output).to_have_attribute("title", "belongs to ada: the output is in their folder")
    panel.locator(".nbjobs-JobsPanel-search").fill("seen by the admin")
    expect(panel.locator(".nbjobs-Job")).to_have_count(1)
    admin.screenshot(path=str(ARTIFACTS / "32-admin-jobs-everyone.png"))
    whose.select_option("mine")
    expect(row).to_have_count(0)
    expect(panel).to_contain_text("No job matches")


def test_without_a_hub_the_page_asks_for_a_token_and_keeps_it_in_the_tab(
    chromium: Browser, tmp_path
):
    """The standalone service (no hub): its root is the dashboard, behind a token."""
    with standalone_service(tmp_path, {"the-admins-token": "root"}) as url:
        context = user_context(chromium)
        try:
            page = context.new_page()
            page.goto(url)
            page.fill("#nbjobs-token", "not-a-token")
            page.locator("button[type='submit']").click()
            expect(page.locator(".nbjobs-Error")).to_contain_text(
                "the service does not know that token"
            )
            page.fill("#nbjobs-token", "the-admins-token")
            page.locator("button[type='submit']").click()
            expect(page.locator(".nbjobs-Who")).to_contain_text("root (admin)")
            expect(page.locator(".nbjobs-Card").first).to_contain_text("GPUs held")
            page.reload()  # the token stays with the tab
            expect(page.locator(".nbjobs-Who")).to_contain_text("root (admin)")
        finally:
            context.close()


def credit_row(page: Page, account: str):
    return page.locator("table[aria-label='Credit accounts'] tbody tr").filter(
        has=page.locator("td", has_text=re.compile(f"^{re.escape(account)}"))
    )


def test_a_class_pays_for_a_job_and_a_teacher_and_an_admin_grant_credits(
    lab: Page, admin: Page, teacher: Page, hub: Hub
):
    # the Submit dialog says what a job of the priced flavor may cost
    notebook = open_notebook(lab, "slow.ipynb")
    notebook.locator(".jp-Toolbar-item[data-jp-item-name='nbjobs-submit'] button").click()
    dialog = submit_dialog(lab)
    paid = dialog.locator(".nbjobs-Flavor[data-flavor='t4-paid']")
    expect(paid.locator(".nbjobs-Flavor-resources")).to_contain_text(
        "4 credits an hour, at most 2 a job"
    )
    expect(dialog.locator(".nbjobs-Flavor[data-flavor='t4']")).not_to_contain_text("credits")
    lab.screenshot(path=str(ARTIFACTS / "48-dialog-credits.png"))
    dialog.locator("button", has_text="Cancel").click()
    expect(dialog).to_be_hidden()

    job = submit_by_api(lab, "slow.ipynb", "t4-paid", "dash-paid", seconds=0.2)
    wait_for(lab, job["id"], "succeeded")
    # ada has no account of her own: her class's pays, and is charged once a round has
    # seen the job ended (every 10 s)
    deadline = time.monotonic() + 40
    admin.goto(hub.url + DASHBOARD + "#credits")
    while True:
        admin.locator(".nbjobs-Tabs a", has_text="Credits").click()  # drawn anew
        row = credit_row(admin, "class:demo-class")
        expect(row).to_have_count(1)
        cells = row.locator("td")
        if cells.nth(2).inner_text() == "0.00" and cells.nth(6).inner_text() != "0.00":
            break  # nothing held, something charged
        assert time.monotonic() < deadline, row.inner_text()
        time.sleep(1)
    row.locator("button[data-action='statement']").click()
    statement = admin.locator("table[aria-label='Statement of class:demo-class'] tbody tr")
    expect(statement).to_have_count(1)
    expect(statement.first).to_contain_text("charge")
    expect(statement.first).to_contain_text(job["id"])
    expect(statement.first).to_contain_text("ada")

    # the teacher adds to her class's account, saying why
    teacher.goto(hub.url + DASHBOARD + "#credits")
    mine = credit_row(teacher, "class:demo-class")
    mine.locator("input[type='number']").fill("5")
    mine.locator("input[type='text']").fill("lab 4")
    mine.locator("button[data-action='grant']").click()
    expect(teacher.locator(".nbjobs-Status")).to_have_text("Granted 5 credits to class:demo-class.")
    granted = teacher.locator("table[aria-label='Statement of class:demo-class'] tbody tr")
    expect(granted).to_have_count(2)
    expect(granted.nth(1)).to_contain_text("lab 4")
    expect(granted.nth(1)).to_contain_text("tess")

    # the admin opens an account for ada: from now on it pays for her jobs
    form = admin.locator("form[aria-label='Grant credits']")
    form.locator("#nbjobs-account").fill("user:ada")
    form.locator("#nbjobs-amount").fill("3")
    form.locator("#nbjobs-note").fill("welcome")
    form.locator("button[type='submit']").click()
    expect(admin.locator(".nbjobs-Status")).to_have_text("Granted 3 credits to user:ada.")
    expect(credit_row(admin, "user:ada")).to_contain_text("3.00")
    admin.screenshot(path=str(ARTIFACTS / "47-dashboard-credits.png"), full_page=True)
    status, accounts = api(lab, "GET", API + "credits")
    assert status == 200
    assert isinstance(accounts, list)
    paying = [a["account"] for a in accounts if a["pays_for_you"]]
    assert paying == ["user:ada"]

"""Teachers look into their students' work read-only, and admins see who looked: a
job's result rendered by the service (never the live file, nothing that runs), its log,
and the audit list of every reading of another person's job."""

from __future__ import annotations

import os
from datetime import timedelta

import httpx
import pytest
from nbjobs.job_service import audit

from .conftest import start_service, stop_all

CLASSES = [{"name": "ml-101", "teachers": ["eve"], "students": ["ada"], "flavors": ["cpu"]}]
#: what a student's notebook may print: HTML with a script, which must never run
SCRIPT = "<script>document.title = 'ran'</script><b id='marker'>bold words</b>"


@pytest.fixture
async def classroom(tmp_path):
    svc = await start_service(tmp_path, {"classes": CLASSES})
    try:
        svc.write(
            "ada",
            "work.ipynb",
            f"from IPython.display import HTML; HTML({SCRIPT!r})",
            "print('loss 0.25')",
        )
        job = await svc.submit("ada", "work.ipynb")
        job = await svc.wait("ada", job["id"])
        assert job["state"] == "succeeded", job
        yield svc, job
    finally:
        await stop_all(svc)


async def test_a_teacher_reads_her_students_result_and_log_and_the_admin_sees_it(classroom):
    svc, job = classroom
    async with svc.client("eve") as eve:
        result = await eve.get(f"jobs/{job['id']}/result")
        again = await eve.get(f"jobs/{job['id']}/result")
        log = await eve.get(f"jobs/{job['id']}/logs")
    async with svc.client("ada") as ada:
        own = await ada.get(f"jobs/{job['id']}/result")
    async with svc.client("root") as root:
        audit = (await root.get("audit")).json()

    assert result.status_code == 200, result.text
    assert result.headers["Content-Type"].startswith("text/html")
    csp = result.headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp
    assert "sandbox" in csp
    assert "script-src" not in csp  # no script of any origin
    assert "loss 0.25" in result.text
    assert "bold words" in result.text  # the output is shown; the CSP keeps its script inert
    assert again.status_code == 200
    assert log.status_code == 200
    assert own.status_code == 200
    # eve's result twice and her log once; ada's own reading is no entry
    readings = [(e["reader"], e["owner"], e["job_id"], e["what"]) for e in audit["entries"]]
    assert sorted(readings) == [
        ("eve", "ada", job["id"], "log"),
        ("eve", "ada", job["id"], "result"),
    ]
    assert audit["more"] is False


async def test_others_get_nothing_and_only_admins_read_the_audit_list(classroom):
    svc, job = classroom
    async with svc.client("bob") as bob:
        stranger = await bob.get(f"jobs/{job['id']}/result")
        stranger_log = await bob.get(f"jobs/{job['id']}/logs")
    async with svc.client("eve") as eve:
        audit = await eve.get("audit")
    async with svc.client("root") as root:
        entries = (await root.get("audit")).json()["entries"]

    assert stranger.status_code == 404  # another student's job does not exist for him
    assert stranger_log.status_code == 404
    assert audit.status_code == 403
    assert "nbjobs admins" in audit.json()["message"]
    assert entries == []  # refused readings are none


async def test_the_result_is_never_read_through_a_link(classroom, tmp_path):
    svc, job = classroom
    secret = tmp_path / "service-secret.ipynb"
    secret.write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    output = svc.home("ada") / job["output_path"]
    output.unlink()
    os.symlink(secret, output)  # the student swaps her output for a link out of her folder
    async with svc.client("eve") as eve:
        swapped = await eve.get(f"jobs/{job['id']}/result")
    output.unlink()
    async with svc.client("eve") as eve:
        gone = await eve.get(f"jobs/{job['id']}/result")

    assert swapped.status_code == 404
    assert "cannot be read" in swapped.json()["message"]
    assert gone.status_code == 404


async def test_a_running_job_has_no_result_yet(tmp_path):
    svc = await start_service(tmp_path, {"classes": CLASSES})
    try:
        svc.write("ada", "slow.ipynb", "import time; time.sleep(30)")
        job = await svc.submit("ada", "slow.ipynb")
        await svc.wait("ada", job["id"], until=lambda j: j["state"] == "running")
        async with svc.client("eve") as eve:
            early = await eve.get(f"jobs/{job['id']}/result")
    finally:
        await stop_all(svc)
    assert early.status_code == 409
    assert "has not ended" in early.json()["message"]


async def test_a_result_link_opens_once_under_the_results_policy_and_is_recorded(classroom):
    svc, job = classroom
    async with svc.client("eve") as eve:
        made = await eve.post(f"jobs/{job['id']}/result/link")
    async with svc.client("bob") as bob:
        stranger = await bob.post(f"jobs/{job['id']}/result/link")
    async with svc.client("root") as root:
        before = (await root.get("audit")).json()["entries"]
    assert made.status_code == 201, made.text
    link = made.json()
    assert link["url"].startswith("/services/nbjobs/dashboard/result/")
    assert stranger.status_code == 404  # no link to a job he may not see
    assert before == []  # made, not yet opened: nothing read

    origin = svc.url.split("/services/")[0]
    async with httpx.AsyncClient(base_url=origin, timeout=60) as browser:  # no token
        opened = await browser.get(link["url"])
        again = await browser.get(link["url"])
        forged = await browser.get(link["url"][:-4] + "AAAA")
    async with svc.client("root") as root:
        after = (await root.get("audit")).json()["entries"]

    assert opened.status_code == 200, opened.text
    assert "loss 0.25" in opened.text
    csp = opened.headers["Content-Security-Policy"]
    assert "sandbox" in csp
    assert "script-src" not in csp
    assert "style-src 'unsafe-inline'" in csp  # the rendering keeps its styles
    assert "frame-ancestors 'self'" in csp
    assert again.status_code == 404  # once
    assert "opened already" in again.text
    assert forged.status_code == 404
    assert [(e["reader"], e["what"]) for e in after] == [("eve", "result")]


async def test_a_result_link_waits_a_minute_at_most(classroom, monkeypatch):
    svc, job = classroom
    async with svc.client("eve") as eve:
        link = (await eve.post(f"jobs/{job['id']}/result/link")).json()
    later = audit.utcnow() + audit.LINK_TTL + timedelta(seconds=1)
    monkeypatch.setattr(audit, "utcnow", lambda: later)
    origin = svc.url.split("/services/")[0]
    async with httpx.AsyncClient(base_url=origin, timeout=60) as browser:
        stale = await browser.get(link["url"])
    assert stale.status_code == 404
    assert "more than a minute old" in stale.text

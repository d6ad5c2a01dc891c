"""Mail as a weapon (issue 31, attack 5): a student set a classmate's address and sent
them 15 mails in 2 s ("Your grade is F - from the dean"). Now mail goes only to an
address its user confirmed with the code mailed to it, and past a per-user rate limit
messages wait to go as one summary. A real SMTP server (aiosmtpd) receives everything.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from datetime import timedelta

from nbjobs.job_service.db import utcnow
from nbjobs.job_service.notifications.addresses import owns

from nbjobs.config import parse_config

from .conftest import TOKENS, start_service, stop_all
from .test_notifications import notifying, owned, wait_until


def text_of(mail) -> str:
    """A mail's text as its reader sees it (decoded from quoted-printable)."""
    return mail.get_payload(decode=True).decode()


CODE = re.compile(r"Code: ([A-Z0-9]{5}-[A-Z0-9]{5})")


def mail_only(smtp_port: int, **extra) -> dict:
    config = notifying(smtp_port, "127.0.0.1:9", **extra)
    config["notifications"]["webhook"] = None
    return config


async def put(svc, user: str, **body):
    async with svc.client(user) as c:
        return await c.put("notifications/settings", json=body)


async def confirm(svc, user: str, code: str):
    async with svc.client(user) as c:
        return await c.post("notifications/confirm", json={"code": code})


async def submit_and_cancel(svc, user: str, name: str) -> str:
    job = await svc.submit(user, "nb.py", flavor="held", name=name)
    async with svc.client(user) as c:
        r = await c.post(f"jobs/{job['id']}/cancel")
    assert r.status_code in (200, 202), r.text
    return job["id"]


HELD = {"name": "held", "gpus": 0, "approval": {"groups": ["students", "staff"]}}
FLAVORS = [{"name": "cpu", "gpus": 0}, HELD]


async def settled(svc, user: str) -> list[dict]:
    """``user``'s messages once a finding round has looked at every job that ended and
    each message found was sent (or held, or given up)."""
    await svc.service.in_db(svc.service.outbox.find)
    await svc.service.outbox.send_due()
    for _ in range(300):
        async with svc.client(user) as c:
            found = (await c.get("notifications")).json()["notifications"]
        if not any(n["state"] in ("pending", "sending") for n in found):
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"messages never settled: {found}")


async def test_a_classmates_address_gets_one_confirmation_and_nothing_else(tmp_path, smtp):
    port, inbox = smtp
    svc = await start_service(tmp_path, {**mail_only(port), "flavors": FLAVORS})
    try:
        svc.script("ada", "nb.py", "x = 1")
        saved = await put(svc, "ada", email="bob@uni.example", on=["cancelled"])
        again = await put(svc, "ada", email="bob@uni.example", on=["cancelled"])
        for n in range(15):
            await submit_and_cancel(svc, "ada", f"Your grade is F - from the dean {n}")
        records = await settled(svc, "ada")  # every cancel looked at, told to nobody
        [asked] = inbox.mails
        got = await put(svc, "ada", email="bob@uni.example")
        async with svc.client("ada") as c:
            listed = (await c.get("notifications/settings")).json()["settings"]
    finally:
        await stop_all(svc)

    assert saved.status_code == 200, saved.text
    assert saved.json()["email_confirmed"] is False
    assert again.json()["email_confirmed"] is False
    assert got.json()["email_confirmed"] is False
    assert listed[0]["email_confirmed"] is False
    assert len(inbox.mails) == 1  # the one confirmation, not one per save nor per job
    assert asked["To"] == "bob@uni.example"
    assert asked["Subject"] == "[nbjobs] confirm your address for job notifications"
    body = text_of(asked)
    assert "signed in to nbjobs as 'ada'" in body
    assert "If it was not you, ignore this mail" in body
    assert "grade" not in body
    assert [r["event"] for r in records] == ["confirm_email"]


async def test_the_code_mailed_to_an_address_confirms_it_and_job_mail_follows(tmp_path, smtp):
    port, inbox = smtp
    svc = await start_service(tmp_path, {**mail_only(port), "flavors": FLAVORS})
    try:
        svc.script("ada", "nb.py", "x = 1")
        assert (await put(svc, "ada", email="Ada@uni.example", on=["cancelled"])).status_code == 200
        [asked] = await wait_until(lambda: inbox.mails)
        code = CODE.search(text_of(asked)).group(1)
        wrong = await confirm(svc, "ada", "AAAAA-AAAAA")
        by_bob = await confirm(svc, "bob", code)  # the code is ada's: bob confirms nothing
        right = await confirm(svc, "ada", code.lower())  # as typed from the mail, any case
        reused = await confirm(svc, "ada", code)
        async with svc.client("ada") as c:
            [setting] = (await c.get("notifications/settings")).json()["settings"]
        await submit_and_cancel(svc, "ada", "after confirming")
        mails = await wait_until(lambda: inbox.mails[1:])
    finally:
        await stop_all(svc)

    assert wrong.status_code == 400
    assert wrong.json()["message"].startswith("that code confirms no address of yours")
    assert by_bob.status_code == 400
    assert right.status_code == 200, right.text
    assert right.json() == {"address": "ada@uni.example"}
    assert reused.status_code == 400  # a code works once
    assert setting["email_confirmed"] is True
    assert mails[0]["To"] == "Ada@uni.example"
    assert '"after confirming" was cancelled' in mails[0]["Subject"]


async def test_confirmation_mails_are_bounded_per_user_and_wrong_codes_lock_out(tmp_path, smtp):
    port, inbox = smtp
    svc = await start_service(tmp_path, mail_only(port))
    try:
        saves = [
            await put(svc, "ada", email=f"person{n}@uni.example", on=["failed"]) for n in range(6)
        ]
        guesses = [await confirm(svc, "ada", f"GUESS-{n:05d}") for n in range(11)]
        await settled(svc, "ada")
    finally:
        await stop_all(svc)

    assert [s.status_code for s in saves] == [200] * 5 + [429]
    assert (
        saves[5]
        .json()["message"]
        .startswith("nbjobs mailed 5 confirmation codes for you in the last day")
    )
    assert len(inbox.mails) == 5
    assert [g.status_code for g in guesses] == [400] * 10 + [429]
    assert "10 wrong codes in the last hour" in guesses[10].json()["message"]


async def test_past_the_rate_limit_messages_wait_and_go_as_one_summary(tmp_path, smtp):
    port, inbox = smtp
    limit = {"rate_limit": {"messages": 3, "period": "1h"}}
    svc = await start_service(tmp_path, {**mail_only(port, **limit), "flavors": FLAVORS})
    try:
        svc.script("ada", "nb.py", "x = 1")
        owned(svc, "ada", "ada@uni.example")
        assert (await put(svc, "ada", email="ada@uni.example", on=["cancelled"])).is_success
        for n in range(8):
            await submit_and_cancel(svc, "ada", f"job {n}")
        held = [n for n in await settled(svc, "ada") if n["state"] == "held"]
        held_mails = len(inbox.mails)
        # the hour is over: what was held goes as one summary
        later = utcnow() + timedelta(hours=1, minutes=1)
        svc.service.outbox.clock = lambda: later
        summarised = [n for n in await settled(svc, "ada") if n["state"] == "summarised"]
    finally:
        await stop_all(svc)

    assert held_mails == 3
    assert len(held) == 5
    assert len(inbox.mails) == 4
    summary = inbox.mails[3]
    assert summary["Subject"] == "[nbjobs] 5 more messages about your jobs"
    text = text_of(summary)
    for n in range(3, 8):
        assert f'"job {n}" was cancelled' in text
    assert len(summarised) == 5


async def test_a_hub_whose_names_are_addresses_needs_no_code_for_the_users_own(tmp_path):
    text = (
        "notifications:\n  email:\n    smtp_host: mail\n    from: jobs@uni.example\n"
        "    names_are_addresses: true\n"
    )
    svc = await start_service(tmp_path)
    try:
        config = parse_config(text).notifications
        with svc.service.sessions() as db:
            mine = owns(db, config, "ada@uni.example", "ADA@uni.example")
            other = owns(db, config, "ada@uni.example", "bob@uni.example")
            off = owns(db, svc.service.config.notifications, "ada", "ada")
    finally:
        await stop_all(svc)

    assert (mine, other, off) == (True, False, False)


async def nbjobs(svc, user: str, *args: str) -> tuple[int, str]:
    """The ``nbjobs`` command as ``user``, against the service: its status and output."""
    token = {u: t for t, u in TOKENS.items()}[user]
    env = {**os.environ, "NBJOBS_URL": svc.url, "NBJOBS_TOKEN": token}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "nbjobs.cli",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=env,
    )
    out, _ = await process.communicate()
    return process.returncode or 0, out.decode()


async def test_nbjobs_notify_says_an_address_waits_for_its_code_and_takes_it(tmp_path, smtp):
    port, inbox = smtp
    svc = await start_service(tmp_path, mail_only(port))
    try:
        saved = await nbjobs(svc, "ada", "notify", "--email", "ada@uni.example")
        [asked] = await wait_until(lambda: inbox.mails)
        code = CODE.search(text_of(asked)).group(1)
        wrong = await nbjobs(svc, "ada", "notify", "--confirm", "XXXXX-XXXXX")
        right = await nbjobs(svc, "ada", "notify", "--confirm", code)
        shown = await nbjobs(svc, "ada", "notify")
    finally:
        await stop_all(svc)

    assert saved[0] == 0, saved[1]
    assert "ada@uni.example is not confirmed yet: nbjobs mailed a code there" in saved[1]
    assert f"nbjobs notify --confirm {code}" in text_of(asked)
    assert wrong[0] != 0
    assert "that code confirms no address of yours" in wrong[1]
    assert right == (0, "ada@uni.example is confirmed: mail about your jobs goes there\n")
    assert shown[0] == 0
    assert "not confirmed" not in shown[1]
    assert "-> ada@uni.example" in shown[1]

"""Notifications by email and webhook: a real SMTP server (aiosmtpd) and a real HTTP
server on localhost receive them; a real service runs the jobs they are about."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from nbjobs.job_service.errors import Caller
from nbjobs.job_service.notifications.store import AddressRecord

from tests.ports import free_port

from .conftest import Inbox, start_service, stop_all  # noqa: F401 (Inbox: for the TLS tests)

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def hook():
    """A local HTTP server that keeps each JSON body POSTed to it; /moved redirects."""
    received: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.path == "/moved":
                self.send_response(302)
                self.send_header("Location", "http://169.254.169.254/latest/meta-data")
                self.end_headers()
                return
            received.append(json.loads(body))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_port}", received
    server.shutdown()
    server.server_close()


def notifying(smtp_port: int, hook_host: str, **extra) -> dict:
    return {
        "notifications": {
            "email": {
                "smtp_host": "127.0.0.1",
                "smtp_port": smtp_port,
                "from": "nbjobs@uni.example",
                "security": "none",
                "allowed_domains": ["uni.example"],
            },
            "webhook": {"allowed_hosts": [hook_host], "allow_http": True},
            "links_base": "https://hub.uni.example",
            "first_delay": 1,
            **extra,
        }
    }


async def wait_until(check, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, "nothing arrived"
        await asyncio.sleep(0.2)
    return found


def owned(svc, user: str, address: str) -> None:
    """Record ``address`` as confirmed by ``user``, as entering the mailed code does
    (the tests of that code are in test_notification_abuse.py)."""
    now = datetime.now(timezone.utc)
    with svc.service.sessions() as db:
        db.add(
            AddressRecord(
                id=uuid.uuid4().hex[:12],
                user=user,
                address=address.lower(),
                confirmed_at=now,
                created_at=now,
            )
        )
        db.commit()


async def put_settings(svc, user, **body):
    """Save ``user``'s settings; an email in them counts as confirmed already."""
    if body.get("email"):
        owned(svc, user, body["email"])
    async with svc.client(user) as c:
        return await c.put("notifications/settings", json=body)


async def test_a_failed_job_is_told_by_mail_and_webhook_with_its_error_and_links(
    tmp_path, smtp, hook
):
    port, inbox = smtp
    host, received = hook
    svc = await start_service(tmp_path, notifying(port, host))
    try:
        saved = await put_settings(
            svc,
            "ada",
            email="ada@uni.example",
            webhook=f"http://{host}/hooks/ada",
            on=["failed", "succeeded"],
        )
        assert saved.status_code == 200, saved.text
        svc.write("ada", "bad.ipynb", "x = 1", "1 / 0")
        job = await svc.submit("ada", "bad.ipynb", name="nightly training")
        await svc.wait("ada", job["id"])

        [mail] = await wait_until(lambda: inbox.mails)
        [body] = await wait_until(lambda: received)
        async with svc.client("ada") as c:
            for _ in range(50):  # the sender records each attempt just after it
                sent = (await c.get("notifications")).json()["notifications"]
                if all(n["state"] == "sent" for n in sent):
                    break
                await asyncio.sleep(0.1)
    finally:
        await stop_all(svc)

    assert mail["To"] == "ada@uni.example"
    assert mail["From"] == "nbjobs@uni.example"
    assert mail["Subject"].startswith('[nbjobs] "nightly training" failed after ')
    text = mail.get_payload(decode=True).decode().replace("\r\n", "\n")
    assert f'Job "nightly training" ({job["id"]}) failed after' in text
    assert "Error: ZeroDivisionError: division by zero" in text
    assert "code cell 2 of 2" in text  # the runner's words: the cell as the user counts
    assert "Notebook: bad.ipynb" in text
    assert f"https://hub.uni.example/hub/user-redirect/lab/tree/{job['output_path']}" in text
    assert f"https://hub.uni.example/hub/user-redirect/nbjobs/api/jobs/{job['id']}/logs" in text
    assert body["event"] == "failed"
    assert (body["id"], body["state"], body["flavor"]) == (job["id"], "failed", "cpu")
    assert body["error"]["ename"] == "ZeroDivisionError"
    assert body["links"]["output"].endswith(job["output_path"])
    assert body["text"] == text.strip()
    assert sorted(n["channel"] for n in sent) == ["email", "webhook"]
    assert all(n["state"] == "sent" and len(n["attempts"]) == 1 for n in sent)


async def test_settings_refuse_addresses_and_hosts_the_admin_does_not_allow(tmp_path, hook):
    host, _ = hook
    svc = await start_service(tmp_path, notifying(free_port(), host))
    try:
        cases = {
            "elsewhere": {"email": "ada@gmail.example"},
            "not an address": {"email": "ada"},
            "internal": {"webhook": "http://10.0.0.1/hook"},
            "metadata": {"webhook": "http://169.254.169.254/latest"},
            "credentials": {"webhook": f"http://user:pw@{host}/hook"},
            "not a url": {"webhook": "hooks"},
        }
        answers = {name: await put_settings(svc, "ada", **body) for name, body in cases.items()}
        ok = await put_settings(svc, "ada", webhook=f"http://{host}/fine", webhook_format="slack")
    finally:
        await stop_all(svc)
    words = {name: r.json()["message"] for name, r in answers.items()}
    assert all(r.status_code == 400 for r in answers.values()), words
    assert words["elsewhere"] == (
        "mail goes only to addresses in uni.example "
        "(notifications.email.allowed_domains in nbjobs.yaml)"
    )
    assert words["not an address"] == "'ada' is not an email address"
    assert words["internal"].startswith("webhooks go only to the hosts your admin allows")
    assert words["internal"].endswith("not to 10.0.0.1:80")
    assert "169.254.169.254" in words["metadata"]
    assert words["credentials"] == "a webhook URL may not carry a user name or password"
    assert ok.status_code == 200
    assert ok.json()["webhook_format"] == "slack"


async def test_without_mail_configured_setting_an_address_says_so(svc):
    r = await put_settings(svc, "ada", email="ada@uni.example")
    assert r.status_code == 400
    assert r.json()["message"] == (
        "this service sends no mail (notifications.email is not set in nbjobs.yaml)"
    )


async def test_an_unreachable_mail_server_is_retried_with_backoff_then_given_up(tmp_path, hook):
    host, _ = hook
    closed = free_port()  # nothing listens there
    svc = await start_service(tmp_path, notifying(closed, host, attempts=3, first_delay=60))
    outbox = svc.service.outbox
    await outbox.stop()
    try:
        await put_settings(svc, "ada", email="ada@uni.example", on=["succeeded"])
        svc.script("ada", "ok.py", "1")
        job = await svc.submit("ada", "ok.py")
        await svc.wait("ada", job["id"])
        assert await svc.service.in_db(outbox.find) == 1
        delays = []
        for _ in range(3):
            assert await outbox.send_due() == 1
            async with svc.client("ada") as c:
                [note] = (await c.get("notifications")).json()["notifications"]
            assert await outbox.send_due() == 0  # not before its time
            if note["next_attempt_at"]:
                due = datetime.fromisoformat(note["next_attempt_at"])
                delays.append(round((due - outbox.clock()).total_seconds()))
                outbox.clock = lambda due=due: due  # time passes to the next attempt
    finally:
        await stop_all(svc)
    assert delays == [60, 120]
    errors = svc.service.metrics.registry.get_sample_value("nbjobs_notification_errors_total")
    assert errors == 3  # every failed attempt, for the admins' alerts
    assert note["state"] == "failed"
    assert len(note["attempts"]) == 3
    assert all(not a["ok"] and "Connection" in a["error"] for a in note["attempts"])


async def test_a_redirect_is_not_followed_and_the_attempt_says_so(tmp_path, smtp, hook):
    port, _ = smtp
    host, received = hook
    svc = await start_service(tmp_path, notifying(port, host, attempts=1))
    outbox = svc.service.outbox
    await outbox.stop()
    try:
        await put_settings(svc, "ada", webhook=f"http://{host}/moved", on=["succeeded"])
        svc.script("ada", "ok.py", "1")
        job = await svc.submit("ada", "ok.py")
        await svc.wait("ada", job["id"])
        await svc.service.in_db(outbox.find)
        await outbox.send_due()
        async with svc.client("ada") as c:
            [note] = (await c.get("notifications")).json()["notifications"]
    finally:
        await stop_all(svc)
    assert note["state"] == "failed"
    assert note["attempts"][0]["error"] == "the webhook answered HTTP 302"
    assert received == []


async def test_a_long_wait_and_a_refused_scheduled_run_are_told(tmp_path, smtp, hook, monkeypatch):
    port, inbox = smtp
    host, received = hook
    overrides = notifying(port, host)
    overrides["quotas"] = {"default": {"max_running_gpus": 1, "max_queued_jobs": 300}}
    svc = await start_service(tmp_path, overrides)
    outbox = svc.service.outbox
    await outbox.stop()
    await svc.service.ticker.stop()
    try:
        await put_settings(
            svc,
            "ada",
            webhook=f"http://{host}/ada",
            webhook_format="teams",
            on=["queued_long", "run_refused"],
            queue_minutes=5,
        )
        svc.script("ada", "slow.py", "import time; time.sleep(60)")
        first = await svc.submit("ada", "slow.py", "gpu")
        second = await svc.submit("ada", "slow.py", "gpu")  # waits: one GPU at a time
        await svc.wait("ada", first["id"], lambda j: j["state"] == "running")
        submitted = datetime.fromisoformat(second["submitted_at"])
        outbox.clock = lambda: submitted + timedelta(minutes=6)
        assert await svc.service.in_db(outbox.find) == 1
        assert await svc.service.in_db(outbox.find) == 0  # told once
        await outbox.send_due()
        [card] = received
        # a definition whose flavor its owner may no longer use, run now: refused
        async with svc.client("cy") as c:
            await c.put(
                "notifications/settings",
                json={"webhook": f"http://{host}/cy", "on": ["run_refused"]},
            )
            made = (
                await c.post("definitions", json={"path": "slow.py", "flavor": "staff-only"})
            ).json()
        # cy leaves the staff group: runs act for cy as the authenticator sees cy now
        auth = svc.server.request_callback.settings["nbjobs_auth"]
        monkeypatch.setitem(auth.user_groups, "cy", ["students"])
        svc.script("cy", "slow.py", "1")
        await svc.service.ticker.run_now(Caller("root", admin=True), made["id"])
        assert await svc.service.in_db(outbox.find) == 1
        await outbox.send_due()
        refusal = received[1]
    finally:
        await stop_all(svc)
    assert card["@type"] == "MessageCard"
    assert card["title"] == '[nbjobs] "slow" has waited 6 min to start'
    assert f"({second['id']}) has waited 6 min in the queue" in card["text"]
    assert refusal["event"] == "run_refused"
    assert refusal["reason"].startswith("you may not use flavor 'staff-only'")
    assert inbox.mails == []  # no address set: no mail


async def test_a_scoped_setting_is_removed_and_the_scope_follows_the_users_own(svc):
    svc.script("ada", "n.py", "1")
    async with svc.client("ada") as c:
        made = (await c.post("definitions", json={"path": "n.py", "flavor": "cpu"})).json()
        scoped = await c.put(
            "notifications/settings", json={"definition_id": made["id"], "on": ["succeeded"]}
        )
        own = await c.put("notifications/settings", json={"on": ["failed"]})
        assert (scoped.status_code, own.status_code) == (200, 200)
        removed = await c.delete("notifications/settings", params={"definition": made["id"]})
        left = (await c.get("notifications/settings")).json()["settings"]
        twice = await c.delete("notifications/settings", params={"definition": made["id"]})
        both = await c.delete(
            "notifications/settings", params={"definition": made["id"], "job": "ab12"}
        )
        bad = await c.delete("notifications/settings", params={"job": "../x"})
    async with svc.client("bob") as c:  # ada's own setting is hers alone to remove
        bobs = await c.delete("notifications/settings")
    async with svc.client("ada") as c:
        mine = await c.delete("notifications/settings")
        none_left = (await c.get("notifications/settings")).json()["settings"]

    assert removed.status_code == 204
    assert [(s["definition_id"], s["on"]) for s in left] == [(None, ["failed"])]
    assert twice.status_code == 404
    assert twice.json()["message"] == (
        f"you have no notification setting for job definition {made['id']!r}"
    )
    assert both.status_code == 400
    assert "not both" in both.json()["message"]
    assert bad.status_code == 400
    assert bobs.status_code == 404
    assert bobs.json()["message"] == "you have no notification setting of your own"
    assert mine.status_code == 204
    assert none_left == []


def test_a_plain_host_is_its_schemes_port_only_and_never_the_service_itself(monkeypatch):
    """The attack: hosts allowed without a port reached any port of theirs (the service's
    own API, the mail relay), and the recorded errors told which ports were open."""
    from nbjobs.job_service.notifications.settings import webhook_problem

    from nbjobs.config import NotificationsConfig

    config = NotificationsConfig(
        webhook={"allowed_hosts": ["hooks.example", "relay.example:8443", "localhost:8787"]}
    )
    monkeypatch.setenv("JUPYTERHUB_SERVICE_URL", "http://127.0.0.1:8787")

    assert webhook_problem(config, "https://hooks.example/x") is None
    assert webhook_problem(config, "https://hooks.example:443/x") is None
    assert webhook_problem(config, "https://relay.example:8443/x") is None
    other_port = webhook_problem(config, "https://hooks.example:8787/x")
    assert other_port is not None
    assert other_port.endswith(
        "a host on port 443 unless it names another), not to hooks.example:8787"
    )
    assert webhook_problem(config, "https://relay.example/x") is not None  # 443: not listed
    assert webhook_problem(config, "https://localhost:8787/x") == (
        "a webhook may not call the job service itself"
    )

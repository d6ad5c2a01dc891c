"""The demo's inbox on its own: mail only from the job service's login, webhooks only
with the user's key, each user's messages kept across a restart, the page escaped.
(With a real hub, its OAuth and the job service sending: tests/hub/test_demo.py.)"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import smtplib
import stat
import subprocess
import sys
from email.message import EmailMessage
from pathlib import Path

import pytest
from nbjobs.programs import demo_inbox
from nbjobs.programs.demo_inbox import Inbox, smtp_protocol, webhook_key
from tornado.httpclient import AsyncHTTPClient, HTTPClientError

from .hubproc import free_port


@pytest.fixture
async def running(tmp_path: Path):
    """The inbox's SMTP server and web application on free ports of 127.0.0.1."""
    demo_inbox.write_secrets(tmp_path)
    inbox = Inbox(tmp_path / demo_inbox.STORE_FILE)
    password = (tmp_path / demo_inbox.PASSWORD_FILE).read_text()
    secret = (tmp_path / demo_inbox.SECRET_FILE).read_bytes()
    smtp_port, http_port = free_port(), free_port()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: smtp_protocol(inbox, password, loop), "127.0.0.1", smtp_port
    )
    prefix = "/services/demo-inbox/"
    app = demo_inbox.make_app(inbox, secret, prefix, f"http://127.0.0.1:{http_port}")
    http = app.listen(http_port, address="127.0.0.1")
    yield {
        "inbox": inbox,
        "password": password,
        "secret": secret,
        "smtp": smtp_port,
        "hooks": f"http://127.0.0.1:{http_port}{prefix}hook/",
    }
    http.stop()
    server.close()


def send(port: int, to: str, subject: str, login: tuple[str, str] | None) -> None:
    """Mail as the job service sends it (smtplib, plain SMTP, a login)."""
    message = EmailMessage()
    message["From"] = "nbjobs@demo.test"
    message["To"] = to
    message["Subject"] = subject
    message.set_content(f"about {subject}")
    with smtplib.SMTP("127.0.0.1", port, timeout=10) as smtp:
        if login:
            smtp.login(*login)
        smtp.send_message(message)


async def test_mail_reaches_its_user_only_from_the_services_login(running):
    port, password = running["smtp"], running["password"]
    await asyncio.to_thread(send, port, "ada@demo.test", "job done", ("nbjobs", password))

    # without the login, with a wrong one, or to an address outside the demo: refused
    with pytest.raises(smtplib.SMTPSenderRefused):
        await asyncio.to_thread(send, port, "ada@demo.test", "forged", None)
    with pytest.raises(smtplib.SMTPAuthenticationError):
        await asyncio.to_thread(send, port, "ada@demo.test", "forged", ("nbjobs", "guess"))
    with pytest.raises(smtplib.SMTPRecipientsRefused):
        await asyncio.to_thread(send, port, "ada@example.org", "away", ("nbjobs", password))

    [mail] = running["inbox"].of("ada")
    assert (mail["kind"], mail["subject"], mail["text"].strip()) == (
        "mail",
        "job done",
        "about job done",
    )
    assert running["inbox"].of("bob") == []


async def test_a_webhook_lands_only_with_the_users_own_key(running):
    client = AsyncHTTPClient()
    ada_key = webhook_key(running["secret"], "ada")
    payload = {"event": "succeeded", "subject": '[nbjobs] "train" succeeded', "user": "ada"}
    answer = await client.fetch(
        running["hooks"] + f"ada/{ada_key}", method="POST", body=json.dumps(payload)
    )
    assert answer.code == 204
    # bob's name with ada's key, or a made-up key: nothing lands, nothing is said
    for wrong in (f"bob/{ada_key}", "ada/" + "0" * 32):
        with pytest.raises(HTTPClientError) as refused:
            await client.fetch(running["hooks"] + wrong, method="POST", body=json.dumps(payload))
        assert refused.value.code == 404
    [hook] = running["inbox"].of("ada")
    assert hook["kind"] == "webhook"
    assert hook["subject"] == '[nbjobs] "train" succeeded'
    assert json.loads(hook["text"]) == payload
    assert running["inbox"].of("bob") == []


def test_messages_outlive_a_restart_in_a_file_only_root_reads(tmp_path):
    store = tmp_path / "inbox.jsonl"
    inbox = Inbox(store, keep=3)
    for n in range(5):
        inbox.add("ada", "mail", f"message {n}", "text")
    inbox.add("bob", "webhook", "bob's", "{}")
    again = Inbox(store, keep=3)
    assert [m["subject"] for m in again.of("ada")] == ["message 4", "message 3", "message 2"]
    assert [m["subject"] for m in again.of("bob")] == ["bob's"]
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    # the file holds no more than is kept
    assert len(store.read_text().splitlines()) == 4


def test_the_page_shows_a_users_messages_escaped():
    messages = [
        {"kind": "mail", "subject": "<script>alert(1)</script>", "at": "now", "text": "a & b"}
    ]
    text = demo_inbox.page("ada", "ada@demo.test", "http://127.0.0.1:1/hook/ada/k", messages)
    assert "<script>alert" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "a &amp; b" in text
    assert "ada@demo.test" in text
    assert "http://127.0.0.1:1/hook/ada/k" in text
    assert 'Messages (<span id="count">1</span>)' in text


def test_the_page_follows_new_messages_without_reloading():
    # no reload every few seconds (a reader's place on the page went with it): its own
    # script asks for the next message, and the policy lets only that script run
    text = demo_inbox.page("ada", "ada@demo.test", "http://127.0.0.1:1/hook/ada/k", [], 3, "x|y")
    assert 'http-equiv="refresh"' not in text
    assert '<script src="inbox.js" defer></script>' in text
    assert 'data-version="3" data-xsrf="x|y"' in text
    assert "script-src 'self'" in demo_inbox.CSP
    assert "api/messages?seen=" in demo_inbox.SCRIPT


async def test_a_page_waiting_for_mail_is_answered_when_it_comes(running):
    inbox = running["inbox"]
    seen = inbox.version("ada")
    # nothing new: the question waits its time and says so (the same version)
    assert await inbox.wait_for_new("ada", seen, timeout=0.2) == seen
    waiting = asyncio.create_task(inbox.wait_for_new("ada", seen, timeout=60))
    await asyncio.sleep(0)  # the page is waiting now
    assert not waiting.done()
    await asyncio.to_thread(
        send, running["smtp"], "ada@demo.test", "job done", ("nbjobs", running["password"])
    )
    # answered as the mail lands, long before its 60 s
    assert await asyncio.wait_for(waiting, 10) == seen + 1
    assert [m["subject"] for m in inbox.of("ada")] == ["job done"]
    # bob's page is not woken by ada's mail
    assert await inbox.wait_for_new("bob", 0, timeout=0.1) == 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_the_hubs_stop_signal_stops_it_even_when_started_with_sigint_ignored(tmp_path, sig):
    """The hub stops a service with SIGINT and waits 30 s before SIGTERM. The demo run as
    a background job of a script starts everything with SIGINT ignored, where Python has
    no KeyboardInterrupt: the inbox outlived the SIGINT and every hub stop took 30 s more
    (the guides' test's hub, 32 s)."""
    demo_inbox.write_secrets(tmp_path)
    env = dict(os.environ)
    env["JUPYTERHUB_SERVICE_URL"] = f"http://127.0.0.1:{free_port()}"
    command = [sys.executable, "-m", "nbjobs.programs.demo_inbox", f"--workdir={tmp_path}"]
    with subprocess.Popen(
        [*command, f"--smtp-port={free_port()}"],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    ) as proc:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("demo inbox: mail on 127.0.0.1:")
        proc.send_signal(sig)
        try:
            # the hub's 30 s would be the other outcome; a stop takes well under a second
            code = proc.wait(timeout=20)
        finally:
            proc.kill()
    assert code == 0  # stopped by its own handler, not killed by the signal

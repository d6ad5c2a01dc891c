"""The demo's inbox: the mail and webhooks the demo's job service sends, for each user
to read, so that a newcomer sees a real notification without a mail server.

``nbjobs demo`` starts it as a JupyterHub service (the hub's *Services* menu,
``/services/demo-inbox/``). It receives

- **mail** on an SMTP port of 127.0.0.1, from the job service only: the server asks for
  a login whose password is in the demo's private folder (the service's
  ``password_file``), so no other process on the machine can drop mail into it;
- **webhooks** on its own address: each user's webhook URL carries a key made from the
  demo's secret and their name, shown to that user only.

A signed-in user sees the mail to their demo address (``ada@demo.test``) and the
webhooks posted to their URL, newest first; nobody sees anyone else's. Messages are kept
(the newest :data:`KEEP` per user) in ``inbox.jsonl`` in the demo's folder, readable by
root alone, so a restart of the demo loses none.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import email
import email.policy
import hashlib
import hmac
import html
import json
import os
import signal
import sys
import threading
import warnings
from collections import defaultdict, deque
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

#: the mail domain of the demo's users: ada's address is ada@demo.test (``.test`` is
#: reserved: no real mail can go there)
DOMAIN = "demo.test"
#: the service's name in the hub, and so its path (/services/demo-inbox/)
SERVICE_NAME = "demo-inbox"
#: the account the job service logs in to the inbox's SMTP server with
SMTP_LOGIN = "nbjobs"
#: messages kept per user
KEEP = 200
SECRET_FILE = "inbox_secret"
PASSWORD_FILE = "inbox_smtp_password"
STORE_FILE = "inbox.jsonl"


def address_of(user: str) -> str:
    """The demo address of ``user``."""
    return f"{user}@{DOMAIN}"


def webhook_key(secret: bytes, user: str) -> str:
    """The key in ``user``'s webhook URL: only one who knows the secret can make it."""
    return hmac.new(secret, f"webhook:{user}".encode(), hashlib.sha256).hexdigest()[:32]


def write_secrets(workdir: Path) -> None:
    """The inbox's secret and the SMTP password, made once, readable by their owner only."""
    for name in (SECRET_FILE, PASSWORD_FILE):
        path = workdir / name
        if path.exists():
            continue
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(os.urandom(24).hex())


def notifications_config(workdir: Path, http_port: int, smtp_port: int, hub_url: str) -> dict:
    """The ``notifications`` section of the demo's nbjobs.yaml: mail and webhooks to the
    inbox, links back to the hub."""
    return {
        "email": {
            "smtp_host": "127.0.0.1",
            "smtp_port": smtp_port,
            "security": "none",
            "from": f"nbjobs@{DOMAIN}",
            "username": SMTP_LOGIN,
            "password_file": str(workdir / PASSWORD_FILE),
            "allowed_domains": [DOMAIN],
            "timeout": 10,
        },
        "webhook": {"allowed_hosts": [f"127.0.0.1:{http_port}"], "allow_http": True},
        "links_base": hub_url,
        "first_delay": 5,
    }


def add_to_hub(c: Any, workdir: str, http_port: int, smtp_port: int) -> None:
    """Make the inbox a service of the hub configured in ``c``, open to every user."""
    c.JupyterHub.services = [
        *c.JupyterHub.get("services", []),
        {
            "name": SERVICE_NAME,
            "display": True,
            "oauth_no_confirm": True,
            "url": f"http://127.0.0.1:{http_port}",
            "command": [
                sys.executable,
                "-m",
                "nbjobs.programs.demo_inbox",
                f"--workdir={workdir}",
                f"--smtp-port={smtp_port}",
            ],
        },
    ]
    from nbjobs.hub_config import grant_every_user

    grant_every_user(c, [f"access:services!service={SERVICE_NAME}"])


class Inbox:
    """Every user's messages, newest last, kept in a file as they come."""

    def __init__(self, path: Path, keep: int = KEEP) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._by_user: dict[str, deque[dict[str, Any]]] = defaultdict(lambda: deque(maxlen=keep))
        #: messages each user has been sent since the inbox started (kept ones included)
        self._versions: dict[str, int] = defaultdict(int)
        #: a user's page waiting for their next message: set when it comes
        self._arrived: dict[str, asyncio.Event] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        if path.exists():
            for line in path.read_text(errors="replace").splitlines():
                try:
                    message = json.loads(line)
                    self._by_user[str(message["user"])].append(message)
                    self._versions[str(message["user"])] += 1
                except (ValueError, KeyError, TypeError):
                    continue
        self._rewrite()  # drop what no longer fits

    def add(self, user: str, kind: str, subject: str, text: str) -> None:
        message = {
            "user": user,
            "kind": kind,
            "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "subject": subject,
            "text": text,
        }
        with self._lock:
            self._by_user[user].append(message)
            self._versions[user] += 1
            with self._open("a") as f:
                f.write(json.dumps(message) + "\n")
            loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._wake, user)

    def of(self, user: str) -> list[dict[str, Any]]:
        """``user``'s messages, newest first."""
        with self._lock:
            return list(reversed(self._by_user.get(user, ())))

    def version(self, user: str) -> int:
        """How many messages ``user`` has been sent: it changes with each new one."""
        with self._lock:
            return self._versions.get(user, 0)

    async def wait_for_new(self, user: str, seen: int, timeout: float) -> int:
        """Wait until ``user`` has a message their page has not shown (their version is
        not ``seen``), or ``timeout`` seconds; return their version."""
        self._loop = asyncio.get_running_loop()
        loop_ends = self._loop.time() + timeout
        while (version := self.version(user)) == seen:
            left = loop_ends - self._loop.time()
            if left <= 0:
                break
            arrived = self._arrived.setdefault(user, asyncio.Event())
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(arrived.wait(), left)
        return version

    def _wake(self, user: str) -> None:
        arrived = self._arrived.pop(user, None)
        if arrived is not None:
            arrived.set()

    def _rewrite(self) -> None:
        with self._lock, self._open("w") as f:
            for messages in self._by_user.values():
                f.writelines(json.dumps(m) + "\n" for m in messages)

    def _open(self, mode: str) -> Any:
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW
        flags |= os.O_APPEND if mode == "a" else os.O_TRUNC
        return os.fdopen(os.open(self.path, flags, 0o600), mode)


def mail_text(content: bytes) -> tuple[str, str]:
    """A received mail's subject and plain text."""
    message = email.message_from_bytes(content, policy=email.policy.default)
    body = message.get_body(preferencelist=("plain",)) if message.is_multipart() else message
    text = body.get_content() if body is not None else ""
    return str(message.get("Subject", "")), str(text)


class MailSink:
    """aiosmtpd's handler: mail to a demo address goes to its user's inbox; any other
    recipient is refused."""

    def __init__(self, inbox: Inbox) -> None:
        self.inbox = inbox

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, options: list[str]
    ) -> str:
        local, _, domain = address.rpartition("@")
        if domain.lower() != DOMAIN or not local:
            return f"550 only {DOMAIN} addresses are delivered here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        subject, text = mail_text(envelope.original_content or envelope.content)
        for address in envelope.rcpt_tos:
            self.inbox.add(address.rpartition("@")[0].lower(), "mail", subject, text)
        return "250 delivered to the demo inbox"


def smtp_protocol(inbox: Inbox, password: str, loop: asyncio.AbstractEventLoop) -> Any:
    """One SMTP session of the inbox: mail only after the job service's login (plain text,
    which is why the server listens on 127.0.0.1 alone)."""
    from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword

    def check(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> Any:
        ok = (
            isinstance(data, LoginPassword)
            and data.login.decode(errors="replace") == SMTP_LOGIN
            and hmac.compare_digest(data.password, password.encode())
        )
        return AuthResult(success=ok, handled=False)

    with warnings.catch_warnings():
        # aiosmtpd warns of a login without TLS; this one never leaves the machine
        warnings.filterwarnings("ignore", "Requiring AUTH while not requiring TLS")
        return SMTP(
            MailSink(inbox),
            auth_required=True,
            auth_require_tls=False,
            authenticator=check,
            hostname=SERVICE_NAME,
            loop=loop,  # else aiosmtpd asks asyncio.get_event_loop(), which is deprecated
        )


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>Demo inbox of {user}</title>
<script src="inbox.js" defer></script>
<style>
body {{ font: 14px/1.5 system-ui, sans-serif; margin: 2em auto; max-width: 60em;
  color: #222; padding: 0 1em; }}
code {{ background: #f3f3f3; padding: 0.1em 0.3em; word-break: break-all; }}
.how {{ background: #f6f8fa; border: 1px solid #ddd; border-radius: 4px; padding: 0.5em 1em; }}
article {{ border-bottom: 1px solid #ddd; padding: 0.6em 0; }}
.kind {{ display: inline-block; min-width: 5em; font-size: 12px; text-transform: uppercase;
  color: #555; }}
time {{ color: #666; font-size: 12px; margin-left: 0.5em; }}
pre {{ white-space: pre-wrap; margin: 0.3em 0 0; font: 13px/1.4 ui-monospace, monospace; }}
.empty {{ color: #666; }}
.follow {{ color: #666; font-size: 12px; }}
</style></head><body>
<h1>Demo inbox of {user}</h1>
<p>This demo has no mail server: the mail and webhooks its job service sends land here.
You see only your own.</p>
<div class="how">
<p>In JupyterLab, open the <b>Jobs</b> panel, then <b>Notifications</b>:</p>
<ul>
<li>email: <code>{address}</code> (a code to confirm it arrives here first)</li>
<li>webhook: <code>{webhook}</code></li>
</ul></div>
<h2>Messages (<span id="count">{count}</span>)</h2>
<p class="follow" id="follow">New messages appear here as they arrive.</p>
<div id="messages" data-version="{version}" data-xsrf="{xsrf}">
{messages}
</div>
</body></html>
"""


#: the page loads its own style and script only (the script asks for new messages)
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'self'; connect-src 'self'"

#: how long the page's question for new messages waits for one, in seconds
WAIT_SECONDS = 25.0

#: the page's script: it asks for the next message (the answer waits until one comes or
#: WAIT_SECONDS pass) and shows the list again, without reloading the page
SCRIPT = r"""
"use strict";
(() => {
  const list = document.getElementById("messages");
  const count = document.getElementById("count");
  const follow = document.getElementById("follow");
  let version = Number(list.dataset.version);
  const article = m => {
    const item = document.createElement("article");
    item.dataset.kind = m.kind;
    const kind = document.createElement("span");
    kind.className = "kind";
    kind.textContent = m.kind;
    const subject = document.createElement("b");
    subject.textContent = m.subject;
    const at = document.createElement("time");
    at.dateTime = m.at;
    at.textContent = m.at;
    const text = document.createElement("pre");
    text.textContent = m.text;
    item.append(kind, subject, at, text);
    return item;
  };
  const ask = async () => {
    for (;;) {
      try {
        // the hub's sign-in takes a script's request only with the page's XSRF token
        const answer = await fetch(`api/messages?seen=${version}`, {
          cache: "no-store",
          headers: { "X-XSRFToken": list.dataset.xsrf },
        });
        if (!answer.ok) throw new Error(`HTTP ${answer.status}`);
        const body = await answer.json();
        follow.textContent = "New messages appear here as they arrive.";
        if (body.version !== version) {
          version = body.version;
          list.dataset.version = String(version);
          list.replaceChildren(...body.messages.map(article));
          count.textContent = String(body.messages.length);
        }
      } catch (error) {
        follow.textContent = "The inbox does not answer (" + error + "): trying again.";
        await new Promise(again => setTimeout(again, 3000));
      }
    }
  };
  ask();
})();
"""


def page(
    user: str,
    address: str,
    webhook: str,
    messages: Sequence[dict[str, Any]],
    version: int = 0,
    xsrf: str = "",
) -> str:
    """The inbox page of ``user`` (every value escaped); ``version``: their messages' (see
    :meth:`Inbox.version`), from which the page's script follows new ones, asking with
    the ``xsrf`` token."""
    items = [
        '<article data-kind="{kind}"><span class="kind">{kind}</span><b>{subject}</b>'
        '<time datetime="{at}">{at}</time><pre>{text}</pre></article>'.format(
            **{k: html.escape(str(m.get(k, ""))) for k in ("kind", "subject", "at", "text")}
        )
        for m in messages
    ]
    return PAGE.format(
        user=html.escape(user),
        address=html.escape(address),
        webhook=html.escape(webhook),
        count=len(messages),
        version=version,
        xsrf=html.escape(xsrf),
        messages="\n".join(items)
        or '<p class="empty">Nothing yet: ask for messages in the Notifications dialog, '
        "then submit a job.</p>",
    )


def make_app(inbox: Inbox, secret: bytes, prefix: str, public_url: str) -> Any:
    """The inbox's web application: the page (signed-in users, through the hub) and the
    webhook receiver (a key per user)."""
    from jupyterhub.services.auth import HubOAuth, HubOAuthCallbackHandler, HubOAuthenticated
    from tornado import web

    def webhook_url(user: str) -> str:
        return f"{public_url}{prefix}hook/{user}/{webhook_key(secret, user)}"

    class Page(HubOAuthenticated, web.RequestHandler):
        hub_auth_class = HubOAuth

        @web.authenticated
        def get(self) -> None:
            user = self.current_user["name"]
            self.set_header("Cache-Control", "no-store")
            self.set_header("Content-Security-Policy", CSP)
            version = inbox.version(user)
            messages = inbox.of(user)
            token = self.xsrf_token  # the hub's, for the page's script to ask with
            xsrf = token.decode() if isinstance(token, bytes) else str(token)
            self.finish(page(user, address_of(user), webhook_url(user), messages, version, xsrf))

    class Script(web.RequestHandler):
        def get(self) -> None:
            self.set_header("Content-Type", "text/javascript; charset=utf-8")
            self.finish(SCRIPT)

    class Messages(HubOAuthenticated, web.RequestHandler):
        """The user's messages; with ``?seen=N`` (the version their page shows), once
        there is a new one, or after :data:`WAIT_SECONDS` with the same."""

        hub_auth_class = HubOAuth

        @web.authenticated
        async def get(self) -> None:
            user = self.current_user["name"]
            self.set_header("Cache-Control", "no-store")
            seen = self.get_argument("seen", None)
            version = inbox.version(user)
            if seen is not None and seen.isdigit():
                version = await inbox.wait_for_new(user, int(seen), WAIT_SECONDS)
            self.finish(
                {"address": address_of(user), "version": version, "messages": inbox.of(user)}
            )

    class Hook(web.RequestHandler):
        def check_xsrf_cookie(self) -> None:  # a webhook carries its key, not a cookie
            pass

        def post(self, user: str, key: str) -> None:
            if not hmac.compare_digest(key, webhook_key(secret, user)):
                raise web.HTTPError(404)
            try:
                body = json.loads(self.request.body[:1_000_000])
            except ValueError:
                body = {"text": self.request.body[:100_000].decode(errors="replace")}
            if not isinstance(body, dict):
                body = {"text": json.dumps(body)}
            subject = str(body.get("subject") or body.get("event") or "webhook")
            inbox.add(user, "webhook", subject, json.dumps(body, indent=2, sort_keys=True))
            self.set_status(204)

    return web.Application(
        [
            (prefix, Page),
            (prefix + "inbox.js", Script),
            (prefix + "api/messages", Messages),
            (prefix + r"hook/([^/]+)/([0-9a-f]+)", Hook),
            (prefix + "oauth_callback", HubOAuthCallbackHandler),
        ],
        cookie_secret=os.urandom(32),
    )


async def serve(workdir: Path, smtp_port: int) -> None:
    """Run the inbox until stopped: the web application where the hub says (its
    ``JUPYTERHUB_SERVICE_URL``), the SMTP server on 127.0.0.1:``smtp_port``."""
    from urllib.parse import urlsplit

    inbox = Inbox(workdir / STORE_FILE)
    secret = (workdir / SECRET_FILE).read_bytes()
    password = (workdir / PASSWORD_FILE).read_text().strip()
    url = urlsplit(os.environ["JUPYTERHUB_SERVICE_URL"])
    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", f"/services/{SERVICE_NAME}/")
    public = f"http://{url.hostname}:{url.port}"
    app = make_app(inbox, secret, prefix, public)
    app.listen(url.port or 80, address=url.hostname or "127.0.0.1")
    loop = asyncio.get_running_loop()
    await loop.create_server(lambda: smtp_protocol(inbox, password, loop), "127.0.0.1", smtp_port)
    # The hub stops its services with SIGINT, then SIGTERM 30 s later. Python's own
    # KeyboardInterrupt is not there when the inbox was started with SIGINT ignored (the
    # demo run as a background job of a script, which ignores it for all it starts):
    # handlers of its own make either signal stop it at once.
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(
        f"demo inbox: mail on 127.0.0.1:{smtp_port}, pages and webhooks at {public}{prefix}",
        flush=True,
    )
    await stop.wait()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m nbjobs.programs.demo_inbox", description=__doc__
    )
    parser.add_argument("--workdir", required=True, help="the demo's folder")
    parser.add_argument("--smtp-port", type=int, required=True, help="the SMTP port")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):  # one before its handlers are set
        asyncio.run(serve(Path(args.workdir), args.smtp_port))
    return 0


if __name__ == "__main__":
    sys.exit(main())

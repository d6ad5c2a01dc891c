"""``nbjobs notify``: where and when you are told about your jobs (email, webhook)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from .cli import Client, UsageError, _local_time, _Parser, _parser, _run

EVENTS = ("succeeded", "failed", "timed_out", "cancelled", "queued_long", "run_refused")


def notify_parser() -> _Parser:
    parser = _parser(
        "notify",
        "Be told when jobs end (or wait long, or a scheduled run is refused), by email and "
        "webhook. Without options: what you have set, and the latest messages.",
    )
    parser.add_argument("--email", help="send mail to this address ('' to stop)")
    parser.add_argument("--webhook", help="POST JSON to this URL ('' to stop)")
    parser.add_argument(
        "--format",
        choices=["json", "slack", "teams"],
        help="the webhook's body: nbjobs' JSON (the default), a Slack or a Microsoft Teams message",
    )
    parser.add_argument(
        "--on",
        help=f"comma-separated events (default failed,timed_out,run_refused): {','.join(EVENTS)}",
    )
    parser.add_argument("--queue-minutes", type=int, help="queued_long: after this many minutes")
    parser.add_argument(
        "--confirm",
        metavar="CODE",
        help="the code nbjobs mailed to your address: mail goes there once it is entered",
    )
    parser.add_argument(
        "--reset",
        action="store_true",
        help="remove the setting (with --job or --definition: that one then follows yours; "
        "without: no messages but JupyterLab's)",
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--job", help="for this job only")
    which.add_argument("--definition", help="for this job definition's runs only")
    return parser


def main(argv: Sequence[str]) -> int:
    parser = notify_parser()

    def action(client: Client, args: argparse.Namespace) -> int:
        if args.reset:
            if args.email is not None or args.webhook is not None or args.on is not None:
                raise UsageError("--reset removes a setting: give it no --email, --webhook or --on")
            client.call(
                "DELETE", "notifications/settings", job=args.job, definition=args.definition
            )
            scope = f"job {args.job}" if args.job else f"definition {args.definition}"
            print(
                f"{scope} now follows your own setting"
                if args.job or args.definition
                else "removed: no messages but JupyterLab's"
            )
            return 0
        if args.confirm is not None:
            address = client.call("POST", "notifications/confirm", {"code": args.confirm})
            print(
                json.dumps(address)
                if args.json
                else f"{address['address']} is confirmed: mail about your jobs goes there"
            )
            if args.email is None and args.webhook is None and args.on is None:
                return 0
        if args.email is None and args.webhook is None and args.on is None:
            return _show(client, args)
        saved = client.call("PUT", "notifications/settings", _changed(client, args))
        print(json.dumps(saved) if args.json else _setting(saved))
        return 0

    return _run(argv, parser, action)


#: what a setting holds besides its scope (job_id, definition_id)
FIELDS = ("email", "webhook", "webhook_format", "on", "queue_minutes")


def _changed(client: Client, args: argparse.Namespace) -> dict[str, Any]:
    """The setting for the scope asked for, as it is now with what the command line
    changes: ``--webhook URL`` alone keeps the address mail goes to (the service replaces
    a setting as a whole)."""
    scope = {"job_id": args.job or None, "definition_id": args.definition or None}
    current: dict[str, Any] = next(
        (
            s
            for s in client.call("GET", "notifications/settings")["settings"]
            if (s.get("job_id"), s.get("definition_id"))
            == (scope["job_id"], scope["definition_id"])
        ),
        {},
    )
    body: dict[str, Any] = {k: current[k] for k in FIELDS if current.get(k) is not None}
    if args.email is not None:
        body["email"] = args.email or None  # '' stops mail
    if args.webhook is not None:
        body["webhook"] = args.webhook or None
    if args.format:
        body["webhook_format"] = args.format
    if args.on:
        body["on"] = [e.strip() for e in args.on.split(",") if e.strip()]
    if args.queue_minutes:
        body["queue_minutes"] = args.queue_minutes
    return {**body, **{k: v for k, v in scope.items() if v}}


def _show(client: Client, args: argparse.Namespace) -> int:
    settings = client.call("GET", "notifications/settings")["settings"]
    sent = client.call("GET", "notifications", limit=10)["notifications"]
    if args.json:
        print(json.dumps({"settings": settings, "notifications": sent}))
        return 0
    if not settings:
        print("nothing set: `nbjobs notify --email you@example.org` tells you when jobs fail")
    for setting in settings:
        print(_setting(setting))
    for note in sent:
        last = note["attempts"][-1] if note["attempts"] else None
        how = note["state"] + (f" ({last['error']})" if last and last.get("error") else "")
        print(f"{_local_time(note['created_at'])}  {note['channel']:<7}  {how}: {note['subject']}")
    return 0


def _setting(s: dict[str, Any]) -> str:
    scope = (
        f"job {s['job_id']}"
        if s.get("job_id")
        else f"definition {s['definition_id']}"
        if s.get("definition_id")
        else "all your jobs"
    )
    where = [x for x in (s.get("email"), s.get("webhook")) if x] or ["nowhere"]
    extra = f" (after {s['queue_minutes']} min)" if s.get("queue_minutes") else ""
    line = f"{scope}: {', '.join(s['on'])}{extra} -> {', '.join(where)}"
    if s.get("email") and s.get("email_confirmed") is False:
        line += (
            f"\n  {s['email']} is not confirmed yet: nbjobs mailed a code there; enter it with "
            "`nbjobs notify --confirm CODE`"
        )
    return line

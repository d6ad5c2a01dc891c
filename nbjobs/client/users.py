"""``nbjobs users``: what becomes of a deleted user's things (``users.on_delete``), the
users retired so far, and deleting one (admins). The dashboard's Users view, for scripts
and terminals."""

from __future__ import annotations

import argparse
import json
import urllib.parse
from collections.abc import Sequence
from typing import Any

from .cli import Client, _Parser, _parser, _run


def users_parser() -> _Parser:
    parser = _parser(
        "users",
        "Admins: the users nbjobs retired (deleted in the hub, made again under the same "
        "name, or deleted here) and what became of their jobs, definitions, settings, "
        "folder and OS account. With --delete NAME: delete that user (in a hub, the hub "
        "user too); their things are archived or removed as users.on_delete says.",
    )
    parser.add_argument("--delete", metavar="NAME", help="delete the user NAME")
    return parser


def main(argv: Sequence[str]) -> int:
    parser = users_parser()

    def action(client: Client, args: argparse.Namespace) -> int:
        if args.delete is not None:
            path = "dashboard/users/" + urllib.parse.quote(args.delete, safe="")
            done = client.call("DELETE", path)
            print(json.dumps(done) if args.json else f"deleted {done['name']}: {outcome(done)}")
            return 0
        view = client.call("GET", "dashboard/users")
        print(json.dumps(view) if args.json else users_text(view))
        return 0

    return _run(argv, parser, action)


def outcome(user: dict[str, Any]) -> str:
    """What became of one retired user's things, in words (as the dashboard says it)."""
    counts = (
        f"{user['jobs']} job(s)"
        + (f" ({user['cancelled']} cancelled)" if user["cancelled"] else "")
        + f", {user['definitions']} definition(s), {user['settings']} notification setting(s)"
    )
    if user["action"] == "remove":
        text = f"{counts} removed" + ("; folder removed" if user.get("folder") is None else "")
    else:
        text = f"{counts} archived as {user['archived_as']}"
        if user.get("folder"):
            text += f"; folder moved to {user['folder']}"
    if user.get("account"):
        text += f"; OS account {user['account']} removed"
    if user.get("problems"):
        text += f"; left to do: {user['problems']}"
    return text


def users_text(view: dict[str, Any]) -> str:
    """``GET api/dashboard/users`` for a terminal: the setting, then one line per user."""
    lines = [f"users.on_delete: {view['on_delete']}"]
    if not view["deleted"]:
        lines.append("no user has been deleted")
    for user in view["deleted"]:
        lines.append(f"{user['noticed_at']}  {user['name']}: {user['why']}; {outcome(user)}")
    return "\n".join(lines)

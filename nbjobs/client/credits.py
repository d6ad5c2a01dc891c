"""``nbjobs credits``: the credit accounts you may see, one account's statement (as a
table or CSV), and grants (admins; teachers to their classes and students)."""

from __future__ import annotations

import argparse
import json
import sys
import urllib.parse
from collections.abc import Sequence
from typing import Any

from .cli import Client, _Parser, _parser, _run


def credits_parser() -> _Parser:
    parser = _parser(
        "credits",
        "Credit accounts that pay for jobs on priced flavors: yours and those that pay for "
        "you (a teacher's: their classes' and students'; an admin's: every one). With an "
        "ACCOUNT: its statement, every grant and charge; with --grant: credits for it.",
    )
    parser.add_argument("account", nargs="?", help="user:NAME, class:NAME or group:NAME")
    parser.add_argument("--csv", action="store_true", help="the statement as CSV")
    parser.add_argument(
        "--grant",
        type=float,
        metavar="AMOUNT",
        help="grant the account AMOUNT credits (admins: a negative AMOUNT takes some back)",
    )
    parser.add_argument("--note", default="", help="why, shown on the statement (with --grant)")
    return parser


def main(argv: Sequence[str]) -> int:
    parser = credits_parser()

    def action(client: Client, args: argparse.Namespace) -> int:
        if args.account is None:
            if args.grant is not None or args.csv:
                parser.error("--grant and --csv need an ACCOUNT")
            body = client.call("GET", "credits")
            print(json.dumps(body) if args.json else accounts_text(body))
            return 0
        path = "credits/" + urllib.parse.quote(args.account, safe=":")
        if args.grant is not None:
            body = client.call("POST", path + "/grants", {"amount": args.grant, "note": args.note})
            if args.json:
                print(json.dumps(body))
            else:
                print(f"granted {args.grant:g} credits to {body['account']}")
                print(accounts_text([body]))
            return 0
        if args.csv:
            for chunk in client.stream(path, format="csv"):
                sys.stdout.write(chunk.decode())
            return 0
        body = client.call("GET", path)
        print(json.dumps(body) if args.json else statement_text(body))
        return 0

    return _run(argv, parser, action)


def _table(rows: list[list[str]], right: set[int]) -> list[str]:
    """Rows in columns, those in ``right`` (numbers) aligned right."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            cell.rjust(width) if i in right else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]


def accounts_text(accounts: list[dict[str, Any]]) -> str:
    """``GET api/credits`` as a table; ``*`` marks the account that pays for your jobs."""
    if not accounts:
        return "no credit accounts: jobs on priced flavors need credits from your teacher or admin"
    rows = [["ACCOUNT", "BALANCE", "HELD", "AVAILABLE", "STANDING", "GRANTED", "CHARGED"]]
    for a in accounts:
        rows.append(
            [
                a["account"] + (" *" if a.get("pays_for_you") else ""),
                *(f"{a[k]:.2f}" for k in ("balance", "held", "available")),
                *(f"{a[k]:.2f}" for k in ("standing", "granted", "charged")),
            ]
        )
    lines = _table(rows, right={1, 2, 3, 4, 5, 6})
    if any(a.get("pays_for_you") for a in accounts):
        lines += ["", "* pays for your jobs"]
    return "\n".join(lines)


def statement_text(body: dict[str, Any]) -> str:
    """``GET api/credits/{account}`` as the account's line, then its rows."""
    account = body["account"]
    lines = [accounts_text([account]), ""]
    entries = body["entries"]
    if not entries:
        return "\n".join([*lines, "no grants or charges yet"])
    rows = [["WHEN (UTC)", "KIND", "AMOUNT", "BALANCE", "JOB", "BY", "NOTE"]]
    for e in entries:
        rows.append(
            [
                e["at"][:19].replace("T", " "),
                e["kind"],
                f"{e['amount']:+.2f}",
                f"{e['balance']:.2f}",
                e.get("job_id") or "-",
                e["by"],
                e.get("note") or "",
            ]
        )
    return "\n".join([*lines, *_table(rows, right={2, 3})])

"""``nbjobs class create / add / remove / list / delete``: teachers provision classes.

A class is a JupyterHub group of students with the flavors they may use and
the GPU-hours each may spend per period. The teacher runs these commands with
their own JupyterHub token (``$JUPYTERHUB_API_TOKEN`` in a JupyterLab terminal);
the job service checks that the token holds ``custom:nbjobs:teach`` and that
the teacher owns the class, then changes the group in the hub (see
:mod:`nbjobs.job_service.classes` for why the service, not the token, does it).

A roster is a CSV file, one student a line. A header row naming the column
(``username``, ``user``, ``login`` or ``name``) is optional; without one the
first column is the user name. Blank lines and lines starting with ``#`` are
skipped. A bad roster changes nothing and every problem is reported with its
line number.

Exit codes, the same as the rest of ``nbjobs``: 0 done; 2 a command line that
cannot be used (nothing was sent); 5 refused, by the job service or by the
roster check (the message says why); 6 the job service could not be reached.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

from nbjobs.client.cli import Client, ClientError, UsageError, _client
from nbjobs.units import PERIOD_WORDS

HEADER_NAMES = {"username", "user", "login", "name", "student"}


class RosterError(ClientError):
    """A roster file that cannot be read; the text names the line."""


def read_roster(path: str) -> list[tuple[int, str]]:
    """``(line number, user name)`` for every student in a roster CSV file."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise RosterError(f"cannot read roster {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise RosterError(f"roster {path} is not UTF-8 text; save it as CSV (UTF-8)") from None
    return parse_roster(text, path)


def parse_roster(text: str, source: str = "roster") -> list[tuple[int, str]]:
    """The students of a roster's text, each with its line number."""
    rows: list[tuple[int, list[str]]] = []
    # strict: a quote that never closes is an error, not the rest of the file as one name
    reader = csv.reader(io.StringIO(text), strict=True)
    start = 1
    try:
        for row in reader:
            line = reader.line_num
            if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
                start = line + 1
                continue
            rows.append((line, [cell.strip() for cell in row]))
            start = line + 1
    except csv.Error as exc:
        raise RosterError(
            f"{source}, line {start}: not valid CSV ({exc}); check the quotes on that line, "
            "or save the roster as CSV (one user name per line)"
        ) from None
    column = 0
    if rows and any(cell.lower() in HEADER_NAMES for cell in rows[0][1]):
        header = [cell.lower() for cell in rows[0][1]]
        column = next(i for i, cell in enumerate(header) if cell in HEADER_NAMES)
        rows = rows[1:]
    students = []
    for line, row in rows:
        name = row[column] if column < len(row) else ""
        if not name:
            raise RosterError(f"{source}, line {line}: no user name in column {column + 1}")
        students.append((line, name))
    if not students:
        raise RosterError(f"{source} names no students; put one user name per line")
    return students


def _problems(exc: ClientError, lines: list[int], source: str) -> str:
    """The service's roster problems, each on its own line with the roster's line number."""
    problems = exc.body.get("problems") or []
    if not problems:
        return str(exc)
    out = [f"the roster has {len(problems)} problem(s); nothing was changed:"]
    for p in problems:
        index = p.get("index", 0)
        line = lines[index] if 0 <= index < len(lines) else 0
        where = f"{source}, line {line}" if line else "command line"
        out.append(f"  {where}: {p.get('student')!r}: {p.get('reason')}")
    return "\n".join(out)


def _students(args: argparse.Namespace) -> tuple[list[str], list[int], str]:
    """Students from --roster and/or the command line, with where each came from."""
    entries: list[tuple[int, str]] = []
    source = "command line"
    if getattr(args, "roster", None):
        entries = read_roster(args.roster)
        source = args.roster
    entries += [(0, name) for name in getattr(args, "students", None) or []]
    return [name for _, name in entries], [line for line, _ in entries], source


def _budget(cls: dict[str, Any]) -> str:
    """A class's GPU-hours as every view says them: ``5 per student in the last 7 days``."""
    if cls.get("gpu_hours") is None:
        return "the students' usual quota"
    words = PERIOD_WORDS.get(cls["period"], f"the last {cls['period']}")
    return f"{cls['gpu_hours']:g} per student in {words}"


def _show(cls: dict[str, Any]) -> str:
    rows = [
        ("class", cls["name"]),
        ("teachers", ", ".join(cls["teachers"]) or "-"),
        ("flavors", ", ".join(cls["flavors"]) or "(the students' usual flavors)"),
        ("GPU-hours", _budget(cls)),
        ("queue", cls.get("queue") or "(its flavors' queues)"),
        ("students", f"{len(cls['students'])}: " + ", ".join(cls["students"])),
    ]
    if cls.get("source") == "nbjobs.yaml":
        rows.append(("defined in", "nbjobs.yaml (an admin changes it there)"))
    return "\n".join(f"{k + ':':<12}{v}" for k, v in rows)


def show_invitations(invitations: list[dict[str, Any]], service: str) -> str:
    """The invitations a change made, one a line, each with its whole link: hand each to
    its user (only its holder chooses that user's password)."""
    if not invitations:
        return ""
    lines = [
        f"{len(invitations)} new account(s): give each person their own link (it works "
        "once; only its holder chooses the password):"
    ]
    for invitation in invitations:
        link = urljoin(service, invitation["url"])
        mailed = f", mailed to {invitation['mailed_to']}" if invitation.get("mailed_to") else ""
        lines.append(
            f"  {invitation['user']}: {link} (code {invitation['code']}, until "
            f"{invitation['expires_at'][:16].replace('T', ' ')} UTC{mailed})"
        )
    return "\n".join(lines)


# -- the commands ---------------------------------------------------------------


def create(client: Client, args: argparse.Namespace) -> dict[str, Any]:
    students, lines, source = _students(args)
    body = {
        "name": args.name,
        "students": students,
        "flavors": [f for f in (args.flavors or "").split(",") if f],
        "gpu_hours": args.gpu_hours,
        "period": args.period,
        "teachers": args.teacher or [],
    }
    try:
        result: dict[str, Any] = client.call("POST", "classes", body)
    except ClientError as exc:
        raise type(exc)(_problems(exc, lines, source), exc.body, exc.status) from None
    return result


def change_roster(client: Client, args: argparse.Namespace) -> dict[str, Any]:
    """``add`` (POST) or ``remove`` (DELETE) the named students."""
    students, lines, source = _students(args)
    method = "POST" if args.command == "add" else "DELETE"
    try:
        result: dict[str, Any] = client.call(
            method, f"classes/{args.name}/students", {"students": students}
        )
    except ClientError as exc:
        raise type(exc)(_problems(exc, lines, source), exc.body, exc.status) from None
    return result


def class_parser() -> argparse.ArgumentParser:
    """The argument parser of ``nbjobs class``."""
    parser = argparse.ArgumentParser(
        prog="nbjobs class",
        description="Provision classes: a roster, the flavors its students may use, and "
        "how many GPU-hours each may spend.",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", help="the job service (default: $NBJOBS_URL)")
    common.add_argument("--token", help="your JupyterHub API token (default: $NBJOBS_TOKEN)")
    common.add_argument("--json", action="store_true", help="print JSON, for scripts")
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", help="what to do"
    )

    p = commands.add_parser("create", parents=[common], help="create a class from a roster")
    p.add_argument("name", help="the class (a JupyterHub group), like ml101")
    p.add_argument("--roster", help="CSV file, one student a line")
    p.add_argument("students", nargs="*", help="students (besides the roster's)")
    p.add_argument("--flavors", help="comma-separated flavors the students may use")
    p.add_argument("--gpu-hours", type=float, help="GPU-hours per student per period")
    p.add_argument(
        "--period",
        choices=["day", "week", "month"],
        default="week",
        help="the window --gpu-hours counts in: the last 1, 7 or 30 days (default week)",
    )
    p.add_argument("--teacher", action="append", help="a co-teacher (repeat for more)")

    for name, verb in (("add", "add students to"), ("remove", "remove students from")):
        p = commands.add_parser(name, parents=[common], help=f"{verb} a class")
        p.add_argument("name", help="the class")
        p.add_argument("students", nargs="*", help="user names")
        p.add_argument("--roster", help="CSV file, one student a line")

    p = commands.add_parser(
        "list", parents=[common], help="your classes; with a NAME, that class's roster"
    )
    p.add_argument("name", nargs="?", help="the class whose roster to show")

    p = commands.add_parser(
        "delete", parents=[common], help="delete a class (students and their jobs stay)"
    )
    p.add_argument("name", help="the class")
    return parser


def main(argv: Sequence[str]) -> int:
    """``nbjobs class COMMAND ...``."""
    parser = class_parser()
    # Names after an option (``create ml101 --teacher cora gus``) are students too:
    # argparse alone takes the students only before the first option.
    args, extra = parser.parse_known_args(list(argv))
    if extra and (
        args.command not in ("create", "add", "remove") or any(x.startswith("-") for x in extra)
    ):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if extra:
        args.students = [*args.students, *extra]
    try:
        client = _client(args)
        if args.command in ("create", "add", "remove"):
            if not args.students and not args.roster and args.command != "create":
                raise UsageError("name students, or give --roster FILE")
            result = (create if args.command == "create" else change_roster)(client, args)
            if args.json:
                print(json.dumps(result))
            else:
                done = {"create": "created", "add": "updated", "remove": "updated"}[args.command]
                print(f"{done} class {result['name']}\n{_show(result)}")
                invited = show_invitations(result.get("invitations") or [], client.base)
                if invited:
                    print(invited)
        elif args.command == "list":
            if args.name:
                cls = client.call("GET", f"classes/{args.name}")
                print(json.dumps(cls) if args.json else _show(cls))
            else:
                classes = client.call("GET", "classes")
                if args.json:
                    print(json.dumps(classes))
                elif not classes:
                    print("no classes; `nbjobs class create NAME --roster FILE` makes one")
                else:
                    for cls in classes:
                        count = len(cls["students"])
                        print(
                            f"{cls['name']:<16}{count:>4} "
                            f"{'student ' if count == 1 else 'students'}  "
                            f"flavors: {', '.join(cls['flavors']) or '-':<20}  "
                            f"GPU-hours: {_budget(cls)}"
                        )
        elif args.command == "delete":
            client.call("DELETE", f"classes/{args.name}")
            print(
                f"deleted class {args.name}; its students' accounts, files and jobs are kept"
                if not args.json
                else json.dumps({"deleted": args.name})
            )
    except ClientError as exc:
        print(f"nbjobs class {args.command}: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


def invite_parser() -> argparse.ArgumentParser:
    """The argument parser of ``nbjobs invite``."""
    parser = argparse.ArgumentParser(
        prog="nbjobs invite",
        description="Make a new one-time invitation for a hub user who has not chosen a "
        "password yet (admins: anyone; teachers: their students). Its holder opens the link "
        "and chooses the password; an earlier invitation of theirs stops working.",
    )
    parser.add_argument("user", help="the hub user's name")
    parser.add_argument("--url", help="the job service (default: $NBJOBS_URL)")
    parser.add_argument("--token", help="your JupyterHub API token (default: $NBJOBS_TOKEN)")
    parser.add_argument("--json", action="store_true", help="print JSON, for scripts")
    return parser


def invite(argv: Sequence[str]) -> int:
    """``nbjobs invite NAME``."""
    args = invite_parser().parse_args(list(argv))
    try:
        client = _client(args)
        made = client.call("POST", "invitations", {"user": args.user})
    except ClientError as exc:
        print(f"nbjobs invite: {exc}", file=sys.stderr)
        return exc.exit_code
    if args.json:
        print(json.dumps(made))
    else:
        print(show_invitations([made], client.base).split("\n", 1)[1].strip())
    return 0

"""``nbjobs schedule``: job definitions from a terminal (create, list, pause, resume,
delete, run now, and a definition's runs)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from .cli import (
    Client,
    UsageError,
    _clip,
    _local_time,
    _Parser,
    _parser,
    _run,
    add_submission_options,
    aligned,
    submission_body,
)

ACTIONS = {
    "create": "save a notebook as a definition that runs on a schedule",
    "list": "your definitions (admins: everyone's; teachers: also their students')",
    "pause": "pause a definition's schedule",
    "resume": "resume it from its next tick",
    "delete": "delete it (its runs, jobs and outputs stay)",
    "run": "run it now",
    "runs": "its runs, newest first",
}
#: the simple schedules --every offers (the service's cron presets)
EVERY = {
    "hour": "{minute} * * * *",
    "day": "{minute} {hour} * * *",
    "weekday": "{minute} {hour} * * 1-5",
    "monday": "{minute} {hour} * * 1",
}


def main(argv: Sequence[str]) -> int:
    """``nbjobs schedule ACTION ...``"""
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in ACTIONS:
        width = max(len(a) for a in ACTIONS)
        lines = ["usage: nbjobs schedule ACTION [ARGS...]", "", "actions:"]
        lines += [f"  {name.ljust(width)}  {text}" for name, text in ACTIONS.items()]
        print("\n".join(lines), file=sys.stdout if argv else sys.stderr)
        if argv and argv[0] not in ("-h", "--help"):
            print(f"nbjobs schedule: unknown action {argv[0]!r}", file=sys.stderr)
            return 2
        return 0 if argv else 2
    action, rest = argv[0], list(argv[1:])
    if action in OWN:
        return OWN[action][1](rest)
    return _one(action, rest)


def parsers() -> dict[str, _Parser]:
    """Each action's argument parser, by its name (for the CLI reference)."""
    return {verb: OWN[verb][0]() if verb in OWN else action_parser(verb) for verb in ACTIONS}


def _cron(args: argparse.Namespace) -> str | None:
    if args.cron and args.every:
        raise UsageError("give --cron or --every, not both")
    if args.every:
        hour, minute = 0, 0
        if args.at:
            try:
                hour, minute = (int(part) for part in args.at.split(":"))
            except ValueError:
                raise UsageError(f"--at {args.at!r} is not a time as HH:MM") from None
        return EVERY[args.every].format(minute=minute, hour=hour)
    return str(args.cron) if args.cron else None


def create_parser() -> _Parser:
    parser = _parser("schedule create", ACTIONS["create"])
    parser.add_argument(
        "notebook", nargs="?", help="the notebook or script; with --command, its folder"
    )
    parser.add_argument("--flavor", "-f", required=True, help="what to run on (nbjobs flavors)")
    parser.add_argument("--cron", help="five cron fields, e.g. '0 2 * * *' (02:00 every day)")
    parser.add_argument("--every", choices=list(EVERY), help="a simple schedule instead of --cron")
    parser.add_argument("--at", help="with --every: the time, HH:MM (default 00:00)")
    parser.add_argument("--timezone", help="an IANA time zone (default: the service's)")
    add_submission_options(parser)
    parser.add_argument(
        "--catch-up",
        choices=["once", "skip"],
        default="once",
        help="ticks missed while the service was away: run once when back, or skip",
    )
    parser.add_argument("--paused", action="store_true", help="save it paused")
    parser.add_argument(
        "--start", help="no run before this time (ISO 8601, e.g. 2026-12-01T08:00Z)"
    )
    parser.add_argument("--end", help="no run after this time (ISO 8601)")
    return parser


def _create(argv: list[str]) -> int:
    parser = create_parser()

    def action(client: Client, args: argparse.Namespace) -> int:
        body = submission_body(args)
        body["paused"] = args.paused
        cron = _cron(args)
        if cron:
            body["schedule"] = {"cron": cron, "catch_up": args.catch_up}
            if args.timezone:
                body["schedule"]["timezone"] = args.timezone
            for key in ("start", "end"):
                if getattr(args, key):
                    body["schedule"][f"{key}_at"] = getattr(args, key)
        made = client.call("POST", "definitions", body)
        print(json.dumps(made) if args.json else _describe(made))
        return 0

    return _run(argv, parser, action)


def list_parser() -> _Parser:
    parser = _parser("schedule list", ACTIONS["list"])
    parser.add_argument("--user", help="one user's definitions (admins, their teachers)")
    return parser


def _list(argv: list[str]) -> int:
    parser = list_parser()

    def action(client: Client, args: argparse.Namespace) -> int:
        answer = client.call("GET", "definitions", user=args.user)
        if args.json:
            print(json.dumps(answer))
            return 0
        definitions = answer["definitions"]
        if not definitions:
            print("no job definitions; `nbjobs schedule create NOTEBOOK --flavor F --cron ...`")
            return 0
        rows: list[tuple[str, ...]] = [("ID", "NAME", "USER", "SCHEDULE", "NEXT RUN", "LAST RUN")]
        for d in definitions:
            schedule = d["schedule"]
            when = "on demand" if schedule is None else f"{schedule['cron']} {schedule['timezone']}"
            if d["paused"]:
                when += " (paused)"
            last = d.get("last_run") or {}
            rows.append(
                (
                    d["id"],
                    _clip(d["name"], 30),
                    d["user"],
                    when,
                    _local_time(d["next_run_at"]) if d.get("next_run_at") else "-",
                    _last(last) if last else "-",
                )
            )
        print(aligned(rows))
        return 0

    return _run(argv, parser, action)


def action_parser(verb: str) -> _Parser:
    parser = _parser(f"schedule {verb}", ACTIONS[verb])
    parser.add_argument("definition", help="the definition's id (nbjobs schedule list)")
    return parser


def _one(verb: str, argv: list[str]) -> int:
    parser = action_parser(verb)

    def action(client: Client, args: argparse.Namespace) -> int:
        path = f"definitions/{args.definition}"
        if verb == "delete":
            client.call("DELETE", path)
            print(json.dumps({"deleted": args.definition}) if args.json else "deleted")
            return 0
        answer = client.call("POST", f"{path}/{verb}")
        if args.json:
            print(json.dumps(answer))
        elif verb == "run":
            print(_last(answer))
        else:
            print(_describe(answer))
        return 0 if verb != "run" or answer["state"] == "submitted" else 5

    return _run(argv, parser, action)


def runs_parser() -> _Parser:
    parser = _parser("schedule runs", ACTIONS["runs"])
    parser.add_argument("definition", help="the definition's id (nbjobs schedule list)")
    parser.add_argument("--limit", type=int, default=20, help="the newest runs to show")
    return parser


def _runs(argv: list[str]) -> int:
    parser = runs_parser()

    def action(client: Client, args: argparse.Namespace) -> int:
        answer = client.call("GET", f"definitions/{args.definition}/runs", limit=args.limit)
        if args.json:
            print(json.dumps(answer))
            return 0
        rows: list[tuple[str, ...]] = [
            ("WHEN", "KIND", "VERSION", "STATE", "JOB", "TOOK", "CHANGED / WHY")
        ]
        for run in answer["runs"]:
            changed = ", ".join(
                f"{name}: {json.dumps(a)} -> {json.dumps(b)}"
                for name, (a, b) in run.get("parameters_changed", {}).items()
            )
            took = run.get("duration_seconds")
            rows.append(
                (
                    _local_time(run["scheduled_for"]),
                    run["kind"],
                    f"v{run['version']}",
                    run.get("job_state") or run["state"],
                    run.get("job_id") or "-",
                    f"{took:.0f} s" if took is not None else "-",
                    _clip(run.get("reason") or changed, 60),
                )
            )
        print(aligned(rows))
        return 0

    return _run(argv, parser, action)


def _describe(d: dict[str, Any]) -> str:
    schedule = d.get("schedule")
    when = "runs when asked (nbjobs schedule run ID)"
    if schedule:
        when = schedule["description"]
        if d.get("next_run_at"):
            when += f"; next {_local_time(d['next_run_at'])}"
    state = "paused" if d["paused"] else "active"
    return f"{d['id']}  {d['name']}  v{d['version']}  {state}: {when}"


def _last(run: dict[str, Any]) -> str:
    what = run.get("job_state") or run["state"]
    line = f"{_local_time(run['scheduled_for'])} {what}"
    if run.get("job_id"):
        line += f" (job {run['job_id']})"
    if run["state"] in ("refused", "skipped") and run.get("reason"):
        line += f": {run['reason']}"
    return line


#: the actions with options of their own: their parser, and what runs them (the others
#: take a definition's id alone: action_parser, _one)
OWN: dict[str, tuple[Callable[[], _Parser], Callable[[list[str]], int]]] = {
    "create": (create_parser, _create),
    "list": (list_parser, _list),
    "runs": (runs_parser, _runs),
}

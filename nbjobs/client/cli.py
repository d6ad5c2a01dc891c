"""``nbjobs submit / list / status / logs / cancel / rerun / delete``: the job service from a
terminal (its reports, ``nbjobs usage / storage / metrics / flavors``, are in
:mod:`.reports`).

Talks to the job service's REST API with a JupyterHub API token. Where to:
``--url`` or ``$NBJOBS_URL`` (the service's API root, like
``http://hub.example.org/services/nbjobs/``). The token: ``--token`` or
``$NBJOBS_TOKEN``, else ``$JUPYTERHUB_API_TOKEN`` (set in every notebook
server, so the commands work from a JupyterLab terminal as they are).

Exit codes (:data:`EXIT_CODES`, also in every command's ``--help``): the
job's own codes for ``--wait`` match the runner's (0, 1, 3, 4), and what
went wrong before or around the job has codes of its own (2, 5, 6).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any, NoReturn

#: the command line (or $NBJOBS_URL / the token) is unusable; nothing was sent
EXIT_USAGE = 2
#: the job service (or a check it would make, such as the notebook's folder) refused
EXIT_REFUSED = 5
#: the job service could not be reached, or failed on the request (5xx)
EXIT_UNAVAILABLE = 6
#: how ``submit --wait`` and ``rerun --wait`` exit: like the job's runner
EXIT_FOR_STATE = {"succeeded": 0, "failed": 1, "timed_out": 3, "cancelled": 4}
FINAL = set(EXIT_FOR_STATE)

#: every exit code, for ``--help`` and the CLI reference
EXIT_CODES = {
    0: "done (with --wait: the job succeeded)",
    1: "with --wait: the job failed (a cell raised, the kernel died)",
    EXIT_USAGE: "usage: bad options, no --url/$NBJOBS_URL or no token; nothing was sent",
    3: "with --wait: the job timed out (its time limit)",
    4: "with --wait: the job was cancelled",
    EXIT_REFUSED: "refused (4xx: bad token, unknown job or flavor, over quota...); says why",
    EXIT_UNAVAILABLE: "the job service is unreachable or failed (5xx); try again later",
    130: "interrupted (Ctrl-C); a job already submitted goes on",
}


def exit_codes_help() -> str:
    """The exit-code table as ``--help`` shows it."""
    return "exit codes:\n" + "\n".join(f"  {code:>3}  {text}" for code, text in EXIT_CODES.items())


class ClientError(Exception):
    """Something to tell the user, then exit with ``exit_code``.

    ``status``: the service's HTTP status, when it answered; ``body``: its JSON answer.
    """

    exit_code = EXIT_REFUSED

    def __init__(
        self, message: str, body: dict[str, Any] | None = None, status: int | None = None
    ) -> None:
        super().__init__(message)
        self.body = body or {}
        self.status = status


class UsageError(ClientError):
    """The command line or the environment is unusable; nothing was sent."""

    exit_code = EXIT_USAGE


class Refused(ClientError):
    """The job service said no (4xx), with its reason."""

    exit_code = EXIT_REFUSED


class Unavailable(ClientError):
    """The job service could not be reached, did not answer like itself, or failed (5xx)."""

    exit_code = EXIT_UNAVAILABLE


class Client:
    """A tiny client of the jobs API (stdlib only: it runs in minimal images too)."""

    def __init__(self, url: str, token: str, timeout: float = 30) -> None:
        self.base = url.rstrip("/") + "/"
        if not self.base.endswith("api/"):
            self.base += "api/"
        self.token = token
        self.timeout = timeout

    def _open(
        self, method: str, path: str, body: Any = None, query: dict[str, Any] | None = None
    ) -> http.client.HTTPResponse:
        url = self.base + path
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Authorization", f"token {self.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            response: http.client.HTTPResponse = urllib.request.urlopen(
                request, timeout=self.timeout
            )
            return response
        except urllib.error.HTTPError as exc:
            raise self._error(exc.code, exc.reason, exc.read()) from None
        except (OSError, http.client.HTTPException) as exc:
            self._unreachable(exc)

    def _error(self, status: int, reason: str, raw: bytes) -> ClientError:
        """The service's own error answer (JSON with a message), or a sign it was not it."""
        try:
            answer = json.loads(raw or b"{}")
        except ValueError:
            answer = None
        if not isinstance(answer, dict) or not isinstance(answer.get("message"), str):
            # An HTML page from a proxy or the hub: not the job service speaking.
            return Unavailable(
                f"{self.base} answered {status} {reason}, not as the job service does; "
                "check --url / $NBJOBS_URL, or ask your admin whether the service runs",
                status=status,
            )
        kind = Unavailable if status >= 500 else Refused
        return kind(answer["message"], answer, status)

    def _unreachable(self, exc: BaseException) -> NoReturn:
        reason = getattr(exc, "reason", None) or exc
        raise Unavailable(
            f"cannot reach the job service at {self.base} ({reason}); check --url / $NBJOBS_URL"
        ) from None

    def call(self, method: str, path: str, body: Any = None, **query: Any) -> Any:
        """Send one request; the service's JSON answer (None when empty)."""
        with self._open(method, path, body, query) as response:
            try:
                raw = response.read()
            except (OSError, http.client.HTTPException) as exc:
                self._unreachable(exc)
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            raise Unavailable(
                f"{self.base} did not answer as the job service does; check --url / $NBJOBS_URL"
            ) from None

    def stream(self, path: str, **query: Any) -> Iterator[bytes]:
        """A streamed answer (a log), chunk by chunk as the service sends it."""
        with self._open("GET", path, None, query) as response:
            try:
                while chunk := response.read1(65536):
                    yield chunk
            except (OSError, http.client.HTTPException) as exc:
                self._unreachable(exc)


def _client(args: argparse.Namespace) -> Client:
    url = args.url or os.environ.get("NBJOBS_URL")
    token = args.token or os.environ.get("NBJOBS_TOKEN") or os.environ.get("JUPYTERHUB_API_TOKEN")
    if not url:
        raise UsageError("where is the job service? pass --url or set NBJOBS_URL")
    if not token:
        raise UsageError("no token: pass --token or set NBJOBS_TOKEN (a JupyterHub API token)")
    return Client(url, token)


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors as JSON on stderr when the command line has ``--json``."""

    json_errors = False

    def error(self, message: str) -> NoReturn:
        if self.json_errors:
            _print_error({"error": message, "exit_code": EXIT_USAGE})
            sys.exit(EXIT_USAGE)
        super().error(message)


def _parser(prog: str, description: str) -> _Parser:
    parser = _Parser(
        prog=f"nbjobs {prog}",
        description=description,
        epilog=exit_codes_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--url", help="the job service (default: $NBJOBS_URL)")
    parser.add_argument("--token", help="a JupyterHub API token (default: $NBJOBS_TOKEN)")
    parser.add_argument(
        "--json", action="store_true", help='print JSON, for scripts (errors: {"error": ...})'
    )
    return parser


def _print_error(error: dict[str, Any]) -> None:
    print(json.dumps(error), file=sys.stderr)


def _run(argv: Sequence[str], parser: _Parser, action: Any) -> int:
    parser.json_errors = "--json" in argv
    args = parser.parse_args(list(argv))
    try:
        return int(action(_client(args), args))
    except ClientError as exc:
        if args.json:
            error: dict[str, Any] = {"error": str(exc), "exit_code": exc.exit_code}
            if exc.status is not None:
                error["status"] = exc.status
            _print_error(error)
        else:
            print(f"{parser.prog}: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


def _notebook_path(notebook: str) -> str:
    """The path the service expects: relative to the user's folder ($NBJOBS_ROOT or $HOME)."""
    root = os.path.realpath(os.environ.get("NBJOBS_ROOT") or os.path.expanduser("~"))
    full = os.path.realpath(notebook)
    if os.path.commonpath([root, full]) != root:
        raise Refused(f"{notebook} is not inside your folder {root}; jobs run notebooks from it")
    return os.path.relpath(full, root)


def _parameters(pairs: list[list[str]]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for name, value in pairs:
        try:
            params[name] = json.loads(value)
        except ValueError:
            params[name] = value
    return params


def _show(job: dict[str, Any]) -> str:
    line = f"{job['id']}  {job['state']:<9}  {job['flavor']:<10}  {job['path']}"
    progress = job.get("progress") or {}
    if job["state"] == "queued" and job.get("queue_position"):
        line += f"  (#{job['queue_position']} in queue"
        line += f": {job['waiting_reason']})" if job.get("waiting_reason") else ")"
    elif progress.get("cells_total"):
        line += f"  {_cells(job)}"
    return line


def _details(job: dict[str, Any]) -> str:
    rows = [
        ("job", job["id"]),
        ("state", job["state"]),
        (
            {"script": "script", "command": "folder"}.get(job.get("kind") or "", "notebook"),
            job["path"],
        ),
        *([("command", job["command"])] if job.get("command") else []),
        ("output", job["output_path"]),
        *([("html copy", job["html_path"])] if job.get("html_path") else []),
        *([("kernel", job["kernel"])] if job.get("kernel") else []),
        ("flavor", job["flavor"]),
        *(
            # each rank has a log of its own; the plain `nbjobs logs ID` is rank 0's
            [("nodes", f"{job['nodes']} (logs of each rank: nbjobs logs {job['id']} --rank N)")]
            if (job.get("nodes") or 1) > 1
            else []
        ),
        ("submitted", job["submitted_at"]),
        ("started", job.get("started_at") or "-"),
        ("finished", job.get("finished_at") or "-"),
    ]
    if (job.get("progress") or {}).get("cells_total"):
        rows.append(("progress", _cells(job)))
    if job.get("queue_position"):
        rows.append(("queue", f"#{job['queue_position']}"))
    if job.get("waiting_reason"):
        rows.append(("waiting", job["waiting_reason"]))
    if job.get("gpus"):
        # the devices it was given, by number ("GPU 0" is the first, not "no GPU")
        rows.append(("on GPUs" if len(job["gpus"]) > 1 else "on GPU", ", ".join(job["gpus"])))
    if job.get("gpu_hours"):
        # what it counts for, as `nbjobs usage` and budgets count it
        rows.append(("GPU-hours", f"{job['gpu_hours']:.3g}"))
    if job.get("node"):
        rows.append(("node", job["node"]))
    if job.get("message"):
        rows.append(("message", job["message"]))
    if job.get("warning"):
        rows.append(("warning", job["warning"]))
    if job.get("borrowing"):
        rows.append(("borrowing", job["borrowing"]))
    return "\n".join(f"{k + ':':<11}{v}" for k, v in rows)


def _wait(client: Client, job: dict[str, Any], quiet: bool) -> dict[str, Any]:
    """Poll until the job ends, showing a live progress line on a terminal."""
    tty = sys.stderr.isatty() and not quiet
    while job["state"] not in FINAL:
        if tty:
            print("\r\x1b[2K" + _show(job), end="", file=sys.stderr, flush=True)
        time.sleep(1)
        job = client.call("GET", f"jobs/{job['id']}")
    if tty:
        print("\r\x1b[2K", end="", file=sys.stderr)
    return job


# -- the commands ---------------------------------------------------------------


def add_submission_options(parser: argparse.ArgumentParser) -> None:
    """What a submission may say besides the notebook and flavor (``nbjobs submit`` and
    ``nbjobs schedule create`` alike)."""
    parser.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="set a parameter of the notebook's parameters cell (repeatable); VALUE is read "
        "as JSON when it parses (5, true, [1,2]), else as text",
    )
    parser.add_argument("--time-limit", type=float, help="seconds (at most the flavor's)")
    parser.add_argument("--name", help="what the Jobs list calls it (default: the notebook's)")
    parser.add_argument("--kernel", help="run on this kernel instead of the notebook's own")
    parser.add_argument(
        "--outputs",
        choices=["beside", "folder"],
        help="the result next to the notebook, or in the outputs folder next to it "
        "(default: as nbjobs.yaml says)",
    )
    parser.add_argument(
        "--html",
        action=argparse.BooleanOptionalAction,
        help="also write an HTML copy of the result (default: as nbjobs.yaml says)",
    )
    parser.add_argument(
        "--command",
        help="run this shell command instead (its output is its log); NOTEBOOK is then the "
        "folder it runs in (default: this one)",
    )
    parser.add_argument(
        "--nodes",
        type=_positive,
        metavar="N",
        help="the nodes the job must span (a multi-node flavor); a flavor spanning another "
        "number is refused",
    )


def _at_least(lowest: int, what: str, below: str) -> Callable[[str], int]:
    """An argparse type: a whole number of at least ``lowest`` (``what`` it is, for the
    error on a text that is none; ``below``: the error on a number under it)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if value < lowest:
            raise argparse.ArgumentTypeError(below)
        return value

    return parse


#: a count of nodes: 1 or more
_positive = _at_least(1, "a whole number", "it must be 1 or more")
#: a rank of a multi-node job: 0 or more (the service says which the job has)
_rank = _at_least(0, "a rank (0, 1, ...)", "a rank cannot be negative")


def submission_body(args: argparse.Namespace) -> dict[str, Any]:
    """The request body for the options :func:`add_submission_options` added."""
    if args.notebook is None and args.command is None:
        raise UsageError("give a notebook or script to run, or --command")
    body: dict[str, Any] = {
        "path": _notebook_path(args.notebook or "."),
        "flavor": args.flavor,
        "parameters": _parameters(args.parameter),
    }
    if args.time_limit:
        body["time_limit"] = args.time_limit
    for key in ("name", "kernel", "outputs", "html", "command", "nodes"):
        if getattr(args, key) is not None:
            body[key] = getattr(args, key)
    return body


def submit_parser() -> _Parser:
    parser = _parser(
        "submit",
        "Run a notebook, a script (.py, .sh) or a shell command (--command) as a job.",
    )
    parser.add_argument(
        "notebook", nargs="?", help="the notebook or script; with --command, its folder"
    )
    parser.add_argument("--flavor", "-f", required=True, help="what to run on (nbjobs flavors)")
    add_submission_options(parser)
    parser.add_argument("--wait", action="store_true", help="wait for the job; exit like it")
    return parser


def submit(argv: Sequence[str]) -> int:
    parser = submit_parser()

    def action(client: Client, args: argparse.Namespace) -> int:
        body = submission_body(args)
        job = client.call("POST", "jobs", body)
        return _after_submit(client, job, args)

    return _run(argv, parser, action)


def _after_submit(client: Client, job: dict[str, Any], args: argparse.Namespace) -> int:
    if not args.wait:
        # the line starts with the id, as `nbjobs list` shows a job: said once
        print(json.dumps(job) if args.json else f"submitted: {_show(job)}")
        return 0
    if not args.json:
        # At once, so that another terminal can follow or cancel it while we wait.
        print(
            f"submitted {job['id']}; waiting for it (Ctrl-C stops waiting, not the job)",
            file=sys.stderr,
            flush=True,
        )
    job = _wait(client, job, args.json)
    if args.json:
        print(json.dumps(job))
    else:
        print(_details(job))
    return EXIT_FOR_STATE.get(job["state"], 1)


def list_parser() -> _Parser:
    parser = _parser("list", "Your jobs, newest first, one page at a time.")
    parser.add_argument("--state", help="only these states (comma-separated: queued,running)")
    parser.add_argument("--flavor", help="only jobs of this flavor")
    parser.add_argument("--user", help="another user's jobs (admins, the user's teachers)")
    parser.add_argument("--class", dest="class_name", help="a class's jobs (its teachers)")
    parser.add_argument(
        "--search", help="jobs whose name, notebook, flavor or owner contain these words"
    )
    parser.add_argument(
        "--scope",
        choices=["mine", "classes", "all"],
        help="whose jobs: yours, with your classes' students', or everyone's (admins)",
    )
    parser.add_argument("--limit", type=int, default=20, help="jobs per page (default 20)")
    parser.add_argument("--offset", type=int, default=0, help="jobs to skip (the next page)")
    return parser


def list_jobs(argv: Sequence[str]) -> int:
    parser = list_parser()

    def action(client: Client, args: argparse.Namespace) -> int:
        page = client.call(
            "GET",
            "jobs",
            state=args.state,
            flavor=args.flavor,
            user=args.user,
            q=args.search,
            scope=args.scope,
            limit=args.limit,
            offset=args.offset or None,
            **{"class": args.class_name},
        )
        if args.json:
            print(json.dumps(page))
        elif not page["jobs"]:
            print("no jobs" if not page["total"] else f"no jobs past {args.offset}")
        else:
            others = args.user or args.class_name or args.scope in ("classes", "all")
            print(_table(page["jobs"], with_user=bool(others)))
            shown_to = args.offset + len(page["jobs"])
            if page["total"] > shown_to or args.offset:
                more = f"; --offset {shown_to} for more" if page["total"] > shown_to else ""
                print(f"(jobs {args.offset + 1}-{shown_to} of {page['total']}{more})")
        return 0

    return _run(argv, parser, action)


LIST_COLUMNS = ("ID", "NAME", "STATE", "FLAVOR", "PROGRESS", "SUBMITTED")


def _table(jobs: list[dict[str, Any]], with_user: bool) -> str:
    """Jobs as an aligned table under a header row (USER first when others' jobs show)."""
    header = ("USER", *LIST_COLUMNS) if with_user else LIST_COLUMNS
    rows: list[tuple[str, ...]] = [header]
    for job in jobs:
        row: tuple[str, ...] = (job["id"], _clip(job["name"], 40), job["state"], job["flavor"])
        row += (_progress(job), _local_time(job["submitted_at"]))
        rows.append((job["user"], *row) if with_user else row)
    return aligned(rows)


def aligned(rows: list[tuple[str, ...]]) -> str:
    """Rows of text as columns two spaces apart, each as wide as its widest cell."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def _progress(job: dict[str, Any]) -> str:
    progress = job.get("progress") or {}
    if job["state"] == "queued" and job.get("queue_position"):
        return f"#{job['queue_position']} in queue"
    if progress.get("cells_total"):
        return _cells(job)
    return "-"


def _cells(job: dict[str, Any]) -> str:
    """A job's cells as the Jobs panel and the job's log say them: the cell running now
    (``code cell 3 of 5`` while two are done; ``starting the kernel`` before the first),
    else how many ran (``4 of 4 code cells
    done``)."""
    progress = job["progress"]
    done, total = progress["cells_done"], progress["cells_total"]
    if job["state"] == "running" and done == 0 and progress.get("current_cell") is None:
        return "starting the kernel"
    if job["state"] == "running" and done < total:
        return f"code cell {done + 1} of {total}"
    return f"{min(done, total)} of {total} code cells done"


def _local_time(stamp: str) -> str:
    try:
        return datetime.fromisoformat(stamp).astimezone().strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return stamp


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def status_parser() -> _Parser:
    parser = _parser("status", "One job in detail.")
    parser.add_argument("job", help="the job's id (the first column of nbjobs list)")
    return parser


def status(argv: Sequence[str]) -> int:
    parser = status_parser()

    def action(client: Client, args: argparse.Namespace) -> int:
        job = client.call("GET", f"jobs/{args.job}")
        print(json.dumps(job) if args.json else _details(job))
        return 0

    return _run(argv, parser, action)


def logs_parser() -> _Parser:
    parser = _parser("logs", "A job's log: cell output and progress.")
    parser.add_argument("job", help="the job's id (the first column of nbjobs list)")
    parser.add_argument("-f", "--follow", action="store_true", help="stream until the job ends")
    parser.add_argument(
        "--tail",
        type=_byte_count,
        metavar="SIZE",
        help="only the log's last SIZE bytes (like 64K, 1M), then, with -f, what follows",
    )
    parser.add_argument(
        "--rank",
        type=_rank,
        metavar="N",
        help="the log of rank N of a multi-node job (default 0, the job's)",
    )
    return parser


def logs(argv: Sequence[str]) -> int:
    parser = logs_parser()

    def action(client: Client, args: argparse.Namespace) -> int:
        client.timeout = 24 * 3600 if args.follow else client.timeout
        out = sys.stdout.buffer
        query = {"follow": "1" if args.follow else None, "tail": args.tail, "rank": args.rank}
        for chunk in client.stream(f"jobs/{args.job}/logs", **query):
            out.write(chunk)
            out.flush()
        return 0

    return _run(argv, parser, action)


def _byte_count(text: str) -> int:
    """A byte count from the command line: ``4096``, ``64K``, ``1M`` (1024-based)."""
    units = {"K": 1024, "M": 1024**2, "G": 1024**3}
    number = text.strip().upper().removesuffix("B").removesuffix("I")
    factor = units.get(number[-1:], 1)
    try:
        value = int(float(number[:-1] if factor > 1 else number) * factor)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (like 4096, 64K, 1M)") from None
    if value < 0:
        raise argparse.ArgumentTypeError("a size cannot be negative")
    return value


def cancel_parser() -> _Parser:
    parser = _parser("cancel", "Cancel a job (a running one keeps its partial output).")
    parser.add_argument("job", help="the job's id (the first column of nbjobs list)")
    return parser


def cancel(argv: Sequence[str]) -> int:
    parser = cancel_parser()

    def action(client: Client, args: argparse.Namespace) -> int:
        job = client.call("POST", f"jobs/{args.job}/cancel")
        print(json.dumps(job) if args.json else f"{job['id']}: {job['state']}")
        return 0

    return _run(argv, parser, action)


def delete_parser() -> _Parser:
    parser = _parser(
        "delete",
        "Delete ended jobs: gone from the list with their folders in .nbjobs (the input, log "
        "and telemetry); their results beside the notebooks stay, and so do their GPU-hours.",
    )
    parser.add_argument("job", nargs="+", help="the jobs' ids (the first column of nbjobs list)")
    return parser


def delete(argv: Sequence[str]) -> int:
    parser = delete_parser()

    def action(client: Client, args: argparse.Namespace) -> int:
        for job_id in args.job:
            client.call("DELETE", f"jobs/{job_id}")
            print(
                json.dumps({"id": job_id, "deleted": True}) if args.json else f"{job_id}: deleted"
            )
        return 0

    return _run(argv, parser, action)


def rerun_parser() -> _Parser:
    parser = _parser("rerun", "Run a finished job's notebook again (same flavor, parameters).")
    parser.add_argument("job", help="the job's id (the first column of nbjobs list)")
    parser.add_argument("--wait", action="store_true", help="wait for the new job; exit like it")
    parser.add_argument(
        "--as-owner",
        action="store_true",
        help="admins: re-run another user's job on their behalf (the new job is theirs)",
    )
    return parser


def rerun(argv: Sequence[str]) -> int:
    parser = rerun_parser()

    def action(client: Client, args: argparse.Namespace) -> int:
        query = "?as=owner" if args.as_owner else ""
        job = client.call("POST", f"jobs/{args.job}/rerun{query}")
        return _after_submit(client, job, args)

    return _run(argv, parser, action)

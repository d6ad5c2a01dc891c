"""``nbjobs submit / list / status / logs / cancel / rerun``: the job service from a terminal.

Talks to the job service's REST API with a JupyterHub API token. Where to:
``--url`` or ``$NBJOBS_URL`` (the service's API root, like
``http://hub.example.org/services/nbjobs/``). The token: ``--token`` or
``$NBJOBS_TOKEN``, else ``$JUPYTERHUB_API_TOKEN`` (set in every notebook
server, so the commands work from a JupyterLab terminal as they are).

Exit codes: 0 done; 2 refused (the message says why) or the service could not
be reached; ``submit --wait`` and ``rerun --wait`` exit like the job's runner:
0 succeeded, 1 failed, 3 timed out, 4 cancelled.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from typing import Any

REFUSED = 2
EXIT_FOR_STATE = {"succeeded": 0, "failed": 1, "timed_out": 3, "cancelled": 4}
FINAL = set(EXIT_FOR_STATE)


class ClientError(Exception):
    """Something to tell the user, then exit with ``REFUSED``; ``body``: the service's answer."""

    def __init__(self, message: str, body: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.body = body or {}


class Client:
    """A tiny client of the jobs API (stdlib only: it runs in minimal images too)."""

    def __init__(self, url: str, token: str, timeout: float = 30) -> None:
        self.base = url.rstrip("/") + "/"
        if not self.base.endswith("api/"):
            self.base += "api/"
        self.token = token
        self.timeout = timeout

    def _open(self, method: str, path: str, body: Any = None, query: dict[str, Any] | None = None):
        url = self.base + path
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Authorization", f"token {self.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            return urllib.request.urlopen(request, timeout=self.timeout)
        except urllib.error.HTTPError as exc:
            try:
                body = json.loads(exc.read() or b"{}")
            except ValueError:
                body = {}
            body = body if isinstance(body, dict) else {}
            raise ClientError(
                body.get("message") or f"the job service answered {exc.code} {exc.reason}", body
            ) from None
        except urllib.error.URLError as exc:
            raise ClientError(
                f"cannot reach the job service at {self.base} ({exc.reason}); "
                "check --url / $NBJOBS_URL"
            ) from None

    def call(self, method: str, path: str, body: Any = None, **query: Any) -> Any:
        with self._open(method, path, body, query) as response:
            raw = response.read()
        return json.loads(raw) if raw else None

    def stream(self, path: str, **query: Any) -> Iterator[bytes]:
        with self._open("GET", path, None, query) as response:
            while (
                chunk := response.read1(65536)
                if hasattr(response, "read1")
                else response.read(65536)
            ):
                yield chunk


def _client(args: argparse.Namespace) -> Client:
    url = args.url or os.environ.get("NBJOBS_URL")
    token = args.token or os.environ.get("NBJOBS_TOKEN") or os.environ.get("JUPYTERHUB_API_TOKEN")
    if not url:
        raise ClientError("where is the job service? pass --url or set NBJOBS_URL")
    if not token:
        raise ClientError("no token: pass --token or set NBJOBS_TOKEN (a JupyterHub API token)")
    return Client(url, token)


def _parser(prog: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"nbjobs {prog}", description=description)
    parser.add_argument("--url", help="the job service (default: $NBJOBS_URL)")
    parser.add_argument("--token", help="a JupyterHub API token (default: $NBJOBS_TOKEN)")
    parser.add_argument("--json", action="store_true", help="print JSON, for scripts")
    return parser


def _run(argv: Sequence[str], parser: argparse.ArgumentParser, action: Any) -> int:
    args = parser.parse_args(list(argv))
    try:
        return int(action(_client(args), args))
    except ClientError as exc:
        print(f"{parser.prog}: {exc}", file=sys.stderr)
        return REFUSED
    except KeyboardInterrupt:
        return 130


def _notebook_path(notebook: str) -> str:
    """The path the service expects: relative to the user's folder ($NBJOBS_ROOT or $HOME)."""
    root = os.path.realpath(os.environ.get("NBJOBS_ROOT") or os.path.expanduser("~"))
    full = os.path.realpath(notebook)
    if os.path.commonpath([root, full]) != root:
        raise ClientError(
            f"{notebook} is not inside your folder {root}; jobs run notebooks from it"
        )
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
        line += f"  {progress['cells_done']}/{progress['cells_total']} cells"
    return line


def _details(job: dict[str, Any]) -> str:
    rows = [
        ("job", job["id"]),
        ("state", job["state"]),
        ("notebook", job["path"]),
        ("output", job["output_path"]),
        ("flavor", job["flavor"]),
        ("submitted", job["submitted_at"]),
        ("started", job.get("started_at") or "-"),
        ("finished", job.get("finished_at") or "-"),
    ]
    progress = job.get("progress") or {}
    if progress.get("cells_total"):
        rows.append(("progress", f"{progress['cells_done']}/{progress['cells_total']} cells"))
    if job.get("queue_position"):
        rows.append(("queue", f"#{job['queue_position']}"))
    if job.get("waiting_reason"):
        rows.append(("waiting", job["waiting_reason"]))
    if job.get("gpus"):
        rows.append(("gpus", ",".join(job["gpus"])))
    if job.get("node"):
        rows.append(("node", job["node"]))
    if job.get("message"):
        rows.append(("message", job["message"]))
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


def submit(argv: Sequence[str]) -> int:
    parser = _parser("submit", "Run a notebook as a job.")
    parser.add_argument("notebook")
    parser.add_argument("--flavor", "-f", required=True, help="what to run on (nbjobs flavors)")
    parser.add_argument(
        "-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE")
    )
    parser.add_argument("--time-limit", type=float, help="seconds (at most the flavor's)")
    parser.add_argument("--wait", action="store_true", help="wait for the job; exit like it")

    def action(client: Client, args: argparse.Namespace) -> int:
        body: dict[str, Any] = {
            "path": _notebook_path(args.notebook),
            "flavor": args.flavor,
            "parameters": _parameters(args.parameter),
        }
        if args.time_limit:
            body["time_limit"] = args.time_limit
        job = client.call("POST", "jobs", body)
        return _after_submit(client, job, args)

    return _run(argv, parser, action)


def _after_submit(client: Client, job: dict[str, Any], args: argparse.Namespace) -> int:
    if not args.wait:
        print(json.dumps(job) if args.json else f"submitted {job['id']}: {_show(job)}")
        return 0
    job = _wait(client, job, args.json)
    if args.json:
        print(json.dumps(job))
    else:
        print(_details(job))
    return EXIT_FOR_STATE.get(job["state"], 1)


def list_jobs(argv: Sequence[str]) -> int:
    parser = _parser("list", "Your jobs, newest first.")
    parser.add_argument("--state", help="only these states (comma-separated)")
    parser.add_argument("--flavor")
    parser.add_argument("--user", help="another user's jobs (admins, the user's teachers)")
    parser.add_argument("--class", dest="class_name", help="a class's jobs (its teachers)")
    parser.add_argument("--limit", type=int, default=20)

    def action(client: Client, args: argparse.Namespace) -> int:
        page = client.call(
            "GET",
            "jobs",
            state=args.state,
            flavor=args.flavor,
            user=args.user,
            limit=args.limit,
            **{"class": args.class_name},
        )
        if args.json:
            print(json.dumps(page))
        elif not page["jobs"]:
            print("no jobs")
        else:
            others = args.user or args.class_name
            for job in page["jobs"]:
                print(f"{job['user']:<14}{_show(job)}" if others else _show(job))
            if page["total"] > len(page["jobs"]):
                print(f"({len(page['jobs'])} of {page['total']}; --limit for more)")
        return 0

    return _run(argv, parser, action)


def status(argv: Sequence[str]) -> int:
    parser = _parser("status", "One job in detail.")
    parser.add_argument("job")

    def action(client: Client, args: argparse.Namespace) -> int:
        job = client.call("GET", f"jobs/{args.job}")
        print(json.dumps(job) if args.json else _details(job))
        return 0

    return _run(argv, parser, action)


def logs(argv: Sequence[str]) -> int:
    parser = _parser("logs", "A job's log: cell output and progress.")
    parser.add_argument("job")
    parser.add_argument("-f", "--follow", action="store_true", help="stream until the job ends")

    def action(client: Client, args: argparse.Namespace) -> int:
        client.timeout = 24 * 3600 if args.follow else client.timeout
        out = sys.stdout.buffer
        for chunk in client.stream(f"jobs/{args.job}/logs", follow="1" if args.follow else None):
            out.write(chunk)
            out.flush()
        return 0

    return _run(argv, parser, action)


def cancel(argv: Sequence[str]) -> int:
    parser = _parser("cancel", "Cancel a job (a running one keeps its partial output).")
    parser.add_argument("job")

    def action(client: Client, args: argparse.Namespace) -> int:
        job = client.call("POST", f"jobs/{args.job}/cancel")
        print(json.dumps(job) if args.json else f"{job['id']}: {job['state']}")
        return 0

    return _run(argv, parser, action)


def rerun(argv: Sequence[str]) -> int:
    parser = _parser("rerun", "Run a finished job's notebook again (same flavor, parameters).")
    parser.add_argument("job")
    parser.add_argument("--wait", action="store_true", help="wait for the new job; exit like it")

    def action(client: Client, args: argparse.Namespace) -> int:
        job = client.call("POST", f"jobs/{args.job}/rerun")
        return _after_submit(client, job, args)

    return _run(argv, parser, action)

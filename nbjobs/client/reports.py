"""``nbjobs usage / storage / metrics / flavors``: what the job service reports, from a
terminal, as tables a person reads (``--json``: as the service answered). Connection,
token and exit codes as for every command (:mod:`.cli`)."""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from collections.abc import Sequence
from typing import Any

from nbjobs.units import PERIOD_WORDS, figure, format_size, limit_figure

from .cli import Client, _local_time, _Parser, _parser, _run, aligned


def storage_parser() -> _Parser:
    parser = _parser(
        "storage",
        "The space nbjobs keeps for jobs in your folder (.nbjobs: inputs, logs, telemetry), "
        "and its rules; an admin's, every user's.",
    )
    parser.add_argument("--user", help="admins: this user's only")
    return parser


def storage_report(argv: Sequence[str]) -> int:
    parser = storage_parser()

    def action(client: Client, args: argparse.Namespace) -> int:
        body = client.call("GET", "storage", user=args.user)
        print(json.dumps(body) if args.json else storage_text(body))
        return 0

    return _run(argv, parser, action)


def storage_text(body: dict[str, Any]) -> str:
    """``GET api/storage`` as a table, with the rules below it."""
    limit = body.get("max_job_files")
    rows = [["USER", "JOBS", "JOB FILES", "OF LIMIT"]]
    for u in body["users"]:
        share = f"{100 * u['job_files'] / limit:.0f} %" if limit else "-"
        rows.append([u["user"], str(u["jobs"]), format_size(u["job_files"]), share])
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    keep = body.get("retention_seconds")
    if len(body["users"]) == 1:  # one user's: where their results go, and the room left
        [user] = body["users"]
        free = user.get("free_bytes")
        room = f" ({format_size(free)} free there)" if free is not None else ""
        lines.append("")
        lines.append(f"results are written in {user.get('folder', '?')}{room}")
    lines.append("")
    lines.append(
        f"each user may keep {format_size(limit)} of job files"
        if limit
        else "no limit on job files"
    )
    lines.append(
        f"an ended job's input is removed {keep / 86400:g} days after it ended (its log and "
        "output stay until the job is deleted)"
        if keep
        else "ended jobs keep their inputs until they are deleted"
    )
    return "\n".join(lines)


def usage_parser() -> _Parser:
    parser = _parser(
        "usage",
        "Your GPU-hours against your budget (in its period, such as the last 7 days), then "
        "GPU-hours allocated and busy over a range of whole UTC days, by user, group, class, "
        "flavor or node (yours; a teacher's classes; an admin's everyone).",
    )
    parser.add_argument(
        "--by",
        choices=["user", "group", "class", "flavor", "node"],
        default="user",
        help="one line per user, group, class, flavor or node (default: user)",
    )
    parser.add_argument(
        "--since", help="first day, YYYY-MM-DD (default: the budget period's days up to today)"
    )
    parser.add_argument("--until", help="last day, included (default: today)")
    parser.add_argument("--csv", action="store_true", help="one row per key and day, as CSV")
    return parser


def usage_report(argv: Sequence[str]) -> int:
    parser = usage_parser()

    def action(client: Client, args: argparse.Namespace) -> int:
        body = client.call("GET", "usage", by=args.by, since=args.since, until=args.until)
        if args.json:
            print(json.dumps(body))
        elif args.csv:
            sys.stdout.write(usage_csv(body))
        else:
            print(usage_text(body))
        return 0

    return _run(argv, parser, action)


USAGE_COLUMNS = ("JOBS", "GPU-H ALLOCATED", "GPU-H BUSY", "BUSY %", "COST")


def usage_text(body: dict[str, Any]) -> str:
    """``GET api/usage`` for a person: the caller's use against their budget, then the
    breakdown as a table, its range above and the total below."""
    lines = body.get("breakdown") or []
    own = budget_line(body["own"]) if body.get("own") else None
    head = f"{range_words(body['range_since'], body['range_until'])}, by {body['by']}"
    if not lines:
        return "\n".join([*([own, ""] if own else []), head, "no GPU time in this range"])
    rows: list[tuple[str, ...]] = [(body["by"].upper(), *USAGE_COLUMNS)]
    for line in [*lines, body["total"]] if body.get("total") else lines:
        rows.append(
            (
                line["name"],
                str(line["jobs"]),
                f"{line['gpu_hours_allocated']:.2f}",
                f"{line['gpu_hours_busy']:.2f}",
                "-" if line["busy_percent"] is None else f"{line['busy_percent']:.1f}",
                "-" if line["cost"] is None else f"{line['cost']:.2f}",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    text = [
        "  ".join(
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]
    return "\n".join([*([own, ""] if own else []), head, *text])


def range_words(since: str, until: str) -> str:
    """A report's range as every view says it: whole UTC days, both included."""
    return f"{since} to {until} (whole UTC days)"


def budget_line(row: dict[str, Any]) -> str:
    """The caller's use in their budget's period, against it: ``you: 1.2 of 2 GPU-hours
    in the last 7 days, 3 jobs`` (the same words as a refused submit's)."""
    words = PERIOD_WORDS.get(row["period"], f"the last {row['period']}")
    used, limit = row["gpu_hours"], row.get("gpu_hours_limit")
    granted = row.get("gpu_hours_granted") or 0
    if limit is None:
        text = f"you: {figure(used)} GPU-hours in {words} (no budget)"
    else:
        text = f"you: {figure(used, against=limit)} of {limit_figure(limit)} GPU-hours in {words}"
        if granted:
            text += f" ({limit_figure(limit - granted)} + {limit_figure(granted)} granted)"
    jobs = row["jobs"]
    text += f", {jobs} job{'' if jobs == 1 else 's'}"
    counts = ((row["running"], "running"), (row["queued"], "queued"))
    now = [f"{n} {what}" for n, what in counts if n]
    return text + (f" ({', '.join(now)} now)" if now else "")


def usage_csv(body: dict[str, Any]) -> str:
    """One row per key and day (for a spreadsheet's pivot table)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([body["by"], "date", "gpu_hours_allocated", "gpu_hours_busy"])
    for line in body.get("breakdown") or []:
        for day in line["days"]:
            writer.writerow(
                [line["name"], day["date"], day["gpu_hours_allocated"], day["gpu_hours_busy"]]
            )
    return out.getvalue()


def metrics_parser() -> _Parser:
    parser = _parser(
        "metrics", "What a job's GPUs, CPU and memory did: its summary, latest sample, a hint."
    )
    parser.add_argument("job", help="the job's id (the first column of nbjobs list)")
    return parser


def metrics(argv: Sequence[str]) -> int:
    parser = metrics_parser()

    def action(client: Client, args: argparse.Namespace) -> int:
        body = client.call("GET", f"jobs/{args.job}/metrics")
        print(json.dumps(body) if args.json else metrics_text(body))
        return 0

    return _run(argv, parser, action)


def metrics_text(body: dict[str, Any]) -> str:
    """``GET api/jobs/{id}/metrics`` for a person: the summary, the latest sample, the hint."""
    rows = [("job", f"{body['job_id']} ({body['state']})")]
    summary, samples = body.get("summary"), body.get("samples") or []
    interval = body.get("interval_seconds")
    if not summary and not samples:
        why = (
            "telemetry is off here" if not interval else f"sampled every {interval:g} s as it runs"
        )
        rows.append(("telemetry", f"none yet ({why})"))
    if summary:
        rows.append(("samples", f"{summary['samples']}, every {interval or 0:g} s"))
        if summary.get("gpu_utilization_mean_percent") is not None:
            busy = f"{summary['gpu_utilization_mean_percent']:.1f} % on average"
            if summary.get("gpu_utilization_peak_percent") is not None:
                busy += f", peak {summary['gpu_utilization_peak_percent']:.0f} %"
            rows.append(("GPU busy", busy))
            hours = (summary.get("gpu_busy_seconds") or 0) / 3600
            held = (summary.get("gpu_allocated_seconds") or 0) / 3600
            rows.append(("GPU-hours", f"{hours:.2f} busy of {held:.2f} sampled"))
        if summary.get("gpu_memory_peak_bytes") is not None:
            memory = f"peak {_gib(summary['gpu_memory_peak_bytes'])}"
            if summary.get("gpu_memory_total_bytes"):
                memory += f" of {_gib(summary['gpu_memory_total_bytes'])}"
            rows.append(("GPU memory", memory))
        if summary.get("cpu_mean_percent") is not None:
            cpu = f"{summary['cpu_mean_percent']:.0f} % on average"
            if summary.get("cpu_peak_percent") is not None:
                cpu += f", peak {summary['cpu_peak_percent']:.0f} %"
            rows.append(("CPU", cpu + " (100 % = one core)"))
        if summary.get("memory_peak_bytes") is not None:
            rows.append(("memory", f"peak {_gib(summary['memory_peak_bytes'])}"))
    if samples:
        rows.append(("latest", _sample_text(samples[-1])))
    if body.get("hint"):
        rows.append(("hint", body["hint"]))
    return "\n".join(f"{k + ':':<12}{v}" for k, v in rows)


def _sample_text(sample: dict[str, Any]) -> str:
    parts = []
    if sample.get("gpu_utilization_percent") is not None:
        parts.append(f"GPU {sample['gpu_utilization_percent']:.0f} %")
    if sample.get("gpu_memory_used_bytes") is not None:
        memory = f"GPU memory {_gib(sample['gpu_memory_used_bytes'])}"
        if sample.get("gpu_memory_total_bytes"):
            memory += f" of {_gib(sample['gpu_memory_total_bytes'])}"
        parts.append(memory)
    if sample.get("cpu_percent") is not None:
        parts.append(f"CPU {sample['cpu_percent']:.0f} %")
    if sample.get("memory_bytes") is not None:
        parts.append(f"memory {_gib(sample['memory_bytes'])}")
    errors = [g for g in sample.get("gpus") or [] if g.get("error")]
    parts += [f"GPU {g['index']}: {g['error']}" for g in errors]
    return " · ".join(parts or ["nothing measured"]) + f" (at {_local_time(sample['at'])})"


def _gib(size: int) -> str:
    return f"{size / 1024**3:.1f} GiB"


def flavors_parser() -> _Parser:
    return _parser(
        "flavors",
        "The flavors you may use: what each gives, how many GPUs are free and how many "
        "jobs wait for it now.",
    )


def flavors(argv: Sequence[str]) -> int:
    parser = flavors_parser()

    def action(client: Client, args: argparse.Namespace) -> int:
        offered = client.call("GET", "flavors")
        if args.json:
            print(json.dumps(offered))
        elif not offered:
            print("no flavors you may use; ask your admin")
        else:
            print(flavors_text(offered))
        return 0

    return _run(argv, parser, action)


def _span(seconds: float) -> str:
    """A time limit as people say it: 45 s, 30 min, 4 h."""
    if seconds < 60:
        return f"{seconds:.3g} s"
    if seconds < 3600:
        return f"{seconds / 60:.3g} min"
    return f"{seconds / 3600:.3g} h"


def flavors_text(offered: list[dict[str, Any]]) -> str:
    """The flavors as a table, with the reason under one that cannot run here."""
    rows: list[tuple[str, ...]] = [("NAME", "GIVES", "FREE NOW", "QUEUED", "TIME LIMIT")]
    notes = []
    for f in offered:
        gpus = f"{f['fraction']:g} GPU" if f.get("fraction") else f"{f['gpus']} GPU"
        gives = [gpus if f["gpus"] else "no GPU"]
        gives += [f"{f['gpu_type']}"] if f.get("gpu_type") else []
        gives += [f"{f['cpu']} CPU"] if f.get("cpu") else []
        gives += [f"{f['memory']} memory"] if f.get("memory") else []
        nodes = f.get("nodes") or 1
        if nodes > 1:
            # what one node has, times the nodes: "2 nodes x (1 GPU, A100, 8 CPU)"; with no
            # GPU, "2 nodes x 4 CPU, no GPU" (not "2 nodes x no GPU")
            each = gives if f["gpus"] else gives[1:]
            span = f"{nodes} nodes"
            if len(each) == 1:
                span += f" x {each[0]}"
            elif each:
                span += f" x ({', '.join(each)})"
            gives = [span] if f["gpus"] else [span, "no GPU"]
        if f.get("simulated"):
            gives.append("simulated")
        if f.get("free_gpus") is not None and f.get("total_gpus") is not None:
            free = f"{f['free_gpus']} of {f['total_gpus']}"
        elif f.get("placement"):
            free = "engine decides"
        else:
            free = str(f["available"])
        limit = _span(f["time_limit"]) if f.get("time_limit") else "-"
        rows.append((f["name"], ", ".join(gives), free, str(f["queued"]), limit))
        for why in (f.get("unavailable"), f.get("maintenance"), f.get("placement")):
            if why:
                notes.append(f"{f['name']}: {why}")
    return "\n".join([aligned(rows), *notes])

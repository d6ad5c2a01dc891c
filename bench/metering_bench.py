"""How long a usage report takes over many jobs: GPU-hours allocated and busy for a week
and for all 90 days, per user, class, flavor and node, from a database of 100 000 jobs.

    python bench/metering_bench.py [--jobs 100000] [--rounds 7] [--database URL]

Prints the median of ``rounds`` reports per breakdown (as the service answers: the
lines with each key's days, from the daily sums and the jobs not summed yet, in one
snapshot) against three baselines measured in the same run on the same database:
counting the range's jobs in SQL (one query, no work per job), loading them as ORM
records (what the report did before metering read plain columns), and reading them one
by one (what it did before the daily sums). The goal is a median under 200 ms. It also
prints how long summing the whole history took (what the first round after an upgrade
does).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from nbjobs.job_service.app import freeze_what_lasts
from nbjobs.job_service.db import JobRecord, connect
from nbjobs.job_service.metering import Line, as_usage_lines, day_range, jobs_in_range, meter
from nbjobs.job_service.usage import PER_ROUND, report, roll
from sqlalchemy import func, insert, select

from nbjobs.config import NbjobsConfig
from nbjobs.models import ClassInfo

USERS = [f"student{i:03d}" for i in range(300)] + [f"staff{i:02d}" for i in range(20)]
FLAVORS = ["a100", "a100x2", "t4", "cpu"]
NODES = [f"gpu-{i}" for i in range(12)]
START = datetime(2026, 9, 1, tzinfo=timezone.utc)
DAYS = 90  # the jobs spread over three months; the report asks for one week of them


def fill(url: str, jobs: int) -> None:
    """``jobs`` finished jobs over DAYS days, a tenth of them with no telemetry."""
    sessions = connect(url)
    rng = random.Random(7)
    rows = []
    for seq in range(jobs):
        user = rng.choice(USERS)
        flavor = rng.choice(FLAVORS)
        gpus = {"a100": 1, "a100x2": 2, "t4": 1, "cpu": 0}[flavor]
        started = START + timedelta(seconds=rng.uniform(0, DAYS * 86400))
        ran = timedelta(minutes=rng.uniform(1, 600))
        busy = None if rng.random() < 0.1 else ran.total_seconds() * gpus * rng.random()
        rows.append(
            {
                "id": f"j{seq:011d}",
                "seq": seq,
                "user": user,
                "groups": ["staff"] if user.startswith("staff") else ["students"],
                "name": "bench",
                "flavor": flavor,
                "state": "succeeded",
                "priority": 0,
                "path": "n.ipynb",
                "output_path": "n.out.ipynb",
                "source_file": "/n.ipynb",
                "snapshot_file": "/s.ipynb",
                "output_file": "/o.ipynb",
                "job_dir": "/j",
                "parameters": {},
                "gpu_count": gpus,
                "gpus": [],
                "node": rng.choice(NODES) if gpus else None,
                "submitted_at": started,
                "started_at": started,
                "finished_at": started + ran,
                "gpu_busy_seconds": busy,
            }
        )
    with sessions() as db:
        for i in range(0, len(rows), 5000):
            db.execute(insert(JobRecord), rows[i : i + 5000])
        db.commit()


def timed(work: Callable[[], object], rounds: int) -> float:
    """The median seconds of ``rounds`` runs of ``work`` (after one unmeasured run)."""
    work()
    times = []
    for _ in range(rounds):
        began = time.perf_counter()
        work()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def compare(
    sessions: Any,
    what: str,
    first: date,
    last: date,
    now: datetime,
    classes: dict[str, list[str]],
    rounds: int,
) -> float:
    """Time the reports of the days ``first`` to ``last`` against the baselines; the
    slowest report."""
    since, until = day_range(first, last)
    jobs = [0]
    config = NbjobsConfig.model_validate({"flavors": [{"name": f} for f in FLAVORS]})
    rosters = [ClassInfo(name=name, students=students) for name, students in classes.items()]

    def count() -> None:
        with sessions() as db:
            jobs[0] = db.scalar(
                select(func.count())
                .select_from(JobRecord)
                .where(JobRecord.started_at < until, JobRecord.finished_at > since)
            )

    def orm() -> None:
        with sessions() as db:
            db.scalars(
                select(JobRecord).where(JobRecord.started_at < until, JobRecord.finished_at > since)
            ).all()

    def one_by_one(by: str) -> Callable[[], object]:
        def run() -> object:
            with sessions() as db:
                found = jobs_in_range(db, since, until)
            # as the report was before the daily sums: the breakdown and the total in
            # one pass over every job of the range, then the API's lines
            everyone = Line("total")
            lines = meter(
                found,
                since=since,
                until=until,
                now=now,
                by=by,
                classes=classes,
                everyone=everyone,
            )
            return as_usage_lines([*lines, everyone])

        return run

    def summed(by: str) -> Callable[[], object]:
        def run() -> object:
            with sessions() as db:
                return report(
                    db,
                    config=config,
                    classes=rosters,
                    users=None,
                    since=first.isoformat(),
                    until=last.isoformat(),
                    by=by,
                    now=now,
                    default_days=7,
                )

        return run

    floor = timed(count, rounds)
    loaded = timed(orm, rounds)
    print(f"\n{what}: {jobs[0]} jobs; medians of {rounds} runs")
    print(
        f"{'report':<22} {'median':>9} {'/ count':>9} {'/ ORM load':>11} "
        f"{'one by one':>11} {'/ one by one':>13} {'/ 200 ms':>9}"
    )
    print(f"{'count (SQL)':<22} {floor * 1000:>7.1f}ms {1:>9.2f} {floor / loaded:>11.2f}")
    print(f"{'ORM records':<22} {loaded * 1000:>7.1f}ms {loaded / floor:>9.2f} {1:>11.2f}")
    worst = 0.0
    for by in ("user", "class", "flavor", "node"):
        before = timed(one_by_one(by), rounds)
        took = timed(summed(by), rounds)
        worst = max(worst, took)
        print(
            f"{'by ' + by:<22} {took * 1000:>7.1f}ms {took / floor:>9.2f} "
            f"{took / loaded:>11.2f} {before * 1000:>9.1f}ms {took / before:>13.2f} "
            f"{took / 0.2:>9.2f}"
        )
    return worst


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--database", help="an SQLAlchemy URL (default: a new SQLite file)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="nbjobs-metering-") as folder:
        url = args.database or f"sqlite:///{Path(folder) / 'jobs.sqlite'}"
        began = time.perf_counter()
        fill(url, args.jobs)
        print(f"{args.jobs} jobs over {DAYS} days written in {time.perf_counter() - began:.1f} s")
        sessions = connect(url)
        began = time.perf_counter()
        summed = 0
        while True:  # as the service's rounds do after an upgrade
            with sessions() as db:
                done = roll(db, {})
                db.commit()
            summed += done
            if done < PER_ROUND:
                break
        took = time.perf_counter() - began
        print(f"{summed} ended jobs summed into their days in {took:.1f} s")
        # as in the service, which leaves what its start made out of later garbage
        # collections (app.py): without it, a report's 29 000 day entries paid for full
        # collections walking everything this process had made (about half its time)
        freeze_what_lasts()
        print("objects made so far frozen out of garbage collection, as the service does")
        now = START + timedelta(days=DAYS + 1)
        classes = {"ml-101": USERS[:150], "stats-201": USERS[100:300]}
        worst = 0.0
        ranges = [
            ("a week", date(2026, 10, 5), date(2026, 10, 11)),
            ("all 90 days", START.date(), START.date() + timedelta(days=DAYS)),
        ]
        for what, first, last in ranges:
            worst = max(worst, compare(sessions, what, first, last, now, classes, args.rounds))
        print(f"slowest report / goal 200 ms: {worst / 0.2:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

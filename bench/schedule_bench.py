"""How long the scheduler's pass takes with 10 000 job definitions in one database.

    python bench/schedule_bench.py [--definitions 10000] [--rounds 15] [--database URL]

Each pass is the ticker's own code (``Ticker.record_due``: one indexed query for what is
due, then one transaction per due definition recording its run and moving it to its next
tick) against a real database filled with definitions of mixed schedules and time zones.
Measured with nothing due and with 20 due, and printed as medians against two baselines
from the same run on the same database: counting the definitions in SQL (the floor: one
query, no work) and a naive pass that loads every definition and works out its next tick
(what a scheduler without the stored, indexed next tick would do). The goal is a median
under 50 ms.
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from nbjobs.job_service.db import connect
from nbjobs.job_service.schedules.cron import Schedule
from nbjobs.job_service.schedules.store import DefinitionRecord
from nbjobs.job_service.schedules.ticker import Ticker
from sqlalchemy import func, insert, select, update

from nbjobs.config import NbjobsConfig

CRONS = ["0 2 * * *", "30 * * * *", "*/15 * * * *", "0 9 * * 1-5", "0 6 * * 1", "5 4 1 * *"]
ZONES = ["UTC", "Europe/Paris", "America/New_York", "Asia/Tokyo", "Australia/Sydney"]
NOW = datetime(2026, 11, 25, 12, 0, tzinfo=timezone.utc)


def fill(url: str, count: int) -> None:
    """``count`` definitions of 300 users, none due at NOW (their next ticks are later)."""
    sessions = connect(url)
    rng = random.Random(11)
    rows = []
    for n in range(count):
        cron, zone = rng.choice(CRONS), rng.choice(ZONES)
        rows.append(
            {
                "id": f"d{n:011d}",
                "user": f"user{n % 300:03d}",
                "groups": ["students"],
                "name": f"definition {n}",
                "version": 1,
                "settings": {"path": "n.ipynb", "flavor": "cpu", "parameters": {"n": n}},
                "cron": cron,
                "timezone": zone,
                "catch_up": "once",
                "paused": int(rng.random() < 0.1),
                "next_run_at": Schedule(cron, zone).next_after(NOW + timedelta(minutes=1)),
                "created_at": NOW - timedelta(days=30),
                "updated_at": NOW - timedelta(days=30),
            }
        )
    with sessions() as db:
        for start in range(0, len(rows), 2000):
            db.execute(insert(DefinitionRecord), rows[start : start + 2000])
        db.commit()


def make_due(url: str, how_many: int) -> None:
    """Make ``how_many`` active definitions due a minute before NOW."""
    sessions = connect(url)
    with sessions() as db:
        ids = db.scalars(
            select(DefinitionRecord.id)
            .where(DefinitionRecord.paused == 0, DefinitionRecord.cron == "*/15 * * * *")
            .limit(how_many)
        ).all()
        db.execute(
            update(DefinitionRecord)
            .where(DefinitionRecord.id.in_(ids))
            .values(next_run_at=NOW - timedelta(minutes=1))
        )
        db.commit()


def ticker_for(url: str) -> Ticker:
    """The real Ticker over the database, in a service of just the parts it reads."""
    ctx: Any = SimpleNamespace(
        sessions=connect(url),
        config=NbjobsConfig(),
        log=logging.getLogger("bench"),
    )
    unused: Any = None  # the bench records due runs; it submits nothing
    definitions: Any = SimpleNamespace(clock=lambda: NOW)  # whose clock the ticker reads
    return Ticker(ctx, definitions, unused)


def median_ms(
    work: Callable[[], object], rounds: int, before: Callable[[], None] | None = None
) -> float:
    times = []
    for _ in range(rounds):
        if before is not None:
            before()
        start = time.perf_counter()
        work()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--definitions", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--database", help="an SQLAlchemy URL (default: a new SQLite file)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        url = args.database or f"sqlite:///{Path(tmp) / 'bench.sqlite'}"
        fill(url, args.definitions)
        sessions = connect(url)
        ticker = ticker_for(url)

        def count() -> int:
            with sessions() as db:
                return int(db.scalar(select(func.count()).select_from(DefinitionRecord)) or 0)

        def naive() -> int:
            with sessions() as db:
                due = 0
                for cron, zone in db.execute(
                    select(DefinitionRecord.cron, DefinitionRecord.timezone).where(
                        DefinitionRecord.paused == 0
                    )
                ):
                    if Schedule(cron, zone).next_after(NOW - timedelta(minutes=1)) <= NOW:
                        due += 1
                return due

        floor = median_ms(count, args.rounds)
        idle = median_ms(ticker.record_due, args.rounds)
        busy = median_ms(ticker.record_due, args.rounds, before=lambda: make_due(url, 20))
        slow = median_ms(naive, max(3, args.rounds // 5))
    print(f"{args.definitions} definitions, medians of {args.rounds} passes ({url.split(':')[0]})")
    rows = [
        ("scheduler pass, nothing due", idle),
        ("scheduler pass, 20 due (runs recorded)", busy),
        ("baseline: count the definitions", floor),
        ("baseline: naive pass over all of them", slow),
    ]
    for name, value in rows:
        print(f"  {name:<42} {value:8.1f} ms")
    print(f"  pass, nothing due / count          {idle / floor:8.2f}x")
    print(f"  pass, 20 due / naive pass          {busy / slow:8.3f}x")
    goal = 50.0
    verdict = "meets" if max(idle, busy) < goal else "MISSES"
    print(f"  goal: under {goal:.0f} ms: {verdict} ({max(idle, busy) / goal:.2f}x of it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

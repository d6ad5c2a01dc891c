"""The usage report's daily sums: a report reads the same whether its jobs are summed into
days or read one by one, while rounds sum them, with two services summing at once, and
with jobs deleted before or after they were summed."""

from __future__ import annotations

import random
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from nbjobs.job_service import usage
from nbjobs.job_service.db import JobRecord, KeptUsage, connect
from nbjobs.job_service.metering import BREAKDOWNS, retire
from nbjobs.job_service.usage import UsageDayRow, report, roll
from sqlalchemy import func, select, update

from nbjobs.config import NbjobsConfig
from nbjobs.models import ClassInfo

from .conftest import new_postgres_database

UTC = timezone.utc
START = datetime(2026, 10, 1, tzinfo=UTC)
NOW = START + timedelta(days=20, hours=5)
USERS = ["ada", "bob", "cy", "dee", "eve"]
CONFIG = NbjobsConfig.model_validate(
    {
        "flavors": [
            {"name": "a100", "gpus": 1, "cost_per_gpu_hour": 2.0},
            {"name": "pair", "gpus": 2, "cost_per_gpu_hour": 3.5},
            {"name": "t4", "gpus": 1},
        ]
    }
)
PRICES = {"a100": 2.0, "pair": 3.5}
CLASSES = [
    ClassInfo(name="ml101", students=["ada", "bob"]),
    ClassInfo(name="stats", students=["bob", "cy"]),
]


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'jobs.sqlite'}"
    return new_postgres_database(request.getfixturevalue("postgres_url"), tmp_path)


def fill(sessions: Any, count: int, seed: int = 3) -> None:
    """``count`` jobs over 20 days: short and long ones (some over several midnights),
    running and queued ones, some never sampled, in zero, one or two groups."""
    rng = random.Random(seed)
    with sessions() as db:
        for seq in range(count):
            flavor = rng.choice(["a100", "pair", "t4"])
            started = START + timedelta(seconds=rng.uniform(0, 20 * 86400))
            ran = timedelta(hours=rng.choice([0.2, 3, 30, 70]) * rng.random())
            state = rng.choice(["succeeded"] * 6 + ["failed", "cancelled", "running", "queued"])
            finished = None if state in ("running", "queued") else started + ran
            if state == "running" and started > NOW:
                started = NOW - timedelta(hours=2)
            db.add(
                JobRecord(
                    id=f"j{seq:05d}",
                    seq=seq,
                    user=rng.choice(USERS),
                    groups=rng.choice([[], ["students"], ["students", "ml"]]),
                    name="n",
                    flavor=flavor,
                    state=state,
                    path="n.ipynb",
                    output_path="n.out.ipynb",
                    source_file="/n.ipynb",
                    snapshot_file="/s.ipynb",
                    output_file="/o.ipynb",
                    job_dir="/j",
                    gpu_count=2 if flavor == "pair" else 1,
                    gpu_equivalents=0.25 if rng.random() < 0.1 else None,
                    node=rng.choice(["gpu-0", "gpu-1", None]),
                    submitted_at=started,
                    started_at=None if state == "queued" else started,
                    finished_at=finished,
                    gpu_busy_seconds=None
                    if rng.random() < 0.2
                    else ran.total_seconds() * rng.random(),
                )
            )
        db.commit()


def reports(sessions: Any, users: list[str] | None = None) -> dict[tuple[str, str, str], Any]:
    """Every breakdown over three ranges: all the days, a week from mid-range (jobs run
    into it), one day."""
    found = {}
    ranges = [("2026-10-01", "2026-10-21"), ("2026-10-08", "2026-10-14"), ("2026-10-09", None)]
    for by in BREAKDOWNS:
        for since, until in ranges:
            with sessions() as db:
                found[(by, since, str(until))] = report(
                    db,
                    config=CONFIG,
                    classes=CLASSES,
                    users=users,
                    since=since,
                    until=until or since,
                    by=by,
                    now=NOW,
                    default_days=7,
                )
    return found


def same(got: dict[Any, Any], wanted: dict[Any, Any]) -> None:
    """Two sets of reports alike, to a rounding of the sums' order."""
    assert got.keys() == wanted.keys()
    for key, report_got in got.items():
        words_got, numbers_got = _plain(report_got)
        words, numbers = _plain(wanted[key])
        assert words_got == words, key
        assert numbers_got == pytest.approx(numbers, abs=2e-4), key


def _plain(found: dict[str, Any]) -> tuple[list[Any], list[float]]:
    """A report's names, job counts and days, and its numbers apart."""
    words: list[Any] = []
    numbers: list[float] = []
    for line in [found["total"], *found["breakdown"]]:
        words.append((line.name, line.jobs, line.cost is None, [d.date for d in line.days]))
        numbers += [line.gpu_hours_allocated, line.gpu_hours_busy, line.cost or 0.0]
        numbers += [n for d in line.days for n in (d.gpu_hours_allocated, d.gpu_hours_busy)]
    return words, numbers


def summed(sessions: Any) -> int:
    with sessions() as db:
        return int(
            db.scalar(select(func.count()).where(JobRecord.usage_rolled.is_(True))) or 0
        ) + int(db.scalar(select(func.count()).where(KeptUsage.usage_rolled.is_(True))) or 0)


def test_a_report_reads_the_same_before_while_and_after_jobs_are_summed(database_url):
    sessions = connect(database_url)
    fill(sessions, 400)
    # some jobs deleted before any summing: their kept time is summed as themselves
    with sessions() as db:
        for job_id in ("j00003", "j00010", "j00042"):
            record = db.get(JobRecord, job_id)
            if record.state in ("succeeded", "failed", "cancelled"):
                retire(db, record)
                db.delete(record)
        db.commit()
    one_by_one = reports(sessions)
    assert one_by_one[("user", "2026-10-01", "2026-10-21")]["total"].jobs > 300

    with sessions() as db:  # a part of them summed
        assert roll(db, PRICES, limit=150) > 150  # 150 jobs and the kept ones
        db.commit()
    same(reports(sessions), one_by_one)
    same(reports(sessions, users=["ada", "cy"]), reports_of(sessions, ["ada", "cy"]))

    while True:  # all of them, in rounds
        with sessions() as db:
            done = roll(db, PRICES, limit=97)
            db.commit()
        if not done:
            break
    with sessions() as db:
        left = db.scalar(
            select(func.count()).where(
                JobRecord.usage_rolled.is_(False), JobRecord.state.in_(["running", "queued"])
            )
        )
        rows = db.scalar(select(func.count()).select_from(UsageDayRow))
    assert left  # the running and queued are counted by the report itself
    assert rows
    same(reports(sessions), one_by_one)

    # a job deleted after it was summed stays counted once
    with sessions() as db:
        record = db.get(JobRecord, "j00005")
        assert record.usage_rolled
        retire(db, record)
        db.delete(record)
        db.commit()
    with sessions() as db:
        assert db.get(KeptUsage, "j00005").usage_rolled
        assert roll(db, PRICES) == 0
    same(reports(sessions), one_by_one)


def reports_of(sessions: Any, users: list[str]) -> dict[Any, Any]:
    """The reports of ``users`` as the jobs read one by one say (the sums taken away)."""
    with sessions() as db:
        db.execute(sqlalchemy.delete(UsageDayRow))
        db.execute(update(JobRecord).values(usage_rolled=False))
        db.execute(update(KeptUsage).values(usage_rolled=False))
        db.commit()
    found = reports(sessions, users=users)
    with sessions() as db:  # summed again, as before
        while roll(db, PRICES, limit=150):
            pass
        db.commit()
    return found


def test_a_round_that_commits_in_the_middle_of_a_report_counts_each_job_once(
    database_url, monkeypatch
):
    sessions = connect(database_url)
    fill(sessions, 120)
    wanted = reports(sessions)

    read_jobs = usage.jobs_in_range

    def then_a_round(*args: Any, **kwargs: Any) -> Any:
        jobs = read_jobs(*args, **kwargs)
        # another service sums every job between the report's two reads
        with sessions() as other:
            while roll(other, PRICES):
                pass
            other.commit()
        return jobs

    monkeypatch.setattr(usage, "jobs_in_range", then_a_round)
    with sessions() as db:
        got = report(
            db,
            config=CONFIG,
            classes=CLASSES,
            users=None,
            since="2026-10-01",
            until="2026-10-21",
            by="user",
            now=NOW,
            default_days=7,
        )
    monkeypatch.undo()
    assert summed(sessions) > 80
    same({"r": got}, {"r": wanted[("user", "2026-10-01", "2026-10-21")]})


def test_two_services_summing_at_once_count_each_job_once(database_url):
    sessions = connect(database_url)
    fill(sessions, 300)
    wanted = reports(sessions)
    conflicts = []

    def summer() -> None:
        while True:
            with sessions() as db:
                try:
                    done = roll(db, PRICES, limit=40)
                except usage.Conflict:
                    db.rollback()
                    conflicts.append(1)
                    continue
                db.commit()
            if not done:
                return

    threads = [threading.Thread(target=summer) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    with sessions() as db:
        total = db.scalar(
            select(func.sum(UsageDayRow.began)).where(UsageDayRow.breakdown == "total")
        )
        ended = db.scalar(
            select(func.count()).where(
                JobRecord.finished_at.is_not(None),
                JobRecord.started_at.is_not(None),
                JobRecord.finished_at > JobRecord.started_at,
            )
        )
    assert total == ended  # each ended job began once in the sums
    same(reports(sessions), wanted)


def test_a_database_from_before_the_sums_gets_its_history_summed(tmp_path):
    url = f"sqlite:///{tmp_path / 'jobs.sqlite'}"
    sessions = connect(url)
    fill(sessions, 50)
    wanted = reports(sessions)
    sessions.kw["bind"].dispose()
    # as schema 5 left it: no sums, no mark
    engine = sqlalchemy.create_engine(url)
    with engine.begin() as conn:
        for index in ("ix_nbjobs_jobs_unrolled", "ix_nbjobs_usage_kept_unrolled"):
            conn.execute(sqlalchemy.text(f"DROP INDEX {index}"))
        conn.execute(sqlalchemy.text("DROP TABLE nbjobs_usage_days"))
        for table in ("nbjobs_jobs", "nbjobs_usage_kept"):
            conn.execute(sqlalchemy.text(f"ALTER TABLE {table} DROP COLUMN usage_rolled"))
        conn.execute(sqlalchemy.text("UPDATE nbjobs_schema SET version = 5"))
        conn.execute(sqlalchemy.text("UPDATE alembic_version SET version_num = '0005'"))
    engine.dispose()

    sessions = connect(url)
    with sessions() as db:
        marks = db.scalars(select(JobRecord.usage_rolled)).all()
    assert len(marks) == 50
    assert set(marks) == {False}  # none NULL: each is found to sum
    with sessions() as db:
        ended = db.scalar(select(func.count()).where(JobRecord.state.not_in(["running", "queued"])))
        assert 0 < ended < 50
        assert roll(db, PRICES) == ended  # the rest are counted by reports themselves
        db.commit()
    same(reports(sessions), wanted)


def test_the_report_reads_the_jobs_not_summed_through_the_partial_indexes(tmp_path):
    sessions = connect(f"sqlite:///{tmp_path / 'jobs.sqlite'}")
    fill(sessions, 20)
    engine = sessions.kw["bind"]
    said: list[tuple[str, Any]] = []

    def heard(*args: Any) -> None:
        statement, parameters = args[2], args[3]
        said.append((statement, parameters))

    sqlalchemy.event.listen(engine, "before_cursor_execute", heard)
    with sessions() as db:
        usage.jobs_in_range(db, START, NOW, unsummed=True)
    sqlalchemy.event.remove(engine, "before_cursor_execute", heard)
    plans = []
    with engine.connect() as conn:
        for statement, parameters in said:
            if statement.lstrip().upper().startswith("SELECT"):
                plan = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters).all()
                plans.append(" ".join(str(row[-1]) for row in plan))
    assert len(plans) == 2, said
    assert "ix_nbjobs_jobs_unrolled" in plans[0]
    assert "ix_nbjobs_usage_kept_unrolled" in plans[1]


def test_a_job_that_never_ran_is_summed_without_a_word_of_damage(tmp_path, caplog):
    """A job cancelled while queued has no start: summing it adds nothing and says
    nothing. It was logged as "a job of ada with a damaged start time" in every
    service's log, for every such job; a damaged time still is."""
    sessions = connect(f"sqlite:///{tmp_path / 'jobs.sqlite'}")
    fill(sessions, 30)
    with sessions() as db:
        queued = db.scalars(select(JobRecord).where(JobRecord.state == "queued")).all()
        assert queued
        for record in queued:
            record.state, record.finished_at = "cancelled", NOW
        damaged = db.scalars(select(JobRecord).where(JobRecord.state == "succeeded")).first()
        damaged.user = "zed"
        db.commit()
        db.execute(
            sqlalchemy.text("UPDATE nbjobs_jobs SET started_at = 'soon' WHERE id = :id"),
            {"id": damaged.id},
        )
        db.commit()
    with sessions() as db:
        assert roll(db, PRICES) > len(queued)
        db.commit()
    warned = [r.getMessage() for r in caplog.records if "damaged" in r.getMessage()]
    assert warned == ["a job of zed with a damaged start time left out of the usage"]
    with sessions() as db:  # every ended job marked summed, the never-run ones too
        ended = db.scalar(select(func.count()).where(JobRecord.state != "running"))
    assert summed(sessions) == ended

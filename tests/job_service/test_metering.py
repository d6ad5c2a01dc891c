"""Metering sums against known job durations: allocated and busy GPU-hours per key and
per UTC day, clipped to the range asked for."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pytest
from nbjobs.job_service.db import JobRecord, connect
from nbjobs.job_service.metering import Line, MeteredJob, day_range, jobs_in_range, meter

from .conftest import new_postgres_database

UTC = timezone.utc
DAY1 = datetime(2026, 11, 16, tzinfo=UTC)  # a Monday
NOW = DAY1 + timedelta(days=7)


def job(
    user: str = "ada",
    *,
    start: datetime,
    hours: float | None,
    gpus: int = 1,
    busy_hours: float | None = None,
    groups: tuple[str, ...] = ("students",),
    flavor: str = "a100",
    node: str | None = "gpu-0",
) -> MeteredJob:
    return MeteredJob(
        user=user,
        groups=groups,
        flavor=flavor,
        node=node,
        gpus=gpus,
        started=start.timestamp(),
        finished=None if hours is None else (start + timedelta(hours=hours)).timestamp(),
        gpu_busy_seconds=None if busy_hours is None else busy_hours * 3600,
    )


def hours(line_total: object) -> tuple[float, float]:
    return (
        round(line_total.allocated / 3600, 6),  # type: ignore[attr-defined]
        round(line_total.busy / 3600, 6),  # type: ignore[attr-defined]
    )


def test_a_run_over_midnight_gives_each_day_its_part():
    # two GPUs from 23:00 to 01:00, busy a quarter of the time: 4 GPU-hours held, 1 busy
    late = job(start=DAY1 + timedelta(hours=23), hours=2, gpus=2, busy_hours=1)
    since, until = day_range(date(2026, 11, 16), date(2026, 11, 22))
    [line] = meter([late], since=since, until=until, now=NOW, by="user")
    assert (line.name, line.jobs) == ("ada", 1)
    assert hours(line.total) == (4.0, 1.0)
    assert {d: hours(t) for d, t in line.days.items()} == {
        date(2026, 11, 16): (2.0, 0.5),
        date(2026, 11, 17): (2.0, 0.5),
    }


def test_the_range_cuts_a_job_at_its_edges():
    late = job(start=DAY1 + timedelta(hours=23), hours=2, gpus=2, busy_hours=1)
    since, until = day_range(date(2026, 11, 17), date(2026, 11, 17))
    [line] = meter([late], since=since, until=until, now=NOW, by="user")
    assert hours(line.total) == (2.0, 0.5)
    assert list(line.days) == [date(2026, 11, 17)]
    # a range the job does not touch has no line for it
    since, until = day_range(date(2026, 11, 18), date(2026, 11, 20))
    assert meter([late], since=since, until=until, now=NOW, by="user") == []


def test_each_breakdown_counts_a_job_under_each_of_its_keys():
    jobs = [
        job("ada", start=DAY1, hours=1, groups=("students", "ml"), busy_hours=0.5),
        job("bob", start=DAY1, hours=3, groups=("students",), flavor="t4", node=None),
        job("eve", start=DAY1, hours=2, groups=("staff",), busy_hours=2),
    ]
    since, until = day_range(date(2026, 11, 16), date(2026, 11, 16))
    by = lambda what, **kw: {  # noqa: E731
        line.name: (line.jobs, *hours(line.total))
        for line in meter(jobs, since=since, until=until, now=NOW, by=what, **kw)
    }
    assert by("user") == {"ada": (1, 1.0, 0.5), "bob": (1, 3.0, 0.0), "eve": (1, 2.0, 2.0)}
    assert by("group") == {"students": (2, 4.0, 0.5), "ml": (1, 1.0, 0.5), "staff": (1, 2.0, 2.0)}
    assert by("flavor") == {"a100": (2, 3.0, 2.5), "t4": (1, 3.0, 0.0)}
    assert by("node") == {"gpu-0": (2, 3.0, 2.5), "(none)": (1, 3.0, 0.0)}
    classes = {"ml-101": ["ada", "bob"], "stats": ["bob"]}
    assert by("class", classes=classes) == {"ml-101": (2, 4.0, 0.5), "stats": (1, 3.0, 0.0)}
    # most allocated first
    lines = meter(jobs, since=since, until=until, now=NOW, by="user")
    assert [line.name for line in lines] == ["bob", "eve", "ada"]


def test_a_running_job_counts_up_to_now_and_costs_what_its_flavor_charges():
    running = job(start=NOW - timedelta(hours=3), hours=None, gpus=2, busy_hours=3)
    finished = job(start=DAY1, hours=1, flavor="t4")
    since, until = day_range(date(2026, 11, 16), date(2026, 11, 23))
    prices = {"a100": 2.5}
    [a100, t4] = meter(
        [running, finished],
        since=since,
        until=until,
        now=NOW,
        by="flavor",
        cost_per_gpu_hour=prices,
    )
    assert (a100.name, hours(a100.total)) == ("a100", (6.0, 3.0))
    assert a100.cost == pytest.approx(15.0)  # 6 GPU-hours held at 2.5
    assert t4.cost is None  # no price for it


def test_an_unknown_breakdown_is_refused():
    with pytest.raises(ValueError, match="by must be one of user, group, class, flavor, node"):
        meter([], since=DAY1, until=NOW, now=NOW, by="colour")


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new, empty database of each kind the service runs on."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'jobs.sqlite'}"
    return new_postgres_database(request.getfixturevalue("postgres_url"), tmp_path)


def test_the_database_gives_the_jobs_a_range_overlaps(database_url: str):
    # the times come back as seconds worked out by the database, each in its own way
    sessions = connect(database_url)
    rows = [
        # (id, user, started, finished, busy GPU-seconds)
        ("before", "ada", DAY1 - timedelta(days=3), DAY1 - timedelta(days=2), None),
        ("across", "ada", DAY1 - timedelta(hours=1), DAY1 + timedelta(hours=1), 1800.0),
        ("inside", "bob", DAY1 + timedelta(hours=5), DAY1 + timedelta(hours=6), None),
        ("running", "bob", DAY1 + timedelta(hours=7), None, 100.0),
        ("queued", "bob", None, None, None),
    ]
    with sessions() as db:
        for seq, (job_id, user, started, finished, busy) in enumerate(rows):
            db.add(
                JobRecord(
                    id=job_id,
                    seq=seq,
                    user=user,
                    groups=["students"],
                    name=job_id,
                    flavor="a100",
                    state="running" if finished is None and started else "succeeded",
                    path="n.ipynb",
                    output_path="n.out.ipynb",
                    source_file="/n.ipynb",
                    snapshot_file="/s.ipynb",
                    output_file="/o.ipynb",
                    job_dir="/j",
                    gpu_count=1,
                    submitted_at=started or DAY1,
                    started_at=started,
                    finished_at=finished,
                    gpu_busy_seconds=busy,
                )
            )
        db.commit()
    since, until = day_range(date(2026, 11, 16), date(2026, 11, 16))
    with sessions() as db:
        found = jobs_in_range(db, since, until)
        only_bob = jobs_in_range(db, since, until, users=["bob"])
    assert sorted((j.user, j.started, j.gpu_busy_seconds) for j in found) == sorted(
        [
            ("ada", (DAY1 - timedelta(hours=1)).timestamp(), 1800.0),
            ("bob", (DAY1 + timedelta(hours=5)).timestamp(), None),
            ("bob", (DAY1 + timedelta(hours=7)).timestamp(), 100.0),
        ]
    )
    assert {j.user for j in only_bob} == {"bob"}
    assert found[0].groups == ("students",)
    # the job across midnight: its half-hour busy spread over its two hours
    [ada] = meter(
        [j for j in found if j.user == "ada"], since=since, until=until, now=NOW, by="user"
    )
    assert hours(ada.total) == (1.0, 0.25)


def test_the_total_counts_every_job_once_whatever_its_keys():
    jobs = [
        job("ada", start=DAY1, hours=1, groups=("students", "ml")),  # in two groups
        job("zed", start=DAY1, hours=2, groups=()),  # in no group and no class
    ]
    since, until = day_range(date(2026, 11, 16), date(2026, 11, 16))
    for by in ("group", "class"):
        everyone = Line("total")
        meter(
            jobs,
            since=since,
            until=until,
            now=NOW,
            by=by,
            classes={"c": ["ada"]},
            everyone=everyone,
        )
        assert (everyone.jobs, hours(everyone.total)) == (2, (3.0, 0.0)), by

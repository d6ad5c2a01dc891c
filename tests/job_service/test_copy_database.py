"""``nbjobs copy-database``: a hub's history moves to a new database (SQLite to
PostgreSQL, or another SQLite file) and a service on the new one answers as the old one
did: the jobs, their usage and budgets, definitions and notification settings.

The services are real, the PostgreSQL server too. The command runs as an admin runs it,
a real process, in the first test; the others, about what it says and does rather than
about its being a process, run its main in the test's process (a Python that imports
SQLAlchemy costs over a second of CPU before it copies anything).
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import sqlalchemy
from nbjobs.job_service import dbcopy
from nbjobs.job_service.db import JobSample

from tests.hub.hubproc import nbjobs_here

from .conftest import new_postgres_database, record_gpu_time, stop_all, stop_service

#: a week back: the jobs of the history are hours old
SINCE = (datetime.now(timezone.utc) - timedelta(days=7)).date().isoformat()

CLASS = {
    "classes": [{"name": "ml", "teachers": ["eve"], "students": ["ada", "bob"], "gpu_hours": 1}],
    "notifications": {"webhook": {"allowed_hosts": ["hooks.example"]}},
}


def copy_process(*args: str) -> subprocess.CompletedProcess[str]:
    """``nbjobs copy-database`` with ``args``, a process of its own: what it said."""
    return subprocess.run(
        [sys.executable, "-m", "nbjobs.cli", "copy-database", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def copy(*args: str) -> subprocess.CompletedProcess[str]:
    """What :func:`copy_process` gives, from the command's main run in this process."""
    return nbjobs_here("", "", "copy-database", *args)


def rows_by_table(url: str) -> dict[str, int]:
    """Each nbjobs table's row count, but the lease's and the schema version's."""
    engine = sqlalchemy.create_engine(url)
    with engine.connect() as conn:
        names = sqlalchemy.inspect(conn).get_table_names()
        found = {
            name: conn.scalar(sqlalchemy.text(f"SELECT count(*) FROM {name}"))
            for name in names
            if name.startswith("nbjobs_") and name not in ("nbjobs_lease", "nbjobs_schema")
        }
    engine.dispose()
    return found


async def history(start) -> tuple[dict, dict]:
    """A source service with some of everything a hub keeps, stopped; what its users saw."""
    svc = await start(CLASS)
    # script jobs (no kernel): the subject is what the database keeps of them
    svc.script("ada", "ok.py", "print('fine')")
    svc.script("ada", "bad.py", "raise ValueError('no')")
    for path in ("ok.py", "bad.py"):
        await svc.wait("ada", (await svc.submit("ada", path))["id"])
    gpu_job = record_gpu_time(
        svc, "bob", gpus=1, started_ago=timedelta(hours=3), finished_ago=timedelta(hours=1)
    )
    with svc.service.sessions() as db:
        db.add_all(
            JobSample(job_id=gpu_job, at=datetime.now(timezone.utc) - timedelta(hours=2 - i / 60))
            for i in range(3)
        )
        db.commit()
    async with svc.client("eve") as c:
        granted = await c.post("classes/ml/students/bob/budget", json={"hours": 2})
        assert granted.status_code == 200, granted.text
    async with svc.client("ada") as c:
        made = await c.post("definitions", json={"path": "ok.py", "flavor": "cpu"})
        assert made.status_code == 201, made.text
        put = await c.put(
            "notifications/settings",
            json={"webhook": "https://hooks.example/a", "on": ["queued_long"]},
        )
        assert put.status_code == 200, put.text
    seen = await what_users_see(svc)
    await stop_service(svc)
    return seen, {"gpu_job": gpu_job}


async def what_users_see(svc) -> dict:
    asked = {
        "jobs": ("ada", "jobs", {}),
        "definitions": ("ada", "definitions", {}),
        "settings": ("ada", "notifications/settings", {}),
        "class": ("eve", "classes/ml", {}),
        "usage": ("eve", "usage", {"by": "user", "since": SINCE}),
        "bob's usage": ("bob", "usage", {"since": SINCE}),
    }
    seen: dict = {}
    for what, (user, path, params) in asked.items():
        async with svc.client(user) as c:
            answer = await c.get(path, params=params)
        assert answer.status_code == 200, answer.text
        seen[what] = answer.json()
        if path == "usage":  # a report's window is worked out from now
            del seen[what]["since"]
    return seen


async def test_sqlite_to_postgresql_keeps_what_users_see_and_new_rows_follow(
    start, tmp_path, postgres_url
):
    before, made = await history(start)
    target = new_postgres_database(postgres_url, tmp_path, "c")

    done = copy_process("--config", str(tmp_path / "nbjobs.yaml"), "--to", target)

    assert done.returncode == 0, done.stderr
    source = rows_by_table(f"sqlite:///{tmp_path / 'jobs.sqlite'}")
    assert source["nbjobs_jobs"] == 3
    assert source["nbjobs_job_samples"] >= 3
    assert rows_by_table(target) == source
    for table, rows in source.items():
        assert f"  {table}: {rows} row" in done.stdout
    assert "copied" in done.stdout
    assert "(3 jobs)" in done.stdout
    assert f"set database.url in nbjobs.yaml to {target}" in done.stdout
    after = await start({**CLASS, "database": {"url": target}})
    try:
        assert await what_users_see(after) == before
        # PostgreSQL numbers new rows after the copied ones (its sequences moved on)
        with after.service.sessions() as db:
            db.add(JobSample(job_id=made["gpu_job"], at=datetime.now(timezone.utc)))
            db.commit()
            assert db.query(JobSample).count() == source["nbjobs_job_samples"] + 1
        async with after.client("eve") as c:
            again = await c.post("classes/ml/students/ada/budget", json={"hours": 1})
        assert again.status_code == 200, again.text
        # and jobs run on it
        job = await after.submit("ada", "ok.py")
        assert (await after.wait("ada", job["id"]))["state"] == "succeeded"
    finally:
        await stop_all(after)


async def test_a_password_is_never_printed(start, tmp_path, postgres_url):
    await stop_service(await start())
    target = new_postgres_database(postgres_url, tmp_path, "c").replace("nbjobs@", "nbjobs:s3cret@")

    done = copy("--from", f"sqlite:///{tmp_path / 'jobs.sqlite'}", "--to", target)

    assert done.returncode == 0, done.stderr
    assert "s3cret" not in done.stdout + done.stderr
    assert "nbjobs:***@" in done.stdout


async def test_a_target_with_records_is_refused_and_left_as_it_was(start, tmp_path):
    await history(start)
    target = f"sqlite:///{tmp_path / 'new.sqlite'}"
    assert copy("--config", str(tmp_path / "nbjobs.yaml"), "--to", target).returncode == 0
    size = (tmp_path / "new.sqlite").stat().st_size

    again = copy("--config", str(tmp_path / "nbjobs.yaml"), "--to", target)

    assert again.returncode == 4
    assert "already holds job records (" in again.stderr
    assert "nbjobs_jobs: 3;" in again.stderr
    assert "copy into a new, empty database (nothing was written)" in again.stderr
    engine = sqlalchemy.create_engine(target)
    with engine.connect() as conn:
        assert conn.scalar(sqlalchemy.text("SELECT count(*) FROM nbjobs_jobs")) == 3
    engine.dispose()
    assert (tmp_path / "new.sqlite").stat().st_size == size


async def test_a_running_service_is_named_and_nothing_is_copied(start, tmp_path):
    svc = await start()
    try:
        # in a thread: the service runs on this event loop, and renews its lease there
        done = await asyncio.to_thread(
            copy,
            "--config",
            str(tmp_path / "nbjobs.yaml"),
            "--to",
            f"sqlite:///{tmp_path / 'n.sqlite'}",
        )
    finally:
        await stop_service(svc)

    assert done.returncode == 3
    assert f"a job service ({svc.service.lease.holder}) is using the source" in done.stderr
    assert "stop it first" in done.stderr
    assert rows_by_table(f"sqlite:///{tmp_path / 'n.sqlite'}").get("nbjobs_jobs", 0) == 0


async def test_a_backup_taken_while_the_service_ran_is_copied_once_its_claim_runs_out(
    start, tmp_path
):
    # the backup holds the lease row as it was: claimed by a service that renews the
    # live database's row, not this copy's. Long enough that the copy command (a Python
    # that imports SQLAlchemy: seconds at load 6 on two cores) starts within the claim;
    # 3 s failed under CI's load, the copy finding the claim already run out.
    svc = await start(argv=("--JobServiceApp.lease_seconds=15",))
    try:
        svc.script("ada", "ok.py", "print('fine')")
        await svc.wait("ada", (await svc.submit("ada", "ok.py"))["id"])
        live = sqlite3.connect(tmp_path / "jobs.sqlite")
        backup = sqlite3.connect(tmp_path / "backup.sqlite")
        live.backup(backup)
        backup.close()
        live.close()
        done = await asyncio.to_thread(
            copy,
            "--from",
            f"sqlite:///{tmp_path / 'backup.sqlite'}",
            "--to",
            f"sqlite:///{tmp_path / 'n.sqlite'}",
        )
    finally:
        await stop_service(svc)

    assert done.returncode == 0, done.stderr
    assert f"lease is held by {svc.service.lease.holder} for" in done.stdout
    assert "waiting to see whether it renews it" in done.stdout
    assert "nbjobs_jobs: 1 row" in done.stdout


async def test_a_service_started_afterwards_takes_the_source_again(start, tmp_path):
    await history(start)
    done = copy(
        "--config", str(tmp_path / "nbjobs.yaml"), "--to", f"sqlite:///{tmp_path / 'n.sqlite'}"
    )
    assert done.returncode == 0, done.stderr
    # the copy gave both leases back: a service on either starts at once
    for url in (None, f"sqlite:///{tmp_path / 'n.sqlite'}"):
        svc = await start({**CLASS, **({"database": {"url": url}} if url else {})})
        try:
            assert svc.service.lease.held
        finally:
            await stop_service(svc)


async def test_a_damaged_row_is_left_out_and_named(start, tmp_path):
    await history(start)
    engine = sqlalchemy.create_engine(f"sqlite:///{tmp_path / 'jobs.sqlite'}")
    with engine.begin() as conn:
        damaged = conn.scalar(sqlalchemy.text("SELECT id FROM nbjobs_jobs ORDER BY seq LIMIT 1"))
        conn.execute(
            sqlalchemy.text("UPDATE nbjobs_jobs SET parameters = '{not json' WHERE id = :id"),
            {"id": damaged},
        )
    engine.dispose()

    done = copy(
        "--config", str(tmp_path / "nbjobs.yaml"), "--to", f"sqlite:///{tmp_path / 'n.sqlite'}"
    )

    assert done.returncode == 0, done.stderr
    assert "nbjobs_jobs: 2 rows" in done.stdout
    assert f"left out {damaged}: a damaged value" in done.stdout
    assert "left out 1 damaged row, named above" in done.stdout


def test_what_cannot_be_copied_is_refused_in_words(tmp_path):
    missing = copy("--from", f"sqlite:///{tmp_path / 'gone.sqlite'}", "--to", "sqlite://")
    assert missing.returncode == 2
    assert f"there is no job database at {tmp_path / 'gone.sqlite'}" in missing.stderr
    assert not (tmp_path / "gone.sqlite").exists()  # not made empty by looking

    (tmp_path / "a.sqlite").write_bytes(b"")
    same = copy(
        "--from", f"sqlite:///{tmp_path / 'a.sqlite'}", "--to", f"sqlite:///{tmp_path / 'a.sqlite'}"
    )
    assert same.returncode == 2
    assert "the source and the target are the same database" in same.stderr

    not_url = copy("--from", f"sqlite:///{tmp_path / 'a.sqlite'}", "--to", "db.example.org/nbjobs")
    assert not_url.returncode == 2
    assert "'db.example.org/nbjobs' is not a database URL" in not_url.stderr

    empty = copy(
        "--from", f"sqlite:///{tmp_path / 'a.sqlite'}", "--to", f"sqlite:///{tmp_path / 'b.sqlite'}"
    )
    assert empty.returncode == 2
    assert "is empty (0 bytes)" in empty.stderr

    (tmp_path / "nbjobs.yaml").write_text("flavors: [{name: cpu, gpus: many}]\n")
    bad = copy("--config", str(tmp_path / "nbjobs.yaml"), "--to", "sqlite://")
    assert bad.returncode == 2
    assert "nbjobs.yaml" in bad.stderr
    assert "line 1" in bad.stderr


async def test_tables_larger_than_a_batch_arrive_whole_and_say_how_far_they_got(
    start, tmp_path, monkeypatch
):
    await history(start)
    monkeypatch.setattr(dbcopy, "BATCH", 2)
    monkeypatch.setattr(dbcopy, "PROGRESS_EVERY", 2)
    source, target = f"sqlite:///{tmp_path / 'jobs.sqlite'}", f"sqlite:///{tmp_path / 'n.sqlite'}"
    said: list[str] = []

    report = await asyncio.to_thread(dbcopy.copy_database, source, target, said.append)

    assert rows_by_table(target) == rows_by_table(source)
    samples = rows_by_table(source)["nbjobs_job_samples"]
    assert f"  nbjobs_job_samples: 2 of {samples} rows ..." in said
    assert "  nbjobs_jobs: 2 of 3 rows ..." in said
    assert sum(done.rows for done in report) == sum(rows_by_table(source).values())

"""Job definitions: saved submissions run now or on a schedule, exactly one job per tick.

A real service with real runner processes; the ticker's clock is injected, so the tests
step through minutes and days without sleeping (one test waits for a real minute).
"""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from nbjobs.job_service.db import JobRecord
from nbjobs.job_service.schedules.definitions import next_run
from nbjobs.job_service.schedules.store import DefinitionRecord, DefinitionRunRecord
from nbjobs.job_service.schedules.ticker import STALE_START, Ticker
from sqlalchemy import func, select

from .conftest import BASE_CONFIG, start_service, stop_all

pytestmark = pytest.mark.timeout(240)

MINUTE = timedelta(minutes=1)


class Clock:
    """A clock a test moves by hand."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
async def ticking(svc):
    """The service with its ticker stopped and its clock in the test's hands."""
    await svc.service.ticker.stop()
    clock = Clock(datetime.now(timezone.utc).replace(second=0, microsecond=0))
    svc.service.ticker.clock = clock
    return svc, clock


async def create(svc, user="ada", **body):
    async with svc.client(user) as c:
        r = await c.post("definitions", json=body)
    assert r.status_code == 201, r.text
    return r.json()


async def runs(svc, definition_id, user="ada"):
    async with svc.client(user) as c:
        r = await c.get(f"definitions/{definition_id}/runs")
    assert r.status_code == 200, r.text
    return r.json()["runs"]


def jobs_of(svc, definition_id):
    with svc.service.sessions() as db:
        return db.scalars(select(JobRecord).where(JobRecord.definition_id == definition_id)).all()


async def test_every_minute_one_job_per_tick_and_its_run_in_the_history(ticking):
    svc, clock = ticking
    svc.write("ada", "p.ipynb", "print(n)")
    every_minute = {"cron": "* * * * *", "timezone": "Europe/Paris"}
    made = await create(
        svc,
        path="p.ipynb",
        flavor="cpu",
        parameters={"n": 1},
        name="nightly",
        schedule=every_minute,
    )
    assert made["schedule"]["description"] == "Every minute (Europe/Paris)"
    assert made["next_run_at"] is not None
    ticker = svc.service.ticker

    clock.now += MINUTE + timedelta(seconds=5)
    assert await ticker.round() == 1
    assert await ticker.round() == 0  # the same minute again: nothing more
    clock.now += MINUTE
    assert await ticker.round() == 1

    history = await runs(svc, made["id"])
    assert [r["kind"] for r in history] == ["tick", "tick"]
    assert all(r["state"] == "submitted" for r in history)
    for run in history:
        job = await svc.wait("ada", run["job_id"])
        assert job["state"] == "succeeded", job
        assert job["name"] == "nightly"
        assert job["parameters"] == {"n": 1}
    done = await runs(svc, made["id"])
    assert all(r["job_state"] == "succeeded" and r["output_path"] for r in done)
    assert all(r["duration_seconds"] is not None for r in done)
    assert len(jobs_of(svc, made["id"])) == 2


async def test_ticks_missed_while_the_service_was_away_run_once_or_are_skipped(ticking):
    svc, clock = ticking
    svc.script("ada", "p.py", "1")
    hourly = {"cron": "0 * * * *", "timezone": "UTC"}
    once = await create(svc, path="p.py", flavor="cpu", schedule=hourly)
    skip = await create(svc, path="p.py", flavor="cpu", schedule={**hourly, "catch_up": "skip"})

    # five ticks pass while the service is down: the first, then four more
    first_tick = datetime.fromisoformat(once["next_run_at"])
    clock.now = first_tick + timedelta(hours=4, minutes=10)
    assert await svc.service.ticker.round() == 1

    [caught_up] = await runs(svc, once["id"])
    assert caught_up["kind"] == "catch_up"
    assert caught_up["missed"] == 4
    assert caught_up["reason"] == "4 earlier tick(s) missed while the service was away; ran once"
    assert caught_up["state"] == "submitted"
    [skipped] = await runs(svc, skip["id"])
    assert skipped["state"] == "skipped"
    assert skipped["job_id"] is None
    assert "skips missed ticks (catch_up: skip)" in skipped["reason"]
    # both go on from the next tick, not from the missed ones
    async with svc.client("ada") as c:
        after = (await c.get(f"definitions/{once['id']}")).json()
    next_tick = datetime.fromisoformat(after["next_run_at"])
    assert timedelta(0) < next_tick - clock.now <= timedelta(hours=1)


async def test_two_tickers_on_one_database_start_a_tick_once(ticking):
    svc, clock = ticking
    svc.script("ada", "p.py", "1")
    made = await create(svc, path="p.py", flavor="cpu", schedule={"cron": "*/5 * * * *"})
    clock.now += timedelta(minutes=6)
    service = svc.service  # a second ticker, as of a second process, racing on the same rows
    other = Ticker(service.ctx, service.definitions, service.submit)  # its clock: the same
    recorded: list[int] = []
    start = threading.Barrier(2)

    def race(ticker):
        start.wait()
        recorded.append(len(ticker.record_due()))

    threads = [threading.Thread(target=race, args=(t,)) for t in (svc.service.ticker, other)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert sorted(recorded) == [0, 1]
    with svc.service.sessions() as db:
        count = db.scalar(
            select(func.count())
            .select_from(DefinitionRunRecord)
            .where(DefinitionRunRecord.definition_id == made["id"])
        )
    assert count == 1


async def test_a_run_interrupted_by_a_restart_gets_exactly_one_job(ticking, start):
    svc, clock = ticking
    svc.script("ada", "p.py", "1")
    lost = await create(svc, path="p.py", flavor="cpu", schedule={"cron": "* * * * *"})
    queued = await create(svc, path="p.py", flavor="cpu", schedule={"cron": "* * * * *"})
    ticker = svc.service.ticker
    clock.now += MINUTE + timedelta(seconds=1)
    due = await svc.service.in_db(ticker.record_due)
    assert len(due) == 2
    # the crash: one run's job was queued but not recorded, the other's never queued
    first = next(d for d in due if d.definition_id == queued["id"])
    await svc.service.submit(
        first.owner, first.request, definition=(first.definition_id, first.run_id)
    )
    await stop_all(svc)

    again = await start()
    try:
        await again.service.ticker.stop()
        later = Clock(clock.now + STALE_START + MINUTE / 2)
        again.service.ticker.clock = later
        due = await again.service.in_db(again.service.ticker.unfinished)
        assert [d.definition_id for d in due] == [lost["id"]]
        for item in due:
            await again.service.ticker.submit(item)
        assert len(jobs_of(again, lost["id"])) == 1
        assert len(jobs_of(again, queued["id"])) == 1
        for definition in (lost, queued):
            history = await runs(again, definition["id"])
            assert [r["state"] for r in history] == ["submitted"]
        # and a second pass finds nothing left to do
        assert await again.service.in_db(again.service.ticker.unfinished) == []
    finally:
        await stop_all(again)


def authenticator(svc):
    """The service's token authenticator, whose users and groups a test changes."""
    return svc.server.request_callback.settings["nbjobs_auth"]


async def test_a_run_the_owner_may_no_longer_make_is_recorded_as_refused(ticking, monkeypatch):
    """The attack: given a flavor through a group, save a schedule, leave the group; the
    ticks went on running with the groups stored with the definition."""
    svc, clock = ticking
    svc.script("cy", "p.py", "1")
    made = await create(svc, "cy", path="p.py", flavor="staff-only", schedule={"cron": "0 * * * *"})
    auth = authenticator(svc)
    monkeypatch.setitem(auth.user_groups, "cy", ["students"])  # cy left the staff group
    clock.now += timedelta(hours=1)
    await svc.service.ticker.round()

    [run] = await runs(svc, made["id"], "cy")
    assert run["state"] == "refused"
    assert run["reason"].startswith("you may not use flavor 'staff-only'")
    assert jobs_of(svc, made["id"]) == []


async def test_a_gone_users_definition_is_paused_saying_why(ticking, monkeypatch):
    svc, clock = ticking
    svc.script("cy", "p.py", "1")
    made = await create(svc, "cy", path="p.py", flavor="cpu", schedule={"cron": "0 * * * *"})
    auth = authenticator(svc)
    monkeypatch.setattr(auth, "_known", {t: u for t, u in auth._known.items() if u != "cy"})
    clock.now += timedelta(hours=1)
    await svc.service.ticker.round()
    clock.now += timedelta(hours=1)
    await svc.service.ticker.round()  # paused: no second run

    with svc.service.sessions() as db:
        record = db.get(DefinitionRecord, made["id"])
        paused = (record.paused, record.next_run_at)
    async with svc.client("root") as admin:  # cy has no token any more; an admin looks
        history = (await admin.get(f"definitions/{made['id']}/runs")).json()["runs"]
    assert [r["state"] for r in history] == ["refused"]
    assert history[0]["reason"] == (
        "cy is no longer a user here, so their definition is paused; an admin may delete it"
    )
    assert paused == (1, None)
    assert jobs_of(svc, made["id"]) == []


async def test_a_daily_run_neither_skips_nor_doubles_over_daylight_saving_changes(ticking):
    svc, clock = ticking
    svc.script("ada", "p.py", "1")
    made = await create(
        svc,
        path="p.py",
        flavor="cpu",
        schedule={"cron": "30 2 * * *", "timezone": "Europe/Paris", "catch_up": "skip"},
    )
    ticker = svc.service.ticker
    paris = ZoneInfo("Europe/Paris")
    # both changes of 2026: clocks go forward on 29 March (02:30 does not exist), back
    # on 25 October (02:30 happens twice); step through each, a quarter hour at a time
    for first_day, expected in [(27, [28, 29, 30, 31]), (23, [24, 25, 26, 27])]:
        month = 3 if first_day == 27 else 10
        start = datetime(2026, month, first_day, 12, tzinfo=timezone.utc)
        with svc.service.sessions() as db:
            record = db.get(DefinitionRecord, made["id"])
            record.next_run_at = next_run(record, start)
            db.commit()
        days = []
        for quarter in range(4 * 96):  # the service checks often: no tick is late
            clock.now = start + timedelta(minutes=15 * quarter, seconds=30)
            if await ticker.round():
                days.append(clock.now.astimezone(paris).day)
        assert days == expected, month
    history = await runs(svc, made["id"])
    assert len(history) == 8
    assert all(r["kind"] == "tick" for r in history)
    local = [datetime.fromisoformat(r["scheduled_for"]).astimezone(paris) for r in history]
    # 02:30 every day, but 03:00 on the day 02:30 does not exist
    assert sorted((t.month, t.day, t.hour, t.minute) for t in local) == [
        (3, 28, 2, 30),
        (3, 29, 3, 0),
        (3, 30, 2, 30),
        (3, 31, 2, 30),
        (10, 24, 2, 30),
        (10, 25, 2, 30),
        (10, 26, 2, 30),
        (10, 27, 2, 30),
    ]


async def test_edits_make_versions_and_runs_keep_the_parameters_they_ran_with(ticking):
    svc, _ = ticking
    svc.script("ada", "p.py", "1")
    made = await create(svc, path="p.py", flavor="cpu", parameters={"lr": 0.1})
    async with svc.client("ada") as c:
        first = (await c.post(f"definitions/{made['id']}/run")).json()
        edited = await c.patch(f"definitions/{made['id']}", json={"parameters": {"lr": 0.5}})
        second = (await c.post(f"definitions/{made['id']}/run")).json()
    assert edited.status_code == 200, edited.text
    assert edited.json()["version"] == 2
    assert (first["kind"], first["version"], first["state"]) == ("manual", 1, "submitted")
    assert second["version"] == 2
    history = await runs(svc, made["id"])
    assert [r["parameters"] for r in history] == [{"lr": 0.5}, {"lr": 0.1}]
    assert history[0]["parameters_changed"] == {"lr": [0.1, 0.5]}
    assert history[1]["parameters_changed"] == {}
    for run in history:
        assert (await svc.wait("ada", run["job_id"]))["state"] == "succeeded"


async def test_pause_resume_and_delete(ticking):
    svc, clock = ticking
    svc.script("ada", "p.py", "1")
    made = await create(svc, path="p.py", flavor="cpu", schedule={"cron": "* * * * *"})
    async with svc.client("ada") as c:
        paused = (await c.post(f"definitions/{made['id']}/pause")).json()
        clock.now += 3 * MINUTE
        assert await svc.service.ticker.round() == 0
        resumed = (await c.post(f"definitions/{made['id']}/resume")).json()
        clock.now += MINUTE
        assert await svc.service.ticker.round() == 1
        gone = await c.delete(f"definitions/{made['id']}")
        listed = (await c.get("definitions")).json()["definitions"]
        missing = await c.get(f"definitions/{made['id']}")
        history = await c.get(f"definitions/{made['id']}/runs")
    assert (paused["paused"], paused["next_run_at"]) == (True, None)
    assert resumed["paused"] is False
    assert resumed["next_run_at"] is not None
    assert gone.status_code == 204
    assert listed == []
    assert missing.status_code == 404
    # its runs and their jobs stay
    [run] = history.json()["runs"]
    assert run["job_id"] is not None
    clock.now += MINUTE
    assert await svc.service.ticker.round() == 0


@pytest.mark.parametrize(
    ("schedule", "words"),
    [
        ({"cron": "0 2 * *"}, "has 4 field(s); a schedule has five"),
        ({"cron": "61 * * * *"}, "is not valid"),
        ({"cron": "0 2 * * *", "timezone": "Mars/Olympus"}, "is not an IANA time zone"),
        ({"cron": "* * * * * *"}, "has 6 field(s)"),
        # far dates overflowed to a 500 when moved to UTC or past a tick
        (
            {"cron": "0 2 * * *", "end_at": "9999-12-31T23:59:59-14:00"},
            "give a date between the years 1970 and 9000",
        ),
        (
            {"cron": "0 2 * * *", "start_at": "9999-12-01T00:00:00Z"},
            "give a date between the years 1970 and 9000",
        ),
    ],
)
async def test_bad_schedules_are_refused_in_words(svc, schedule, words):
    svc.script("ada", "p.py", "1")
    async with svc.client("ada") as c:
        r = await c.post(
            "definitions", json={"path": "p.py", "flavor": "cpu", "schedule": schedule}
        )
    assert r.status_code == 400
    assert words in r.json()["message"]


async def test_a_schedule_more_frequent_than_the_admin_allows_is_refused(tmp_path):
    svc = await start_service(tmp_path, {"schedules": {"min_interval": "10m"}})
    try:
        svc.script("ada", "p.py", "1")
        async with svc.client("ada") as c:
            often = await c.post(
                "definitions",
                json={"path": "p.py", "flavor": "cpu", "schedule": {"cron": "*/5 * * * *"}},
            )
            fine = await c.post(
                "definitions",
                json={"path": "p.py", "flavor": "cpu", "schedule": {"cron": "*/10 * * * *"}},
            )
    finally:
        await stop_all(svc)
    assert often.status_code == 400
    assert often.json()["message"] == (
        "cron: '*/5 * * * *' runs every 5 min at times; this service runs a definition at "
        "most every 10 min (schedules.min_interval in nbjobs.yaml)"
    )
    assert fine.status_code == 201


async def test_who_sees_and_changes_whose_definitions(svc):
    svc.script("ada", "p.py", "1")
    made = await create(svc, path="p.py", flavor="cpu")
    async with svc.client("bob") as c:
        bobs_view = await c.get(f"definitions/{made['id']}")
        bobs_list = (await c.get("definitions")).json()["definitions"]
        bobs_pause = await c.post(f"definitions/{made['id']}/pause")
        staff = await c.post("definitions", json={"path": "p.py", "flavor": "staff-only"})
    async with svc.client("root") as c:
        everyone = (await c.get("definitions")).json()["definitions"]
        admin_pause = await c.post(f"definitions/{made['id']}/pause")
    assert bobs_view.status_code == 404
    assert bobs_list == []
    assert bobs_pause.status_code == 404
    assert staff.status_code == 403
    assert "you may not use flavor 'staff-only'" in staff.json()["message"]
    assert [d["id"] for d in everyone] == [made["id"]]
    assert admin_pause.json()["paused"] is True


async def test_a_real_one_minute_tick(tmp_path):
    """The service's own rounds, on time that really passes, start a run when the minute
    turns. Its clock runs as the machine's, moved on so that the minute turns in a few
    seconds rather than in up to sixty."""
    svc = await start_service(tmp_path, {"schedules": {"check_every": 1}})
    now = datetime.now(timezone.utc)
    shift = (now.replace(second=0, microsecond=0) + MINUTE - now) - timedelta(seconds=4)
    svc.service.ticker.clock = lambda: datetime.now(timezone.utc) + shift
    try:
        svc.script("ada", "p.py", "print('on time')")
        made = await create(svc, path="p.py", flavor="cpu", schedule={"cron": "* * * * *"})
        deadline = time.monotonic() + 90
        # a run is recorded as starting, then as submitted once its job is queued
        while not (history := await runs(svc, made["id"])) or history[0]["state"] == "starting":
            assert time.monotonic() < deadline, f"no run submitted within 90 s: {history}"
            await asyncio.sleep(0.5)
        [run] = history
        assert run["kind"] == "tick"
        assert run["state"] == "submitted"
        tick = datetime.fromisoformat(run["scheduled_for"])
        assert tick.second == 0
        assert (await svc.wait("ada", run["job_id"]))["state"] == "succeeded"
    finally:
        await stop_all(svc)


async def test_a_run_whose_notebook_is_gone_or_whose_flavor_was_removed_is_refused(tmp_path, start):
    extra = {"name": "extra", "gpus": 0}
    config = {"flavors": [*BASE_CONFIG["flavors"], extra]}
    svc = await start_service(tmp_path, config)
    try:
        svc.write("ada", "gone.ipynb", "1")
        svc.write("ada", "kept.ipynb", "1")
        gone = await create(svc, path="gone.ipynb", flavor="cpu")
        removed = await create(svc, path="kept.ipynb", flavor="extra")
        (svc.home("ada") / "gone.ipynb").unlink()
    finally:
        await stop_all(svc)
    again = await start()  # nbjobs.yaml without the flavor "extra" now
    try:
        async with again.client("ada") as c:
            first = (await c.post(f"definitions/{gone['id']}/run")).json()
            second = (await c.post(f"definitions/{removed['id']}/run")).json()
    finally:
        await stop_all(again)
    assert first["state"] == "refused"
    assert first["reason"] == "'gone.ipynb' does not exist in your folder; save it first"
    assert second["state"] == "refused"
    assert second["reason"].startswith("you may not use flavor 'extra'; your flavors are: cpu")


async def test_a_teacher_sees_her_students_definitions_but_does_not_change_them(tmp_path):
    classes = [{"name": "ml-101", "teachers": ["eve"], "students": ["ada"], "flavors": ["cpu"]}]
    svc = await start_service(tmp_path, {"classes": classes})
    try:
        svc.script("ada", "p.py", "1")
        svc.script("bob", "p.py", "1")
        adas = await create(svc, "ada", path="p.py", flavor="cpu")
        await create(svc, "bob", path="p.py", flavor="cpu")
        async with svc.client("eve") as c:
            seen = (await c.get("definitions")).json()["definitions"]
            one = await c.get(f"definitions/{adas['id']}")
            history = await c.get(f"definitions/{adas['id']}/runs")
            paused = await c.post(f"definitions/{adas['id']}/pause")
            bobs = await c.get("definitions", params={"user": "bob"})
    finally:
        await stop_all(svc)
    assert [d["user"] for d in seen] == ["ada"]  # her student's, not bob's
    assert one.status_code == 200
    assert history.status_code == 200
    assert paused.status_code == 403
    assert "only their owner or an admin changes them" in paused.json()["message"]
    assert bobs.status_code == 403


async def test_an_edit_that_removes_the_notebook_or_flavor_is_refused_in_words(svc):
    svc.script("ada", "p.py", "1")
    made = await create(svc, path="p.py", flavor="cpu")
    async with svc.client("ada") as c:
        no_flavor = await c.patch(f"definitions/{made['id']}", json={"flavor": None})
        no_path = await c.patch(f"definitions/{made['id']}", json={"path": None})
        kept = (await c.get(f"definitions/{made['id']}")).json()
    assert no_flavor.status_code == 400
    assert "flavor" in no_flavor.json()["message"]
    assert no_path.status_code == 400
    assert "path" in no_path.json()["message"]
    assert (kept["version"], kept["flavor"]) == (1, "cpu")  # nothing saved

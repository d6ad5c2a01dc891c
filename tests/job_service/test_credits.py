"""Credits: a job's worst case held at submission, its cost charged at its end, refusals
that say what is short, grants by admins and teachers, statements (JSON and CSV), a job
deleted before its charge, fifty submissions at once on SQLite and PostgreSQL, and rows
the database itself keeps."""

from __future__ import annotations

import asyncio
import copy
import csv
import io
import os
import subprocess
import sys

import pytest
import sqlalchemy
import yaml

from nbjobs.config import ConfigError, parse_config

from .conftest import TOKENS, new_postgres_database, stop_all

FLAVORS = [
    {"name": "cpu", "gpus": 0, "time_limit": "10m"},
    # worst case: 1 GPU x 1 h x 2.0 = 2 credits
    {"name": "gpu", "gpus": 1, "time_limit": "1h", "cost_per_gpu_hour": 2.0},
    # worst case: 2 GPUs x 1 h x 2.0 = 4 credits
    {"name": "gpu2", "gpus": 2, "time_limit": "1h", "cost_per_gpu_hour": 2.0},
    # worst case: 1 GPU x 30 min x 2.0 = 1 credit
    {"name": "half", "gpus": 1, "time_limit": "30m", "cost_per_gpu_hour": 2.0},
]
CONFIG = {
    "flavors": FLAVORS,
    "classes": [{"name": "ml101", "teachers": ["eve"], "students": ["ada", "bob"]}],
    "credits": {"enabled": True, "users": {"ada": 5}, "classes": {"ml101": 3}},
    "quotas": {"default": {"max_queued_jobs": 300}, "users": {"root": {}}},
}


def with_credits(**credits: object) -> dict:
    config = copy.deepcopy(CONFIG)
    config["credits"] = {"enabled": True, **credits}
    return config


async def accounts(svc, user: str) -> dict[str, dict]:
    async with svc.client(user) as c:
        answer = await c.get("credits")
    assert answer.status_code == 200, answer.text
    return {a["account"]: a for a in answer.json()}


async def submit(svc, user: str, flavor: str, path: str = "n.py"):
    async with svc.client(user) as c:
        return await c.post("jobs", json={"path": path, "flavor": flavor})


def test_a_priced_flavor_without_a_time_limit_cannot_be_paid_for():
    text = (
        "credits: {enabled: true}\n"
        "flavors:\n  - {name: a, gpus: 1, cost_per_gpu_hour: 1, time_limit: null}\n"
    )
    with pytest.raises(ConfigError) as refused:
        parse_config(text)
    assert "flavors.0.time_limit" in str(refused.value)
    assert "give it a time_limit" in str(refused.value)


async def test_a_job_is_held_its_worst_case_then_charged_what_it_cost(start):
    svc = await start(CONFIG)
    # the rounds (every 10 s) would charge the job whenever a loaded machine got it to its
    # end: the test charges it itself, after looking at the hold
    await svc.service.credits.stop()
    try:
        svc.script("ada", "n.py", "import time; time.sleep(1.5)")
        async with svc.client("ada") as c:
            flavors = {f["name"]: f for f in (await c.get("flavors")).json()}
        # what the Submit dialog shows: an hour's price, and so a job's worst case
        assert (flavors["gpu"]["credits_per_hour"], flavors["gpu2"]["credits_per_hour"]) == (
            2.0,
            4.0,
        )
        assert flavors["cpu"]["credits_per_hour"] is None
        answer = await submit(svc, "ada", "gpu")
        assert answer.status_code == 201, answer.text
        job_id = answer.json()["id"]
        mine = (await accounts(svc, "ada"))["user:ada"]
        assert mine["pays_for_you"] is True
        assert (mine["standing"], mine["held"], mine["available"]) == (5.0, 2.0, 3.0)

        done = await svc.wait("ada", job_id)
        assert done["state"] == "succeeded", done
        assert await svc.service.credits.sweep() == 1
        mine = (await accounts(svc, "ada"))["user:ada"]
        ran_hours = done["gpu_hours"]
        assert ran_hours > 0
        # what it cost: its GPU-hours at 2.0 (seconds of one GPU), and nothing held
        assert mine["held"] == 0.0
        assert mine["charged"] == pytest.approx(2.0 * ran_hours, abs=1e-3)
        assert mine["balance"] == pytest.approx(5.0 - 2.0 * ran_hours, abs=1e-3)
        async with svc.client("ada") as c:
            statement = (await c.get("credits/user:ada")).json()
            spreadsheet = await c.get("credits/user:ada", params={"format": "csv"})
        [charge] = statement["entries"]
        assert (charge["kind"], charge["job_id"], charge["by"]) == ("charge", job_id, "ada")
        assert charge["amount"] == pytest.approx(-2.0 * ran_hours, abs=1e-3)
        assert "GPU-hours at 2" in charge["note"]
        assert spreadsheet.headers["content-type"].startswith("text/csv")
        rows = list(csv.DictReader(io.StringIO(spreadsheet.text)))
        assert [(r["account"], r["kind"], r["job_id"]) for r in rows] == [
            ("user:ada", "charge", job_id)
        ]
        # a second round charges nothing twice
        assert await svc.service.credits.sweep() == 0
    finally:
        await stop_all(svc)


async def test_what_an_account_cannot_cover_is_refused_with_what_is_short(start):
    svc = await start(CONFIG)
    try:
        for user in ("ada", "bob", "cy"):
            svc.script(user, "n.py", "import time; time.sleep(30)")
        assert (await submit(svc, "ada", "gpu2")).status_code == 201  # 4 of 5
        refused = await submit(svc, "ada", "gpu2")
        assert refused.status_code == 402
        said = refused.json()["message"]
        assert "may cost up to 4 credits (2 GPU x 1 h at 2)" in said
        assert "user:ada has 1 available (5, less 4 held for jobs not ended)" in said
        # bob has no account of his own: his class pays
        assert (await submit(svc, "bob", "gpu")).status_code == 201
        bobs = await accounts(svc, "bob")
        assert bobs["class:ml101"]["pays_for_you"] is True
        assert bobs["class:ml101"]["available"] == 1.0
        # cy has none: priced flavors are refused, free ones run
        none = await submit(svc, "cy", "gpu")
        assert none.status_code == 402
        assert "you have no credits: ask your teacher or admin" in none.json()["message"]
        assert (await submit(svc, "cy", "cpu")).status_code == 201
        # the refused left no job folder behind
        jobs = svc.home("cy") / ".nbjobs" / "jobs"
        assert len(list(jobs.iterdir())) == 1
    finally:
        await stop_all(svc)


async def test_admins_and_teachers_grant_within_their_reach(start):
    svc = await start(CONFIG)
    try:
        async with svc.client("eve") as c:  # ml101's teacher
            to_class = await c.post(
                "credits/class:ml101/grants", json={"amount": 10, "note": "lab 3"}
            )
            to_student = await c.post("credits/user:ada/grants", json={"amount": 1})
            to_stranger = await c.post("credits/user:cy/grants", json={"amount": 1})
            taking = await c.post("credits/user:ada/grants", json={"amount": -1})
        assert to_class.status_code == 201, to_class.text
        assert to_class.json()["balance"] == 13.0
        assert to_student.json()["granted"] == 1.0
        assert to_stranger.status_code == 403
        assert "their students' (user:NAME)" in to_stranger.json()["message"]
        assert taking.status_code == 403
        async with svc.client("ada") as c:
            self_grant = await c.post("credits/user:ada/grants", json={"amount": 100})
            others = await c.get("credits/user:bob")
            bad = await c.get("credits/ada")
        assert self_grant.status_code == 403
        assert others.status_code == 404
        assert bad.status_code == 400
        assert "write user:NAME, class:NAME or group:NAME" in bad.json()["message"]

        async with svc.client("root") as c:
            assert (await c.post("credits/user:cy/grants", json={"amount": 4})).status_code == 201
            back = await c.post("credits/user:cy/grants", json={"amount": -1.5, "note": "typo"})
            unknown = await c.post("credits/class:nope/grants", json={"amount": 1})
        assert back.json()["balance"] == 2.5
        assert unknown.status_code == 404
        svc.script("cy", "n.py", "1")
        assert (await submit(svc, "cy", "gpu")).status_code == 201  # 2 of 2.5
        async with svc.client("cy") as c:
            statement = (await c.get("credits/user:cy")).json()
        assert [(e["kind"], e["amount"], e["balance"], e["by"]) for e in statement["entries"]] == [
            ("grant", 4.0, 4.0, "root"),
            ("grant", -1.5, 2.5, "root"),
        ]
        # a teacher sees the class's account and the students'; admins every one
        assert {"class:ml101", "user:ada"} <= set(await accounts(svc, "eve"))
        assert {"class:ml101", "user:ada", "user:cy"} <= set(await accounts(svc, "root"))
        assert "user:cy" not in await accounts(svc, "ada")
    finally:
        await stop_all(svc)


async def test_a_job_deleted_before_its_charge_is_charged_then(start):
    svc = await start(CONFIG)
    await svc.service.credits.stop()  # no round: the delete alone must charge it
    try:
        svc.script("ada", "n.py", "import time; time.sleep(1)")
        job_id = (await submit(svc, "ada", "gpu")).json()["id"]
        await svc.wait("ada", job_id)
        async with svc.client("ada") as c:
            assert (await c.delete(f"jobs/{job_id}")).status_code == 204
        mine = (await accounts(svc, "ada"))["user:ada"]
        assert mine["held"] == 0.0
        assert mine["charged"] > 0
        assert mine["balance"] < 5.0
    finally:
        await stop_all(svc)


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
async def test_fifty_submissions_at_once_never_overdraw(start, request, tmp_path, database):
    config = with_credits(users={"ada": 10})
    if database == "postgresql":
        url = new_postgres_database(request.getfixturevalue("postgres_url"), tmp_path)
        config["database"] = {"url": url}
    svc = await start(config)
    await svc.service.credits.stop()  # nothing charged meanwhile: the holds stay
    try:
        svc.script("ada", "n.py", "1")
        answers = await asyncio.gather(*(submit(svc, "ada", "half") for _ in range(50)))
        codes = sorted(a.status_code for a in answers)
        # 1 credit each, 10 available: ten queued, forty refused
        assert codes.count(201) == 10, codes
        assert codes.count(402) == 40, codes
        mine = (await accounts(svc, "ada"))["user:ada"]
        assert (mine["held"], mine["available"]) == (10.0, 0.0)
    finally:
        await stop_all(svc)


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
async def test_the_database_itself_keeps_every_grant_and_charge(start, request, tmp_path, database):
    config = copy.deepcopy(CONFIG)
    if database == "postgresql":
        url = new_postgres_database(request.getfixturevalue("postgres_url"), tmp_path)
        config["database"] = {"url": url}
    svc = await start(config)
    try:
        async with svc.client("root") as c:
            assert (await c.post("credits/user:ada/grants", json={"amount": 7})).status_code == 201
        for statement in (
            "DELETE FROM nbjobs_credit_entries",
            "UPDATE nbjobs_credit_entries SET amount = 700",
        ):
            with svc.service.sessions() as db:
                with pytest.raises(sqlalchemy.exc.DatabaseError) as refused:
                    db.execute(sqlalchemy.text(statement))
                assert "credit entries are kept" in str(refused.value)
        mine = (await accounts(svc, "ada"))["user:ada"]
        assert mine["granted"] == 7.0
    finally:
        await stop_all(svc)


async def test_the_command_lists_shows_exports_and_grants(start):
    svc = await start(CONFIG)

    def nbjobs(user: str, *args: str) -> subprocess.CompletedProcess[str]:
        token = {v: k for k, v in TOKENS.items()}[user]
        env = {**os.environ, "NBJOBS_URL": svc.url, "NBJOBS_TOKEN": token}
        command = [sys.executable, "-m", "nbjobs.cli", "credits", *args]
        return subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)

    try:
        granted = await asyncio.to_thread(
            nbjobs, "root", "user:cy", "--grant", "4", "--note", "for lab 2"
        )
        assert granted.returncode == 0, granted.stderr
        assert granted.stdout.startswith("granted 4 credits to user:cy")
        listed = await asyncio.to_thread(nbjobs, "cy")
        assert listed.returncode == 0, listed.stderr
        lines = listed.stdout.splitlines()
        assert lines[0].split() == [
            "ACCOUNT", "BALANCE", "HELD", "AVAILABLE", "STANDING", "GRANTED", "CHARGED"
        ]  # fmt: skip
        assert lines[1].split() == ["user:cy", "*", "4.00", "0.00", "4.00", "0.00", "4.00", "0.00"]
        assert lines[-1] == "* pays for your jobs"
        shown = await asyncio.to_thread(nbjobs, "cy", "user:cy")
        assert shown.stdout.splitlines()[-1].split()[2:] == [
            "grant",
            "+4.00",
            "4.00",
            "-",
            "root",
            "for",
            "lab",
            "2",
        ]
        exported = await asyncio.to_thread(nbjobs, "cy", "user:cy", "--csv")
        rows = list(csv.reader(io.StringIO(exported.stdout)))
        assert rows[0] == ["at", "account", "kind", "amount", "balance", "job_id", "by", "note"]
        assert rows[1][1:] == ["user:cy", "grant", "4.0000", "4.0000", "", "root", "for lab 2"]
        refused = await asyncio.to_thread(nbjobs, "ada", "user:cy")
        assert refused.returncode != 0
        assert "no account user:cy of yours" in refused.stderr
        teacher_takes = await asyncio.to_thread(nbjobs, "eve", "user:ada", "--grant", "-1")
        assert "only admins may take credits back" in teacher_takes.stderr
    finally:
        await stop_all(svc)


def test_a_database_first_opened_by_a_tool_without_credits_still_keeps_them(tmp_path):
    """The triggers come with revision 0006, which makes the entries' table itself when
    the process that opens the database has not loaded the credits' model."""
    url = f"sqlite:///{tmp_path / 'jobs.sqlite'}"
    code = (
        "import sys\n"
        "from nbjobs.job_service.db import connect\n"
        f"connect({url!r}).kw['bind'].dispose()\n"
        "assert 'nbjobs.job_service.credits' not in sys.modules\n"
    )
    opened = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert opened.returncode == 0, opened.stderr
    from nbjobs.job_service.db import connect

    sessions = connect(url)  # now with the model, as the service
    with sessions() as db:
        db.execute(
            sqlalchemy.text(
                "INSERT INTO nbjobs_credit_entries (at, account, kind, amount, by, note) "
                "VALUES ('2026-11-28 09:00:00', 'user:ada', 'grant', 5, 'root', '')"
            )
        )
        db.commit()
        with pytest.raises(sqlalchemy.exc.DatabaseError, match="credit entries are kept"):
            db.execute(sqlalchemy.text("DELETE FROM nbjobs_credit_entries"))


async def test_the_demo_with_credits_prices_its_gpus_and_pays_from_each_users_account(
    start, tmp_path
):
    """``nbjobs demo --credits``: the demo's own GPU flavors cost credits and every user
    can pay for one (the Credits tab the guides show can be tried); without it they are
    free and the demo says how to turn credits on."""
    from nbjobs.programs.demo import CLASS, CREDITS, credits_line, demo_config

    free = demo_config(gpus=False)
    priced = demo_config(gpus=False, credits=True)
    assert "credits" not in free
    parse_config(yaml.safe_dump(priced))  # what nbjobs check-config reads
    svc = await start({"flavors": priced["flavors"], "credits": priced["credits"]})
    try:
        async with svc.client("bob") as c:
            flavors = {f["name"]: f for f in (await c.get("flavors")).json()}
        assert flavors["cpu"]["credits_per_hour"] is None
        assert flavors["gpu"]["credits_per_hour"] == CREDITS["price"]
        # bob was named nowhere: his own account is each_user's
        mine = (await accounts(svc, "bob"))["user:bob"]
        assert (mine["standing"], mine["available"]) == (CREDITS["each_user"],) * 2
        svc.script("bob", "n.py", "print(1)")
        answer = await submit(svc, "bob", "gpu")
        assert answer.status_code == 201, answer.text
        held = (await accounts(svc, "bob"))["user:bob"]["held"]
        assert held == CREDITS["price"] * 1  # the demo's GPU flavor: 1 GPU for at most 1 h
    finally:
        await stop_all(svc)
    (tmp_path / "demo").mkdir()
    said = {}
    for name, settings in (("free", free), ("priced", priced)):
        (tmp_path / "demo" / "nbjobs.yaml").write_text(yaml.safe_dump(settings))
        said[name] = credits_line(tmp_path / "demo")
    assert said["free"].startswith("credits: off")
    assert "nbjobs demo --credits" in said["free"]
    assert said["priced"].startswith("credits: on")
    assert f"class {CLASS}'s" in said["priced"]
    assert priced["credits"]["classes"] == {CLASS: CREDITS["class"]}

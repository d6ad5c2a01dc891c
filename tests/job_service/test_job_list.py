"""Finding a job among thousands: ``GET api/jobs`` with ``q`` (search), ``scope`` (whose
jobs) and ``before`` (a page after a job the client already shows).

Most jobs here are recorded straight into the service's database as finished jobs
(as :func:`record_gpu_time` does): what a list shows does not depend on how a job
ran, and thousands of real runs would not change what these tests check. Jobs that
arrive while someone pages are real submissions.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from .conftest import Service, stop_all

CLASSES = {
    "classes": [
        {"name": "ml101", "teachers": ["eve"], "students": ["ada"]},
        {"name": "ml102", "teachers": ["eve"], "students": ["cy"]},
    ],
}


def add_job(
    svc: Service,
    user: str,
    name: str,
    *,
    path: str = "n.ipynb",
    flavor: str = "cpu",
    state: str = "succeeded",
    job_id: str | None = None,
) -> str:
    """Record a finished job of ``user``'s, submitted after every job before it."""
    from nbjobs.job_service.db import JobRecord

    service = svc.service
    folder = svc.home(user)
    seq = service.submissions.numbers.next()
    job_id = job_id or f"{seq:012x}"
    now = datetime.now(timezone.utc)
    with service.sessions() as db:
        db.add(
            JobRecord(
                id=job_id,
                seq=seq,
                user=user,
                groups=[],
                name=name,
                flavor=flavor,
                state=state,
                priority=0,
                path=path,
                output_path=path.replace(".ipynb", ".out.ipynb"),
                source_file=str(folder / path),
                snapshot_file=str(folder / ".nbjobs" / job_id / "input.ipynb"),
                output_file=str(folder / path.replace(".ipynb", ".out.ipynb")),
                job_dir=str(folder / ".nbjobs" / job_id),
                parameters={},
                gpu_count=0,
                gpus=[],
                submitted_at=now - timedelta(minutes=5),
                started_at=now - timedelta(minutes=4),
                finished_at=now - timedelta(minutes=3),
                exit_code=0,
            )
        )
        db.commit()
    return job_id


async def listed(svc: Service, caller: str, **params: Any) -> dict[str, Any]:
    async with svc.client(caller) as c:
        r = await c.get("jobs", params=params)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def names(page: dict[str, Any]) -> list[str]:
    return [j["name"] for j in page["jobs"]]


async def test_a_search_matches_name_notebook_flavor_owner_and_the_start_of_the_id(svc):
    add_job(svc, "ada", "clean data", path="prep/clean.ipynb")
    add_job(svc, "ada", "Train Model", path="train.ipynb", flavor="gpu")
    add_job(svc, "ada", "50%_done", path="x.ipynb")
    add_job(svc, "bob", "bobs sweep", path="sweep.ipynb")
    coffee = add_job(svc, "ada", "by id", job_id="c0ffee000001")

    assert names(await listed(svc, "root", q="CLEAN")) == ["clean data"]
    # every word must match, each anywhere
    assert names(await listed(svc, "root", q="data clean")) == ["clean data"]
    assert names(await listed(svc, "root", q="clean train")) == []
    assert names(await listed(svc, "root", q="prep/")) == ["clean data"]
    assert names(await listed(svc, "root", q="gpu")) == ["Train Model"]
    assert names(await listed(svc, "root", q="BOB")) == ["bobs sweep"]
    # the id from its start only: "ffee" is inside it, and matches nothing
    assert names(await listed(svc, "root", q=coffee[:6])) == ["by id"]
    assert names(await listed(svc, "root", q="ffee0000")) == []
    # % and _ are what they are, never wildcards
    assert names(await listed(svc, "root", q="50%")) == ["50%_done"]
    assert names(await listed(svc, "root", q="_")) == ["50%_done"]
    # a search never widens whose jobs: ada finds none of bob's
    found = await listed(svc, "ada", q="sweep")
    assert found["jobs"] == []
    assert found["total"] == 0
    # and it counts what it found, over all pages
    page = await listed(svc, "root", q="ipynb", limit=2)
    assert page["total"] == 5
    assert page["more"] is True


async def test_a_search_too_long_is_a_400_that_says_the_most(svc):
    add_job(svc, "ada", "a")
    async with svc.client("ada") as c:
        too_long = await c.get("jobs", params={"q": "x" * 201})
        # the longest search there is, a hundred one-letter words, still works
        longest = await c.get("jobs", params={"q": " ".join(["a"] * 100)})
        blank = await c.get("jobs", params={"q": "   "})

    assert too_long.status_code == 400
    assert too_long.json()["message"] == (
        "q: a search of 201 characters is too long; search with at most 200 "
        "(words of the job's name, notebook, flavor, owner or id)"
    )
    assert longest.status_code == 200
    assert names(longest.json()) == ["a"]
    assert names(blank.json()) == ["a"]  # no words: no search


@pytest.fixture
async def school(start):
    """eve teaches ada (ml101) and cy (ml102); bob is in no class; root is an admin."""
    svc = await start(CLASSES)
    for user in ("ada", "bob", "cy", "eve", "root"):
        add_job(svc, user, f"{user}'s job")
    try:
        yield svc
    finally:
        await stop_all(svc)


async def test_scope_mine_classes_and_all_for_a_teacher(school):
    svc = school
    assert names(await listed(svc, "eve")) == ["eve's job"]  # as before scopes
    assert names(await listed(svc, "eve", scope="mine")) == ["eve's job"]
    assert names(await listed(svc, "eve", scope="classes")) == [
        "eve's job",
        "cy's job",
        "ada's job",
    ]
    # a scope and a user narrow together
    assert names(await listed(svc, "eve", scope="classes", user="ada")) == ["ada's job"]
    async with svc.client("eve") as c:
        everyone = await c.get("jobs", params={"scope": "all"})
        not_hers = await c.get("jobs", params={"scope": "classes", "user": "bob"})
    assert everyone.status_code == 403
    assert everyone.json()["message"] == (
        "scope=all lists everyone's jobs, which only nbjobs admins may see; "
        "ask for scope=mine, or scope=classes for your students' jobs too"
    )
    assert not_hers.status_code == 403


async def test_scope_for_a_student_and_an_admin(school):
    svc = school
    # a student teaches nobody: their classes' scope is their own jobs
    assert names(await listed(svc, "ada", scope="classes")) == ["ada's job"]
    async with svc.client("ada") as c:
        assert (await c.get("jobs", params={"scope": "all"})).status_code == 403
    everyone = ["root's job", "eve's job", "cy's job", "bob's job", "ada's job"]
    assert names(await listed(svc, "root")) == everyone
    assert names(await listed(svc, "root", scope="all")) == everyone
    assert names(await listed(svc, "root", scope="mine")) == ["root's job"]
    assert names(await listed(svc, "root", scope="classes")) == ["root's job"]  # teaches none
    assert names(await listed(svc, "root", scope="")) == everyone  # empty: not given


async def test_an_unknown_scope_is_a_400_naming_the_scopes(school):
    async with school.client("eve") as c:
        r = await c.get("jobs", params={"scope": "everyone"})
    assert r.status_code == 400
    assert r.json()["message"] == "scope 'everyone' is not one of: mine, classes, all"


async def test_before_pages_neither_repeat_nor_skip_while_new_jobs_arrive(svc):
    older = [add_job(svc, "ada", f"job {i}") for i in range(7)][::-1]  # newest first
    first = await listed(svc, "ada", limit=3)
    assert [j["id"] for j in first["jobs"]] == older[:3]
    assert first["more"] is True

    # Two jobs arrive while ada reads the first page: a real submission and another.
    svc.write("ada", "new.ipynb", "1")
    arrived = [(await svc.submit("ada", "new.ipynb"))["id"], add_job(svc, "ada", "newer")]

    second = await listed(svc, "ada", limit=3, before=first["jobs"][-1]["id"])
    third = await listed(svc, "ada", limit=3, before=second["jobs"][-1]["id"])
    by_offset = await listed(svc, "ada", limit=3, offset=3)

    assert [j["id"] for j in second["jobs"]] == older[3:6]
    assert second["more"] is True
    assert [j["id"] for j in third["jobs"]] == older[6:]
    assert third["more"] is False
    assert second["total"] == third["total"] == 9  # what matches, whatever the page
    # what an offset would have shown instead: the first page's last jobs, again
    assert [j["id"] for j in by_offset["jobs"]] == older[1:4]
    # and the newest page now starts with what arrived
    newest = await listed(svc, "ada", limit=3)
    assert [j["id"] for j in newest["jobs"]][:2] == arrived[::-1]


async def test_before_works_with_search_state_and_offset(svc):
    ids = [
        add_job(svc, "ada", f"run {i}", state="failed" if i % 2 else "succeeded") for i in range(6)
    ]
    failed = [i for n, i in enumerate(ids) if n % 2][::-1]  # newest first: 5, 3, 1

    page = await listed(svc, "ada", q="run", state="failed", limit=1, before=failed[0])
    skipped = await listed(svc, "ada", state="failed", limit=1, offset=1, before=failed[0])

    assert [j["id"] for j in page["jobs"]] == [failed[1]]
    assert page["more"] is True
    assert [j["id"] for j in skipped["jobs"]] == [failed[2]]
    assert skipped["more"] is False


async def test_a_cursor_that_is_not_a_job_of_yours_is_a_400_that_says_start_again(school):
    svc = school
    bobs = add_job(svc, "bob", "bob's other")
    adas = add_job(svc, "ada", "ada's other")
    async with svc.client("ada") as c:
        not_an_id = await c.get("jobs", params={"before": "../../x"})
        someone_elses = await c.get("jobs", params={"before": bobs})
        no_such = await c.get("jobs", params={"before": "ffffffff"})
    # eve teaches ada: her job is a cursor for eve too
    assert names(await listed(svc, "eve", scope="classes", before=adas)) == [
        "eve's job",
        "cy's job",
        "ada's job",
    ]

    assert not_an_id.status_code == 400
    assert not_an_id.json()["message"] == (
        "before='../../x' is not a job id; pass the id of the last job of the page you have"
    )
    # another user's job and no job read the same: a cursor tells nothing of others' jobs
    for refused, job_id in ((someone_elses, bobs), (no_such, "ffffffff")):
        assert refused.status_code == 400
        assert refused.json()["message"] == (
            f"before={job_id}: there is no job {job_id!r} of yours to list from (it may "
            "have been removed); list from the newest again, without before"
        )


async def test_the_list_answers_while_every_database_thread_is_taken_by_writes(svc):
    """What a caller asks to see has database threads of its own: a burst of submits
    that takes all the others (each waiting on a commit) never makes a list or a job's
    details wait behind it. On one shared pool the GETs waited until the writes ended."""
    import asyncio
    import threading

    adas = add_job(svc, "ada", "ada's job")
    service = svc.service
    release = threading.Event()
    # every thread the writes use, held as a slow commit would hold it
    held = [
        asyncio.ensure_future(service.in_db(release.wait, 30))
        for _ in range(service._db_threads._max_workers)  # type: ignore[attr-defined]
    ]
    try:
        await asyncio.sleep(0.2)
        async with svc.client("ada") as c:
            listing, details = await asyncio.wait_for(
                asyncio.gather(c.get("jobs"), c.get(f"jobs/{adas}")), timeout=10
            )
        assert not any(task.done() for task in held)  # the writes were still waiting
    finally:
        release.set()
        await asyncio.gather(*held)
    assert listing.status_code == 200
    assert [j["name"] for j in listing.json()["jobs"]] == ["ada's job"]
    assert details.json()["id"] == adas

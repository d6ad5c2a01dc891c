"""Everything a caller may not do gets a clear refusal, and changes nothing."""

from __future__ import annotations

import httpx
import pytest


async def post_job(svc, user, body, **kwargs):
    async with svc.client(user) as c:
        return await c.post("jobs", **({"json": body} if body is not None else {}), **kwargs)


async def no_jobs_recorded(svc) -> bool:
    async with svc.client("root") as c:
        return (await c.get("jobs")).json()["total"] == 0


@pytest.mark.parametrize(
    ("user", "status"),
    [(None, 401), ("nobody", 401)],
)
async def test_every_endpoint_needs_a_valid_token(svc, user, status):
    svc.write("ada", "a.ipynb", "1")
    job = await svc.submit("ada", "a.ipynb")
    token = {"Authorization": "token wrong"} if user else {}
    paths = [
        ("GET", "health"),
        ("GET", "flavors"),
        ("GET", "jobs"),
        ("POST", "jobs"),
        ("GET", f"jobs/{job['id']}"),
        ("DELETE", f"jobs/{job['id']}"),
        ("PATCH", f"jobs/{job['id']}"),
        ("POST", f"jobs/{job['id']}/cancel"),
        ("POST", f"jobs/{job['id']}/rerun"),
        ("GET", f"jobs/{job['id']}/logs"),
        ("GET", "usage"),
    ]
    async with httpx.AsyncClient(base_url=svc.url + "api/", headers=token) as c:
        for method, path in paths:
            r = await c.request(method, path)
            assert r.status_code == status, (method, path)
            assert "token" in r.json()["message"]


async def test_users_cannot_see_or_touch_each_others_jobs(svc):
    svc.write("ada", "mine.ipynb", "import time; time.sleep(20)")
    job = await svc.submit("ada", "mine.ipynb")

    async with svc.client("bob") as c:
        responses = [
            await c.get(f"jobs/{job['id']}"),
            await c.post(f"jobs/{job['id']}/cancel"),
            await c.post(f"jobs/{job['id']}/rerun"),
            await c.get(f"jobs/{job['id']}/logs"),
            await c.delete(f"jobs/{job['id']}"),
        ]
        listed = (await c.get("jobs")).json()
        others = await c.get("jobs", params={"user": "ada"})

    assert [r.status_code for r in responses] == [404] * 5
    assert listed["total"] == 0
    assert others.status_code == 403
    still = await svc.job("ada", job["id"])
    assert still["state"] in ("queued", "starting", "running")


async def test_admins_see_everyone(svc):
    svc.write("ada", "a.ipynb", "1")
    svc.write("bob", "b.ipynb", "1")
    await svc.submit("ada", "a.ipynb")
    await svc.submit("bob", "b.ipynb")

    async with svc.client("root") as c:
        everyone = (await c.get("jobs")).json()
        bobs = (await c.get("jobs", params={"user": "bob"})).json()

    assert everyone["total"] == 2
    assert [j["user"] for j in bobs["jobs"]] == ["bob"]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("../bob/b.ipynb", "leaves your folder"),
        ("/../../etc/passwd.ipynb", "leaves your folder"),
        ("link/b.ipynb", "leads outside your folder"),
        ("missing.ipynb", "does not exist in your folder"),
        ("notes.txt", "is not a notebook"),
        ("broken.ipynb", "is not a valid notebook"),
        (".nbjobs/jobs/x/input.ipynb", "nbjobs' own copies"),
    ],
)
async def test_paths_outside_the_users_folder_or_not_notebooks_are_refused(svc, path, expected):
    svc.write("bob", "b.ipynb", "print('bob')")
    home = svc.home("ada")
    (home / "link").symlink_to(svc.home("bob"))
    (home / "notes.txt").write_text("hi")
    (home / "broken.ipynb").write_text('{"cells": [')
    svc.write("ada", ".nbjobs/jobs/x/input.ipynb", "1")

    r = await post_job(svc, "ada", {"path": path, "flavor": "cpu"})

    assert r.status_code == 400
    assert expected in r.json()["message"]
    assert await no_jobs_recorded(svc)


@pytest.mark.parametrize(
    ("flavor", "expected"),
    [
        ("no-such", "you may not use flavor 'no-such'; your flavors are: cpu, gpu"),
        ("staff-only", "you may not use flavor 'staff-only'"),
    ],
)
async def test_flavors_the_user_may_not_use(svc, flavor, expected):
    svc.write("ada", "a.ipynb", "1")

    r = await post_job(svc, "ada", {"path": "a.ipynb", "flavor": flavor})

    assert r.status_code == 403
    assert expected in r.json()["message"]
    assert await no_jobs_recorded(svc)


async def test_group_flavors_are_listed_only_to_the_group(svc):
    async with svc.client("ada") as c:
        ada = [f["name"] for f in (await c.get("flavors")).json()]
    async with svc.client("eve") as c:
        eve = [f["name"] for f in (await c.get("flavors")).json()]

    assert "staff-only" not in ada
    assert "staff-only" in eve
    svc.write("eve", "e.ipynb", "1")
    assert (await svc.submit("eve", "e.ipynb", "staff-only"))["flavor"] == "staff-only"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"{not json", "the request body is not JSON"),
        ({"flavor": "cpu"}, "path: Field required"),
        ({"path": "a.ipynb", "flavor": "cpu", "gpus": 8}, "gpus: is not a field of this request"),
        ({"path": "a.ipynb", "flavor": "cpu", "parameters": {"1x": 1}}, "Python identifiers"),
        ({"path": "a.ipynb", "flavor": "cpu", "priority": 5}, "only admins may set"),
        ({"path": "a.ipynb", "flavor": "cpu", "time_limit": 99999}, "longer than flavor 'cpu'"),
        ({"path": "a.ipynb", "flavor": "cpu", "time_limit": -1}, "time_limit: Input should be"),
        ([1, 2], "Input should be a valid dictionary"),
    ],
)
async def test_malformed_bodies_get_a_400_that_says_what_is_wrong(svc, body, expected):
    svc.write("ada", "a.ipynb", "1")
    kwargs = {"content": body} if isinstance(body, bytes) else {"json": body}

    async with svc.client("ada") as c:
        r = await c.post("jobs", **kwargs)

    assert r.status_code in (400, 403)
    assert expected in r.json()["message"]
    assert await no_jobs_recorded(svc)


async def test_bad_query_arguments(svc):
    async with svc.client("ada") as c:
        bad_state = await c.get("jobs", params={"state": "done"})
        bad_limit = await c.get("jobs", params={"limit": "lots"})
        too_many = await c.get("jobs", params={"limit": 10_000})
        unknown = await c.get("jobs/0123456789ab")

    assert bad_state.status_code == 400
    assert "unknown state 'done'" in bad_state.json()["message"]
    assert bad_limit.status_code == 400
    assert "limit must be a whole number" in bad_limit.json()["message"]
    assert too_many.status_code == 400
    assert unknown.status_code == 404
    assert "nbjobs list" in unknown.json()["message"]


async def test_a_flavor_bigger_than_the_machine_is_refused_at_once(svc, start):
    # The fixture's machine has 2 GPUs; a 4-GPU flavor could never start.
    r = await post_job(svc, "root", {"path": "x.ipynb", "flavor": "gpu2"})
    assert r.status_code == 400  # x.ipynb does not exist: path checked after the flavor
    svc.write("root", "x.ipynb", "1")
    config = svc.service.config
    big = config.flavors[2].model_copy(update={"gpus": 4, "name": "gpu4"})
    svc.service.config = config.model_copy(update={"flavors": [*config.flavors, big]})

    r = await post_job(svc, "root", {"path": "x.ipynb", "flavor": "gpu4"})

    assert r.status_code == 409
    assert "needs 4 GPU(s) and this machine has 2 GPUs" in r.json()["message"]

"""Everything a caller may not do gets a clear refusal, and changes nothing."""

from __future__ import annotations

import httpx
import pytest

from .conftest import BASE_CONFIG, stop_all


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
    svc.script("ada", "a.py", "1")  # a job to name: what runs is not the subject
    job = await svc.submit("ada", "a.py")
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
    svc.script("ada", "mine.py", "import time; time.sleep(20)")
    job = await svc.submit("ada", "mine.py")

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
    svc.script("ada", "a.py", "1")
    svc.script("bob", "b.py", "1")
    await svc.submit("ada", "a.py")
    await svc.submit("bob", "b.py")

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
    svc.script("eve", "e.py", "1")
    assert (await svc.submit("eve", "e.py", "staff-only"))["flavor"] == "staff-only"


@pytest.mark.parametrize(
    ("body", "status", "expected"),
    [
        (b"{not json", 400, "the request body is not JSON"),
        ({"flavor": "cpu"}, 400, "path: Field required"),
        ({"path": "a.ipynb", "flavor": "cpu", "gpus": 8}, 400, "gpus: is not a field of this"),
        ({"path": "a.ipynb", "flavor": "cpu", "parameters": {"1x": 1}}, 400, "Python identifiers"),
        # well-formed, but not this caller's to ask: forbidden
        ({"path": "a.ipynb", "flavor": "cpu", "priority": 5}, 403, "only admins may set"),
        ({"path": "a.ipynb", "flavor": "cpu", "time_limit": 99999}, 400, "longer than flavor"),
        ({"path": "a.ipynb", "flavor": "cpu", "time_limit": -1}, 400, "time_limit: Input should"),
        ([1, 2], 400, "the request body must be a JSON object ({...}), not an array"),
    ],
)
async def test_malformed_bodies_get_a_400_that_says_what_is_wrong(svc, body, status, expected):
    svc.write("ada", "a.ipynb", "1")
    kwargs = {"content": body} if isinstance(body, bytes) else {"json": body}

    async with svc.client("ada") as c:
        r = await c.post("jobs", **kwargs)

    assert r.status_code == status
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


async def test_a_flavor_bigger_than_the_machine_is_refused_at_once(start):
    # The fixture's machine has 2 GPUs; a 4-GPU flavor could never start.
    svc = await start({"flavors": [*BASE_CONFIG["flavors"], {"name": "gpu4", "gpus": 4}]})
    r = await post_job(svc, "root", {"path": "x.ipynb", "flavor": "gpu2"})
    assert r.status_code == 400  # x.ipynb does not exist: path checked after the flavor
    svc.write("root", "x.ipynb", "1")

    r = await post_job(svc, "root", {"path": "x.ipynb", "flavor": "gpu4"})

    assert r.status_code == 409
    assert "needs 4 GPU(s) and this machine has 2 GPUs" in r.json()["message"]


@pytest.mark.parametrize("where", ["jobs", "logs"])
@pytest.mark.parametrize("offset", [str(10**30), "-1", "9007199254740992"])
async def test_offsets_no_database_or_file_can_take_are_a_400(svc, where, offset):
    svc.script("ada", "a.py", "print('hi')")
    job = await svc.wait("ada", (await svc.submit("ada", "a.py"))["id"])
    path = "jobs" if where == "jobs" else f"jobs/{job['id']}/logs"

    async with svc.client("ada") as c:
        r = await c.get(path, params={"offset": offset})
        biggest = await c.get(path, params={"offset": 2**53 - 1})

    assert r.status_code == 400
    assert r.json()["message"] == (
        f"offset must be a whole number from 0 up to 9007199254740991, not {offset}"
    )
    assert biggest.status_code == 200  # past the end: an empty page, an empty log
    if where == "jobs":
        assert biggest.json()["jobs"] == []
    else:
        assert biggest.text == ""


async def test_methods_a_resource_does_not_offer_are_a_json_405(svc):
    svc.script("ada", "a.py", "import time; time.sleep(30)")
    job = await svc.submit("ada", "a.py")
    prefix = "/services/nbjobs/api/"

    async with svc.client("ada") as c:
        post_job = await c.post(f"jobs/{job['id']}", json={"path": "a.py", "flavor": "cpu"})
        put_jobs = await c.put("jobs", json={})
        get_cancel = await c.get(f"jobs/{job['id']}/cancel")
        delete_health = await c.delete("health")
        listed = (await c.get("jobs")).json()
    async with svc.client(None) as c:
        anonymous = await c.post(f"jobs/{job['id']}")

    assert post_job.status_code == 405
    assert post_job.headers["content-type"] == "application/json"
    assert post_job.json()["message"] == (
        f"POST is not something {prefix}jobs/{job['id']} answers; "
        "it answers GET, DELETE, PATCH (see api/openapi.yaml)"
    )
    assert post_job.headers["allow"] == "GET, DELETE, PATCH"
    assert put_jobs.status_code == 405
    assert put_jobs.json()["message"].endswith("it answers GET, POST (see api/openapi.yaml)")
    assert get_cancel.status_code == 405
    assert get_cancel.json()["message"].startswith(f"GET is not something {prefix}jobs/")
    assert delete_health.status_code == 405
    assert listed["total"] == 1  # the POST submitted nothing
    assert anonymous.status_code == 401  # the token is checked first, as everywhere


async def test_unknown_paths_are_a_json_404_with_a_sentence(svc):
    async with svc.client("ada") as c:
        not_hex = await c.get("jobs/not-a-job")
        too_long = await c.get("jobs/" + "a" * 33)
        nothing = await c.get("nothing/here")
        outside = await c.get(svc.url + "elsewhere")
        action = await c.post("jobs/0123456789ab/launch")
    async with svc.client(None) as c:
        anonymous = await c.get("nothing/here")

    assert not_hex.status_code == 404
    assert not_hex.json()["message"] == (
        "no job 'not-a-job': a job id is up to 32 hex digits (0-9, a-f); "
        "`nbjobs list` shows your jobs"
    )
    assert too_long.status_code == 404
    assert "a job id is up to 32 hex digits" in too_long.json()["message"]
    for r in (nothing, outside, action):
        assert r.status_code == 404
        assert r.headers["content-type"] == "application/json"
    assert nothing.json()["message"] == (
        "no such resource: /services/nbjobs/api/nothing/here; "
        "api/openapi.yaml lists the job service's API"
    )
    assert anonymous.status_code == 401
    assert "token" in anonymous.json()["message"]


async def test_a_flavor_bigger_than_the_users_gpu_quota_is_refused_at_once(start):
    svc = await start({"quotas": {"default": {"max_running_gpus": 1}}})
    try:
        svc.script("ada", "a.py", "1")

        too_big = await post_job(svc, "ada", {"path": "a.py", "flavor": "gpu2"})
        fits = await post_job(svc, "ada", {"path": "a.py", "flavor": "gpu"})

        assert too_big.status_code == 403
        assert too_big.json()["message"] == (
            "flavor 'gpu2' needs 2 GPU(s) at once and your quota (max_running_gpus) allows 1; "
            "pick a flavor with fewer GPUs or ask your admin to raise your quota"
        )
        assert fits.status_code == 201
        async with svc.client("ada") as c:
            listed = (await c.get("jobs")).json()
        assert [j["flavor"] for j in listed["jobs"]] == ["gpu"]
    finally:
        await stop_all(svc)

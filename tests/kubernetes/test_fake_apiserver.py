"""The fake API server behaves like the real one where the backend's tests rely on it.

If the fake drifts, the backend's tests would pass against behaviour no cluster has."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest

from .conftest import NAMESPACE, eventually
from .fake_apiserver import FakeApiServer

JOBS = f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs"


def job(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "nbjobs", **labels}},
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}
            }
        },
    }


async def events(
    session: aiohttp.ClientSession, url: str, params: dict[str, str], count: int
) -> list[dict[str, Any]]:
    """The first ``count`` events of a watch."""
    got = []
    async with session.get(url, params={"watch": "true", **params}) as response:
        assert response.status == 200
        async for line in response.content:
            if line.strip():
                got.append(json.loads(line))
            if len(got) == count:
                break
    return got


async def test_errors_are_status_objects_and_versions_only_grow(fake: FakeApiServer):
    async with aiohttp.ClientSession(fake.url) as session:
        created = await session.post(JOBS, json=job("a"))
        first = int((await created.json())["metadata"]["resourceVersion"])
        again = await session.post(JOBS, json=job("a"))
        missing = await session.get(f"{JOBS}/nope")
        bad = job("B_a_d")
        invalid = await session.post(JOBS, json=bad)
        listed = await (await session.get(JOBS)).json()
    for response, code, reason in [(again, 409, "AlreadyExists"), (missing, 404, "NotFound")]:
        body = await response.json()
        assert response.status == code
        assert (body["kind"], body["status"], body["code"], body["reason"]) == (
            "Status",
            "Failure",
            code,
            reason,
        )
    body = await invalid.json()
    assert (invalid.status, body["reason"]) == (422, "Invalid")
    assert body["details"]["causes"][0]["field"] == "metadata.name"
    assert int(listed["metadata"]["resourceVersion"]) >= first


async def test_bookmarks_come_only_when_asked_for(fake: FakeApiServer):
    async with aiohttp.ClientSession(fake.url) as session:
        await session.post(JOBS, json=job("a"))
        since = str(fake.resource_version)
        plain = await events(session, JOBS, {"resourceVersion": since, "timeoutSeconds": "1"}, 1)
        asked = await events(
            session,
            JOBS,
            {"resourceVersion": since, "allowWatchBookmarks": "true", "timeoutSeconds": "1"},
            1,
        )
    assert plain == []  # the stream ended at its timeout with nothing to say
    assert asked[0]["type"] == "BOOKMARK"


async def test_a_too_old_version_is_410_gone_in_the_stream(fake: FakeApiServer):
    async with aiohttp.ClientSession(fake.url) as session:
        await session.post(JOBS, json=job("a"))
        old = str(fake.resource_version - 1)
        fake.compact()
        [error] = await events(session, JOBS, {"resourceVersion": old}, 1)
    assert error["type"] == "ERROR"
    assert (error["object"]["kind"], error["object"]["code"]) == ("Status", 410)


async def test_a_watch_sees_only_what_its_selector_selects_and_objects_leaving_it(
    fake: FakeApiServer,
):
    selector = {"labelSelector": "app.kubernetes.io/managed-by=nbjobs,tier in (gpu)"}
    async with aiohttp.ClientSession(fake.url) as session:
        since = str(fake.resource_version)
        watching = asyncio.ensure_future(
            events(session, JOBS, {"resourceVersion": since, **selector}, 3)
        )
        await asyncio.sleep(0.1)
        await session.post(JOBS, json=job("cpu", tier="cpu"))  # never selected
        await session.post(JOBS, json=job("gpu", tier="gpu"))
        moved = fake.get("jobs", NAMESPACE, "gpu")
        fake.put("jobs", {**moved, "metadata": {**moved["metadata"], "labels": {"tier": "cpu"}}})
        back = fake.get("jobs", NAMESPACE, "cpu")
        labels = {**back["metadata"]["labels"], "tier": "gpu"}
        fake.put("jobs", {**back, "metadata": {**back["metadata"], "labels": labels}})
        seen = await asyncio.wait_for(watching, 5)
        listed = await (await session.get(JOBS, params=selector)).json()
        # resuming from the start replays history with the same rules
        replay = await events(session, JOBS, {"resourceVersion": since, **selector}, 3)
    expected = [("ADDED", "gpu"), ("DELETED", "gpu"), ("ADDED", "cpu")]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in seen] == expected
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in replay] == expected
    assert [j["metadata"]["name"] for j in listed["items"]] == ["cpu"]


async def test_creates_take_the_create_delay_each_and_overlap(fake: FakeApiServer):
    """As on a real server behind an admission webhook: each create waits, none waits
    for another."""
    fake.create_delay = 0.3
    loop = asyncio.get_running_loop()

    async with aiohttp.ClientSession(fake.url) as session:

        async def create(name: str) -> tuple[int, float]:
            began = loop.time()
            async with session.post(JOBS, json=job(name)) as response:
                return response.status, loop.time() - began

        # the gate keeps them all held until the four are in flight together, which
        # one create waiting for another would never reach (a one-shot window of 0.3 s
        # can be missed by a loaded machine)
        fake.create_gate = asyncio.Event()
        sent = asyncio.gather(*(create(f"j{i}") for i in range(4)))
        await eventually(lambda: fake.creates_in_flight == 4, timeout=60)
        fake.create_gate.set()
        answers = await sent

    assert [status for status, _ in answers] == [201] * 4
    assert all(seconds >= 0.3 for _, seconds in answers)  # each one waited
    assert fake.most_creates_in_flight == 4  # together, not one after another
    assert fake.creates_in_flight == 0
    assert len(fake.list("jobs", NAMESPACE)) == 4


async def test_the_ttl_controller_deletes_a_finished_job_pods_first_whoever_watches(
    fake: FakeApiServer,
):
    async with aiohttp.ClientSession(fake.url) as session:
        created = job("done")
        created["spec"]["ttlSecondsAfterFinished"] = 60
        await session.post(JOBS, json=created)
        pod = fake.start_pod("done", NAMESPACE, node="n")["metadata"]["name"]
        fake.run_pod(pod, NAMESPACE)
        fake.append_log(pod, NAMESPACE, "a line\n")
        since = str(fake.resource_version)
        with pytest.raises(AssertionError, match="has not finished"):
            fake.expire_ttl("done", NAMESPACE)  # the TTL starts when the Job ends
        fake.finish_pod(pod, NAMESPACE, exit_code=0)
        fake.expire_ttl("done", NAMESPACE)
        pods = await events(
            session,
            f"/api/v1/namespaces/{NAMESPACE}/pods",
            {"resourceVersion": since, "timeoutSeconds": "2"},
            2,
        )
        # the Complete condition, the deletion's mark, the deletion
        jobs = await events(session, JOBS, {"resourceVersion": since, "timeoutSeconds": "2"}, 3)
        log = await session.get(f"/api/v1/namespaces/{NAMESPACE}/pods/{pod}/log")
    assert fake.get("jobs", NAMESPACE, "done") is None
    assert fake.pods_of("done", NAMESPACE) == []
    assert [e["type"] for e in pods] == ["MODIFIED", "DELETED"]  # finished, then deleted
    # foreground deletion: the Job is marked first and goes once its pod is gone
    assert [e["type"] for e in jobs] == ["MODIFIED", "MODIFIED", "DELETED"]
    assert jobs[1]["object"]["metadata"]["deletionTimestamp"]
    assert int(jobs[2]["object"]["metadata"]["resourceVersion"]) > int(
        pods[1]["object"]["metadata"]["resourceVersion"]
    )
    assert log.status == 404  # the log went with the pod

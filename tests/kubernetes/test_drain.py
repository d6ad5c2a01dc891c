"""Node maintenance on a cluster, against the fake API server: an admin's drain keeps new
Jobs off the node through their node affinity (the service writes nothing to nodes), tells
the flavor's users how much of it is in maintenance, and an undrain lets jobs land there
again."""

from __future__ import annotations

import time
from typing import Any

from .conftest import NAMESPACE, eventually
from .test_service import settings, start


def excluded_nodes(job: dict[str, Any]) -> list[str]:
    affinity = job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    terms = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    return [
        name
        for term in terms
        for field in term.get("matchFields") or []
        if field["key"] == "metadata.name" and field["operator"] == "NotIn"
        for name in field["values"]
    ]


async def test_a_drained_node_gets_no_new_job_and_its_users_are_told(
    fake, kubeconfig, tmp_path, running_services
):
    for name in ("gpu-0", "gpu-1"):
        fake.add_node(name, {"gpu": "a100"}, {"nvidia.com/gpu": "2"})
    svc = await start(tmp_path, kubeconfig, settings(tmp_path))
    running_services.append(svc)
    await eventually(lambda: len(svc.service.backend.inventory()) == 2)
    ok, detail = svc.service.backend.health()
    assert ok
    assert detail.startswith(f"following namespace {NAMESPACE}: 0 Jobs, 0 pods, 2 nodes")
    assert "last word from the API server" in detail

    async with svc.client("root") as admin:
        r = await admin.post("dashboard/nodes/gpu-1/drain", json={"reason": "driver update"})
    assert r.status_code == 200, r.text
    views = {v["node"]: v for v in r.json()}
    assert (views["gpu-0"]["drained"], views["gpu-1"]["drained"]) == (False, True)
    async with svc.client("ada") as c:
        [flavor] = (await c.get("flavors")).json()
    assert flavor["maintenance"] == "1 of 2 nodes in maintenance"
    assert flavor["free_gpus"] == 2  # gpu-0's two; gpu-1's do not count

    svc.write("ada", "d.ipynb", "1")
    first = await svc.submit("ada", "d.ipynb", "a100")
    job = await eventually(lambda: fake.get("jobs", NAMESPACE, f"nbjobs-{first['id']}"))
    assert excluded_nodes(job) == ["gpu-1"]
    # nothing was written to the nodes: the drain is nbjobs' own
    assert not [r for r in fake.requests if r[2] == "nodes" and r[0] not in ("list", "watch")]

    async with svc.client("root") as admin:
        r = await admin.delete("dashboard/nodes/gpu-1/drain")
    assert r.status_code == 200, r.text
    async with svc.client("ada") as c:
        [flavor] = (await c.get("flavors")).json()
    assert flavor["maintenance"] is None
    second = await svc.submit("ada", "d.ipynb", "a100")
    job = await eventually(lambda: fake.get("jobs", NAMESPACE, f"nbjobs-{second['id']}"))
    assert excluded_nodes(job) == []


async def test_a_watch_silent_for_too_long_makes_the_backend_unhealthy(make_backend, fake):
    backend = make_backend()
    await backend.reconcile(set())
    assert backend.health()[0]
    long_ago = time.monotonic() - backend.watch_timeout - 600
    backend.mirror.heard = {"jobs": long_ago, "pods": time.monotonic()}
    ok, detail = backend.health()
    assert not ok
    assert detail.endswith("the watches may be stuck (check the service's log)")
    # a watch that fails says so, in the API server's words
    backend.mirror.failing["jobs"] = "Kubernetes API 403 Forbidden: jobs is forbidden"
    ok, detail = backend.health()
    assert not ok
    assert detail.startswith("cannot follow jobs in the cluster (Kubernetes API 403")

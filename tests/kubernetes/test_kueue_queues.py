"""Kueue's queues as nbjobs shows them: each queue's GPU quota, what it uses, borrows
from its cohort and lends (estimated); a running job told when its queue borrows; the
admins' overview; and a service that may not read them says so once and goes on."""

from __future__ import annotations

import copy
from typing import Any

from nbjobs.job_service.backends.kueue_queues import queue_uses

from .conftest import NAMESPACE, eventually
from .test_service import running_on_a_pod, settings, start


def cluster_queue(
    name: str,
    nominal: int,
    used: int,
    borrowed: int,
    cohort: str | None = "teaching",
    **limits: Any,
) -> dict[str, Any]:
    gpu = {"name": "nvidia.com/gpu", "nominalQuota": nominal, **limits}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            **({"cohort": cohort} if cohort else {}),
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "nvidia.com/gpu"],
                    "flavors": [
                        {"name": "a100", "resources": [{"name": "cpu", "nominalQuota": 64}, gpu]}
                    ],
                }
            ],
        },
        "status": {
            "flavorsUsage": [
                {
                    "name": "a100",
                    "resources": [
                        {"name": "cpu", "total": "8", "borrowed": "0"},
                        {"name": "nvidia.com/gpu", "total": str(used), "borrowed": str(borrowed)},
                    ],
                }
            ]
        },
    }


def local_queue(name: str, cluster: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"clusterQueue": cluster},
    }


def test_a_cohorts_borrowed_gpus_are_lent_by_the_queues_that_leave_quota_unused():
    clusters = [
        # physics uses 6: its 4 and 2 borrowed
        cluster_queue("physics", 4, 6, 2, borrowingLimit=4),
        # research leaves 6 of 8 unused but lends at most 1
        cluster_queue("research", 8, 2, 0, lendingLimit=1),
        # ml leaves 3 of 4 unused, no limit
        cluster_queue("ml", 4, 1, 0),
        # alone: nothing to lend or borrow
        cluster_queue("solo", 2, 2, 0, cohort=None),
    ]
    locals_ = [local_queue(n, n) for n in ("physics", "research", "ml", "solo")]
    locals_.append(local_queue("orphan", "gone"))  # a LocalQueue whose ClusterQueue is not there
    uses = {u.local_queue: u for u in queue_uses(locals_, clusters, {"nvidia.com/gpu"})}
    assert set(uses) == {"physics", "research", "ml", "solo"}
    physics = uses["physics"]
    assert (physics.nominal, physics.used, physics.borrowed) == (4, 6, 2)
    assert (physics.borrowing_limit, physics.lent) == (4, 0)
    # the 2 borrowed GPUs came from the unused quota that may be lent: 1 (research) and 3 (ml)
    assert (uses["research"].lent, uses["ml"].lent) == (0.5, 1.5)
    assert uses["research"].lending_limit == 1
    assert (uses["solo"].cohort, uses["solo"].lent, uses["solo"].borrowed) == (None, 0, 0)


async def test_a_running_job_on_a_borrowing_queue_is_told_and_admins_see_the_queues(
    fake, kubeconfig, tmp_path, running_services
):
    fake.add_node("gpu-0", {"gpu": "a100"}, {"nvidia.com/gpu": "2"})
    fake.put("clusterqueues", cluster_queue("team-a", 1, 2, 1), "ADDED")
    fake.put("clusterqueues", cluster_queue("lender", 4, 0, 0), "ADDED")
    fake.put("localqueues", local_queue("team-a", "team-a"), "ADDED")
    fake.put("localqueues", local_queue("lender", "lender"), "ADDED")
    svc = await start(tmp_path, kubeconfig, settings(tmp_path, kueue={"queue_name": "team-a"}))
    running_services.append(svc)
    svc.write("ada", "long.ipynb", "import time; time.sleep(3600)")
    job, _ = await running_on_a_pod(svc, fake, "long.ipynb", kueue=True)
    running = await svc.wait(
        "ada", job["id"], lambda j: j["state"] == "running" and j["borrowing"] is not None
    )
    assert running["borrowing"] == (
        "running while its queue team-a uses 1 GPU(s) borrowed from the cohort teaching: "
        "Kueue may take them back for the queue that lent them, and this job would then be "
        "queued again"
    )
    async with svc.client("root") as admin:
        overview = (await admin.get("dashboard/overview")).json()
    queues = {q["local_queue"]: q for q in overview["queues"]}
    assert (queues["team-a"]["borrowed"], queues["team-a"]["used"]) == (1, 2)
    assert queues["lender"]["lent"] == 1
    # the cohort gives the GPU back: the job is no longer told it borrows
    paid_back = copy.deepcopy(fake.get("clusterqueues", None, "team-a"))
    paid_back["status"]["flavorsUsage"][0]["resources"][1].update(total="1", borrowed="0")
    fake.put("clusterqueues", paid_back)
    await svc.wait("ada", job["id"], lambda j: j["borrowing"] is None, timeout=10)


async def test_a_service_that_may_not_read_the_queues_says_so_once_and_runs_jobs(
    fake, kubeconfig, tmp_path, running_services, capfd
):
    fake.forbidden.add("clusterqueues")
    svc = await start(tmp_path, kubeconfig, settings(tmp_path, kueue={"queue_name": "team-a"}))
    running_services.append(svc)
    backend = svc.service.backend
    await eventually(lambda: backend.mirror.kueue_readable is False)  # type: ignore[attr-defined]
    svc.write("ada", "k.ipynb", "1")
    job = await svc.submit("ada", "k.ipynb", "a100")
    seen = await svc.wait("ada", job["id"], lambda j: j["waiting_reason"] is not None)
    assert seen["waiting_reason"] == "waiting for Kueue to admit it (queue team-a)"
    said = [line for line in capfd.readouterr().err.splitlines() if "Kueue's queues" in line]
    assert len(said) == 1  # once, not at every round
    assert "rbac.yaml grants it" in said[0]


def test_kueues_reason_for_a_preemption_in_peoples_words():
    from nbjobs.job_service.backends.kueue_queues import preemption_words

    def workload(*conditions: dict[str, str]) -> dict[str, Any]:
        return {"status": {"conditions": [{"status": "True", **c} for c in conditions]}}

    higher = workload(
        {"type": "Evicted", "reason": "Preempted", "message": "Preempted to accommodate X"},
        {"type": "Preempted", "reason": "InClusterQueue", "message": "Preempted to accommodate X"},
    )
    assert preemption_words([higher]) == (
        "a job of higher priority in its own queue needed the GPUs (Kueue: Preempted to "
        "accommodate X)"
    )
    # an older Kueue: only Evicted, its words as they are
    older = workload({"type": "Evicted", "reason": "Preempted", "message": "Preempted to fit"})
    assert preemption_words([older]) == "Kueue: Preempted to fit"
    # admitted, never evicted: nothing to say
    assert preemption_words([workload({"type": "Admitted", "reason": "Admitted"})]) is None
    assert preemption_words([]) is None

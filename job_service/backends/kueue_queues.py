"""Kueue's queues as nbjobs shows them: each LocalQueue of the jobs' namespace with its
ClusterQueue's GPU quota, what it uses, what it borrows from its cohort and what it lends.

Kueue says per ClusterQueue what it uses (``status.flavorsUsage``: ``total``, and of it
``borrowed``, the part over its nominal quota). What a queue lends is not written
anywhere: the GPUs its cohort's borrowers use came out of the unused quota of the others.
nbjobs shares each cohort's borrowed GPUs among its queues by the quota each leaves
unused (within its ``lendingLimit``): an estimate, and shown as one.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from .base import QueueUse
from .kubernetes_capacity import (
    parse_quantity,
)

#: Kueue's API, as its objects are read (LocalQueues, ClusterQueues)
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta1"
#: the label Kueue puts on a Job's Workload: the Job's uid
KUEUE_JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"


def _quantity(value: Any) -> float:
    try:
        return float(parse_quantity(str(value)))
    except (ValueError, TypeError):
        return 0.0


def _quota(
    cluster_queue: Mapping[str, Any], gpus: Collection[str]
) -> tuple[float, float | None, float | None]:
    """The GPUs of a ClusterQueue's spec: nominal, borrowing limit, lending limit."""
    nominal, borrowing, lending = 0.0, None, None
    for group in (cluster_queue.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for resource in flavor.get("resources") or []:
                if resource.get("name") not in gpus:
                    continue
                nominal += _quantity(resource.get("nominalQuota", 0))
                if resource.get("borrowingLimit") is not None:
                    borrowing = (borrowing or 0.0) + _quantity(resource["borrowingLimit"])
                if resource.get("lendingLimit") is not None:
                    lending = (lending or 0.0) + _quantity(resource["lendingLimit"])
    return nominal, borrowing, lending


def _usage(cluster_queue: Mapping[str, Any], gpus: Collection[str]) -> tuple[float, float]:
    """The GPUs a ClusterQueue uses now, and of them those borrowed."""
    used = borrowed = 0.0
    for flavor in (cluster_queue.get("status") or {}).get("flavorsUsage") or []:
        for resource in flavor.get("resources") or []:
            if resource.get("name") in gpus:
                used += _quantity(resource.get("total", 0))
                borrowed += _quantity(resource.get("borrowed", 0))
    return used, borrowed


def queue_uses(
    local_queues: Iterable[Mapping[str, Any]],
    cluster_queues: Iterable[Mapping[str, Any]],
    gpus: Collection[str],
) -> list[QueueUse]:
    """Each LocalQueue with its ClusterQueue's GPUs (``gpus``: the resource names that
    count as GPUs, e.g. ``nvidia.com/gpu``), by LocalQueue name."""
    by_name = {(cq.get("metadata") or {}).get("name"): cq for cq in cluster_queues}
    # per ClusterQueue: (cohort, nominal, used, borrowed, limits)
    figures: dict[str, tuple[str | None, float, float, float, float | None, float | None]] = {}
    for name, cq in by_name.items():
        if not name:
            continue
        nominal, borrowing, lending = _quota(cq, gpus)
        used, borrowed = _usage(cq, gpus)
        cohort = (cq.get("spec") or {}).get("cohort") or None
        figures[name] = (cohort, nominal, used, borrowed, borrowing, lending)
    lent = _lent(figures)
    uses = []
    for lq in local_queues:
        name = (lq.get("metadata") or {}).get("name")
        cq_name = (lq.get("spec") or {}).get("clusterQueue")
        if not name or cq_name not in figures:
            continue
        cohort, nominal, used, borrowed, borrowing, lending = figures[cq_name]
        uses.append(
            QueueUse(
                local_queue=name,
                cluster_queue=cq_name,
                cohort=cohort,
                nominal=nominal,
                used=used,
                borrowed=borrowed,
                lent=round(lent.get(cq_name, 0.0), 3),
                borrowing_limit=borrowing,
                lending_limit=lending,
            )
        )
    return sorted(uses, key=lambda u: u.local_queue)


def _lent(
    figures: Mapping[str, tuple[str | None, float, float, float, float | None, float | None]],
) -> dict[str, float]:
    """Each cohort's borrowed GPUs shared among its queues by the quota each leaves
    unused and may lend."""
    lent: dict[str, float] = {}
    cohorts: dict[str, list[str]] = {}
    for name, (cohort, *_rest) in figures.items():
        if cohort:
            cohorts.setdefault(cohort, []).append(name)
    for members in cohorts.values():
        borrowed = sum(figures[m][3] for m in members)
        if borrowed <= 0:
            continue
        spare = {}
        for m in members:
            _, nominal, used, own_borrowed, _, lending = figures[m]
            unused = max(0.0, nominal - (used - own_borrowed))
            spare[m] = unused if lending is None else min(unused, lending)
        room = sum(spare.values())
        if room <= 0:
            continue
        for m, free in spare.items():
            lent[m] = min(free, borrowed * free / room)
    return lent


def borrowing_words(use: QueueUse) -> str | None:
    """What a running job of this queue is told while its queue borrows GPUs."""
    if use.borrowed <= 0:
        return None
    cohort = f" {use.cohort}" if use.cohort else ""
    return (
        f"running while its queue {use.local_queue} uses {use.borrowed:g} GPU(s) borrowed "
        f"from the cohort{cohort}: Kueue may take them back for the queue that lent them, "
        "and this job would then be queued again"
    )


#: why Kueue preempted a workload (its ``Preempted`` condition's reason), in people's words
PREEMPTED_BECAUSE = {
    "InCohortReclamation": "another queue of its cohort took back the GPUs it had lent",
    "InCohortReclaimWhileBorrowing": "a queue of its cohort with jobs of higher priority "
    "took the GPUs",
    "InCohortFairSharing": "fair sharing in its cohort gave the GPUs to another queue",
    "InClusterQueue": "a job of higher priority in its own queue needed the GPUs",
}


def preemption_words(workloads: list[Mapping[str, Any]]) -> str | None:
    """What Kueue said when it preempted the workload of a Job (its ``Preempted`` or
    ``Evicted`` condition), as a clause; None when it said nothing we can read."""
    for workload in workloads:
        conditions = (workload.get("status") or {}).get("conditions") or []
        found = {c.get("type"): c for c in conditions if c.get("status") == "True"}
        preempted, evicted = found.get("Preempted"), found.get("Evicted")
        if preempted is None and evicted is None:
            continue
        because = PREEMPTED_BECAUSE.get((preempted or {}).get("reason") or "")
        said = ((preempted or evicted) or {}).get("message") or ""
        if because and said:
            return f"{because} (Kueue: {said})"
        return because or (f"Kueue: {said}" if said else None)
    return None

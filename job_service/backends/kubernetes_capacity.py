"""How many jobs of a flavor fit on a cluster's nodes now, from what the cluster says:
Kubernetes quantities, whether a node takes a pod (its selector, affinity, taints), what
a pod asks for and holds, the free slots per flavor (:func:`free_slots`), and each
node's GPUs and drains as an admin's overview shows them. Pure functions: the backend
lists the nodes and pods and feeds them here."""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from .base import NodeGpus
from .kubernetes_objects import DRAIN_LABEL

# -- reading what the cluster says ---------------------------------------------

_SUFFIXES: dict[str, int | Decimal] = {
    "": 1,
    "m": Decimal("0.001"),
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")


def parse_quantity(value: str | int | float) -> Decimal:
    """A Kubernetes quantity (``4``, ``500m``, ``16Gi``, ``1e3``) as a number (the same
    few texts come back in every pod: each is parsed once)."""
    try:
        return _parse_quantity(value)
    except TypeError:  # not text nor a number (a list in a damaged object)
        raise ValueError(f"{value!r} is not a Kubernetes quantity") from None


@functools.lru_cache(maxsize=1024)
def _parse_quantity(value: str | int | float) -> Decimal:
    match = _QUANTITY.match(str(value).strip())
    if not match or match.group(2) not in _SUFFIXES:
        raise ValueError(f"{value!r} is not a Kubernetes quantity")
    try:
        return Decimal(match.group(1)) * Decimal(_SUFFIXES[match.group(2)])
    except InvalidOperation:
        raise ValueError(f"{value!r} is not a Kubernetes quantity") from None


def _matches_expression(labels: Mapping[str, str], expr: Mapping[str, Any]) -> bool:
    key, op, values = expr.get("key", ""), expr.get("operator"), expr.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return labels.get(key) not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt") and key in labels and values:
        try:
            have, want = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def _tolerates(tolerations: Iterable[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        if t.get("operator") == "Exists":
            if not t.get("key") or t.get("key") == taint.get("key"):
                return True
        elif t.get("key") == taint.get("key") and t.get("value", "") == taint.get("value", ""):
            return True
    return False


def node_accepts(node: Mapping[str, Any], pod_spec: Mapping[str, Any]) -> bool:
    """Whether the scheduler could place this pod spec on the node (labels, taints, cordon)."""
    meta = node.get("metadata") or {}
    labels: dict[str, str] = meta.get("labels") or {}
    fields = {"metadata.name": meta.get("name", "")}
    if (node.get("spec") or {}).get("unschedulable"):
        return False
    for key, value in (pod_spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    tolerations = pod_spec.get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(
            tolerations, taint
        ):
            return False
    required = (
        ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    ).get("nodeSelectorTerms") or []
    if required:
        return any(
            all(_matches_expression(labels, e) for e in term.get("matchExpressions") or [])
            and all(_matches_expression(fields, e) for e in term.get("matchFields") or [])
            for term in required
        )
    return True


def pod_requests(pod: Mapping[str, Any]) -> dict[str, Decimal]:
    """What a pod holds on its node: its containers' requests (limits where none given)."""
    total: dict[str, Decimal] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        asked = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, value in asked.items():
            try:
                total[name] = total.get(name, Decimal(0)) + parse_quantity(value)
            except ValueError:
                continue
    return total


def pod_holds_resources(pod: Mapping[str, Any]) -> bool:
    """A pod that is not finished holds what it requested."""
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


@dataclass
class Capacity:
    """How many more jobs of a flavor fit now, and how many of its GPUs are free."""

    jobs: int
    #: free units of the flavor's GPU resource on its nodes (0 for a CPU flavor)
    gpus_free: int
    #: nodes that could ever take the flavor
    nodes: int
    #: the most GPUs of the flavor's resource any one of those nodes has
    most_gpus_on_a_node: int
    #: all units of the flavor's GPU resource on those nodes, free or not
    gpus_total: int = 0


def free_slots(
    pod_spec: Mapping[str, Any],
    requests: Mapping[str, str],
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    gpu_resource: str | None,
) -> Capacity:
    """How many pods asking for ``requests`` fit on the nodes that accept ``pod_spec``.

    Each node's allocatable minus what the unfinished pods bound to it request;
    ``pods`` pending without a node, that would land on these nodes, are taken
    off the total (they are about to take their share).
    """
    nodes = list(nodes)
    # A resource no node lists (HAMi's nvidia.com/gpumem-percentage and gpucores) is
    # counted by its engine's scheduler, not by node allocatable: it limits nothing here
    listed = {
        name for node in nodes for name in ((node.get("status") or {}).get("allocatable") or {})
    }
    asked = {
        name: parse_quantity(v)
        for name, v in requests.items()
        if name in listed or name in ("cpu", "memory")
    }
    asked["pods"] = Decimal(1)
    used: dict[str, dict[str, Decimal]] = {}
    pending: list[dict[str, Decimal]] = []
    for pod in pods:
        if not pod_holds_resources(pod):
            continue
        node_name = (pod.get("spec") or {}).get("nodeName")
        held = pod_requests(pod)
        held["pods"] = Decimal(1)
        if node_name:
            on_node = used.setdefault(node_name, {})
            for name, value in held.items():
                on_node[name] = on_node.get(name, Decimal(0)) + value
        elif all(held.get(name, Decimal(0)) >= value for name, value in asked.items()):
            pending.append(held)
    jobs = gpus_free = gpus_total = count = most = 0
    for node in nodes:
        if not node_accepts(node, pod_spec):
            continue
        count += 1
        name = (node.get("metadata") or {}).get("name", "")
        allocatable = {
            k: parse_quantity(v)
            for k, v in ((node.get("status") or {}).get("allocatable") or {}).items()
        }
        free = {k: v - used.get(name, {}).get(k, Decimal(0)) for k, v in allocatable.items()}
        if gpu_resource:
            most = max(most, int(allocatable.get(gpu_resource, 0)))
            gpus_total += int(allocatable.get(gpu_resource, 0))
            gpus_free += max(0, int(free.get(gpu_resource, 0)))
        fits = [int(free.get(k, Decimal(0)) // v) if v > 0 else 10**6 for k, v in asked.items()]
        jobs += max(0, min(fits))
    jobs = max(0, jobs - len(pending))
    if gpu_resource:
        gpu_need = asked.get(gpu_resource, Decimal(0))
        gpus_free = max(0, gpus_free - int(gpu_need) * len(pending))
    return Capacity(
        jobs=jobs,
        gpus_free=gpus_free,
        nodes=count,
        most_gpus_on_a_node=most,
        gpus_total=gpus_total,
    )


#: container waiting reasons that mean the job can never start as it is


# -- the nodes as an admin sees them ----------------------------------------------


def node_off(node: Mapping[str, Any], drained: Collection[str]) -> bool:
    """No new job lands on ``node``: drained by an admin (``drained``, or labelled
    nbjobs.io/drain=true, which the jobs' affinity keeps off) or cordoned."""
    meta = node.get("metadata") or {}
    return (
        meta.get("name", "") in drained
        or (meta.get("labels") or {}).get(DRAIN_LABEL) == "true"
        or bool((node.get("spec") or {}).get("unschedulable"))
    )


def nodes_off(
    nodes: Iterable[Mapping[str, Any]],
    pod_spec: Mapping[str, Any],
    gpu_resource: str | None,
    drained: Collection[str],
) -> tuple[int, int]:
    """Of the nodes a pod of ``pod_spec`` may use (with GPUs of ``gpu_resource``, when
    given), were none cordoned: how many no new job lands on now, and how many in all."""
    mine = [
        node
        for node in nodes
        if node_accepts(
            {**node, "spec": {**node.get("spec", {}), "unschedulable": False}}, pod_spec
        )
        and (
            gpu_resource is None
            or parse_quantity(
                ((node.get("status") or {}).get("allocatable") or {}).get(gpu_resource, 0)
            )
            > 0
        )
    ]
    return sum(node_off(n, drained) for n in mine), len(mine)


def node_gpus(
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    resources: Collection[str],
    drained: Collection[str],
) -> list[NodeGpus]:
    """Each node's GPUs of ``resources`` and what ``pods`` hold of them. Where a node
    splits its GPUs into more units than it has GPUs (HAMi, time-slicing) and GPU
    feature discovery labels the count, units are turned into GPUs."""
    held: dict[tuple[str, str], float] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or not pod_holds_resources(pod):
            continue
        asked = pod_requests(pod)
        part = ((pod.get("metadata") or {}).get("annotations") or {}).get("gpu-fraction")
        for resource in resources:
            units = float(asked.get(resource, 0))
            if resource == "nvidia.com/gpu" and part:
                with contextlib.suppress(ValueError):
                    units += float(part)
            if units:
                held[(node, resource)] = held.get((node, resource), 0.0) + units
    found = []
    for node in nodes:
        meta = node.get("metadata") or {}
        name = meta.get("name", "")
        labels = meta.get("labels") or {}
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        for resource in sorted(resources):
            units = float(parse_quantity(allocatable.get(resource, 0)))
            if units <= 0:
                continue
            total, used = units, held.get((name, resource), 0.0)
            count = labels.get("nvidia.com/gpu.count", "")
            if resource == "nvidia.com/gpu" and count.isdigit() and 0 < int(count) < units:
                total, used = float(count), used * int(count) / units
            gpu_type = resource.split("/", 1)[-1]
            if resource == "nvidia.com/gpu":
                gpu_type = labels.get("nvidia.com/gpu.product", "GPU")
            off = node_off(node, drained)
            found.append(NodeGpus(name, gpu_type, resource, total, min(used, total), drained=off))
    return found

"""Kubernetes objects for nbjobs' jobs, built by pure functions (no API calls here).

:func:`make_job` turns one job (a :class:`LaunchSpec`), the storage rules and the
backend's settings into a ``batch/v1`` Job as a plain dict. The functions below
it read what the cluster says back: how many jobs of a flavor fit on its nodes
now (:func:`free_slots`) and what a Job and its pod mean for a person
(:func:`job_verdict`). The backend (``kubernetes.py``) is a thin layer that
sends these dicts and feeds these functions.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from decimal import Decimal, InvalidOperation
from pathlib import Path, PurePosixPath
from typing import Any

from nbjobs.job_runner import RANK_VARIABLES, rendezvous_env

from nbjobs.config import (
    Flavor,
    KubernetesBackendConfig,
    KueueConfig,
    LimitsConfig,
    StorageConfig,
    TelemetryConfig,
)
from nbjobs.engines import (
    DEFAULT_SCHEDULER,
    KAI_QUEUE_LABEL,
    KUEUE_QUEUE_LABEL,
    VOLCANO_QUEUE_ANNOTATION,
    EngineFields,
    engine_fields,
    engine_title,
)
from nbjobs.models import NODE_SEPARATOR
from nbjobs.storage import escape_username, user_folder, user_subpath

from .base import LaunchSpec

#: set on every Job and pod nbjobs creates; the backend lists and watches by it
MANAGED_BY = {"app.kubernetes.io/managed-by": "nbjobs"}
MANAGED_SELECTOR = "app.kubernetes.io/managed-by=nbjobs"
JOB_ID_LABEL = "nbjobs.io/job-id"
FLAVOR_LABEL = "nbjobs.io/flavor"
#: on the Job of a job the cluster disrupted and nbjobs put back in the queue: 1, 2, …
ATTEMPT_LABEL = "nbjobs.io/attempt"
OWNER_LABEL = "nbjobs.io/owner"
#: the user name as written (labels cannot hold every name)
OWNER_ANNOTATION = "nbjobs.io/owner"
#: a node labelled ``nbjobs.io/drain=true`` gets no new jobs (running ones finish)
DRAIN_LABEL = "nbjobs.io/drain"
KUEUE_PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
VOLUME_NAME = "nbjobs-home"
CONTAINER_NAME = "notebook"
#: a multi-node job as a JobSet: its API, and the one replicated Job of its ranks
JOBSET_GROUP, JOBSET_VERSION = "jobset.x-k8s.io", "v1alpha2"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
RANKS_JOB = "node"
#: where an Indexed Job's pod finds its index (its rank), as the Job controller writes it
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
#: the port rank 0 listens on for the others (torchrun's default)
RENDEZVOUS_PORT = 29500

_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


class ManifestError(ValueError):
    """The settings cannot make a Job; the message says which setting to change."""


def job_name(job_id: str, attempt: int = 0) -> str:
    """The Job's name: derived from the job id (and the attempt, for a job the cluster
    disrupted and nbjobs re-queued) only, so a retried create cannot make two."""
    return f"nbjobs-{job_id}" if not attempt else f"nbjobs-{job_id}-r{attempt}"


def jobset_child(jobset: str) -> str:
    """The name of the Job the JobSet controller makes for a JobSet's ranks (its one
    replicated Job, index 0): the Job nbjobs follows for a JobSet job."""
    return f"{jobset}-{RANKS_JOB}-0"


def jobset_parent(name: str) -> str | None:
    """The JobSet whose ranks' Job ``name`` is (None: a Job nbjobs made itself)."""
    suffix = f"-{RANKS_JOB}-0"
    return name.removesuffix(suffix) if name.endswith(suffix) else None


def job_name_of(labels: Mapping[str, str]) -> str | None:
    """The Job name that the labels of a Job or pod nbjobs made point to."""
    job_id = labels.get(JOB_ID_LABEL)
    if job_id is None:
        return None
    try:
        attempt = int(labels.get(ATTEMPT_LABEL, "0"))
    except ValueError:
        return None
    return job_name(job_id, attempt)


def owner_label(user: str) -> str:
    """A label value naming the user: the escaped name, or a digest when that does not fit."""
    escaped = escape_username(user)
    if _LABEL_VALUE.match(escaped):
        return escaped
    return "h-" + hashlib.sha256(user.encode()).hexdigest()[:20]


def pod_path(storage: StorageConfig, user: str, path: Path) -> str:
    """Where a file of the user's folder (as the service sees it) is inside the job pod."""
    folder = user_folder(storage, user)
    try:
        relative = Path(path).relative_to(folder)
    except ValueError:
        raise ManifestError(
            f"{path} is not inside {user!r}'s folder {folder}; "
            "jobs can only use files on the shared storage"
        ) from None
    return str(PurePosixPath(storage.mount_path) / PurePosixPath(relative.as_posix()))


def runner_command(
    spec: LaunchSpec,
    storage: StorageConfig,
    settings: KubernetesBackendConfig,
    limits: LimitsConfig | None = None,
    log_mode: int = 0o600,
    telemetry: TelemetryConfig | None = None,
) -> list[str]:
    """The runner's command line in the pod (the same CLI the local backend runs).

    The runner writes the job's log into the job's folder itself (``--log-file``, made
    with ``log_mode``): the log is there when the pod is gone, whether or not the job
    service was following it. ``limits`` (nbjobs.yaml's) bound what it keeps;
    ``telemetry`` (nbjobs.yaml's) says how often it samples the pod's GPUs, CPU and
    memory into the status file.
    """
    return spec.runner_command(
        settings.python,
        lambda path: pod_path(storage, spec.user, path),
        limits or LimitsConfig(),
        telemetry or TelemetryConfig(),
        log_mode=log_mode,
    )


def job_labels(spec: LaunchSpec) -> dict[str, str]:
    """Labels naming the job, its flavor and its owner (on the Job and its pod)."""
    labels = {
        **MANAGED_BY,
        JOB_ID_LABEL: spec.job_id,
        FLAVOR_LABEL: spec.flavor.name,
        OWNER_LABEL: owner_label(spec.user),
    }
    if spec.attempt:
        labels[ATTEMPT_LABEL] = str(spec.attempt)
    return labels


def flavor_engine(
    flavor: Flavor, queue: str | None = None, kueue: KueueConfig | None = None
) -> EngineFields:
    """The fields the cluster's engines read for a job of ``flavor`` (see
    :mod:`nbjobs.engines`); ``queue``: the job's class's queue, if it has one."""
    chosen = queue or flavor.queue or (kueue.queue_name if kueue is not None else None)
    return engine_fields(
        gpus=flavor.gpus,
        gpu_resource=flavor.gpu_resource,
        fraction=flavor.fraction,
        gpu_sharing=flavor.gpu_sharing,
        scheduler=flavor.scheduler,
        resources={k: v for k, v in flavor.resources.items() if v is not None},
        labels=flavor.labels,
        annotations=flavor.annotations,
        queue=chosen,
        kueue=kueue is not None,
    )


def flavor_resources(flavor: Flavor) -> dict[str, str]:
    """What one job of the flavor asks for: CPU, memory, and its GPU as its engine wants
    it (a GPU resource, a MIG slice, HAMi's memory and cores, nothing for KAI)."""
    resources: dict[str, str] = {}
    if flavor.cpu is not None:
        resources["cpu"] = flavor.cpu
    if flavor.memory is not None:
        resources["memory"] = flavor.memory
    resources.update(flavor_engine(flavor).resources)
    return resources


def node_affinity(
    affinity: Mapping[str, Any] | None, drained_nodes: Iterable[str]
) -> dict[str, Any]:
    """The flavor's affinity with the drain rules added to every required node term.

    Required node terms are alternatives (ORed), so the exclusions go into each.
    """
    result = copy.deepcopy(dict(affinity or {}))
    required = result.setdefault("nodeAffinity", {}).setdefault(
        "requiredDuringSchedulingIgnoredDuringExecution", {}
    )
    terms = required.get("nodeSelectorTerms") or [{}]
    drained = sorted(set(drained_nodes))
    for term in terms:
        term.setdefault("matchExpressions", []).append(
            {"key": DRAIN_LABEL, "operator": "NotIn", "values": ["true"]}
        )
        if drained:
            term.setdefault("matchFields", []).append(
                {"key": "metadata.name", "operator": "NotIn", "values": drained}
            )
    required["nodeSelectorTerms"] = terms
    return result


def rank_env(nodes: int, master_addr: str) -> list[dict[str, Any]]:
    """The rendezvous variables of every pod of a multi-node job (see
    :func:`nbjobs.job_runner.rendezvous_env`): the same for all, but the rank, which each
    pod reads from its completion index through the downward API."""
    from_index = {"fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}}
    values = rendezvous_env(0, nodes, master_addr, RENDEZVOUS_PORT)
    return [
        {"name": name, "valueFrom": from_index}
        if name in RANK_VARIABLES
        else {"name": name, "value": value}
        for name, value in sorted(values.items())
    ]


def make_job(
    spec: LaunchSpec,
    storage: StorageConfig,
    settings: KubernetesBackendConfig,
    limits: LimitsConfig | None = None,
    log_mode: int = 0o600,
    telemetry: TelemetryConfig | None = None,
    drained: Iterable[str] = (),
) -> dict[str, Any]:
    """The ``batch/v1`` Job that runs one nbjobs job (``limits``, ``log_mode`` and
    ``telemetry``: see :func:`runner_command`; ``drained``: nodes admins drained besides
    nbjobs.yaml's ``drained_nodes``, which it may not land on)."""
    flavor = spec.flavor
    image = flavor.image or settings.default_image
    if not image:
        raise ManifestError(
            f"flavor {flavor.name!r} names no image and backend.kubernetes.default_image is "
            "not set in nbjobs.yaml; set one of them to an image with nbjobs installed"
        )
    if storage.volume is None:
        raise ManifestError(
            "nbjobs.yaml storage.volume is not set; give the shared volume, e.g. "
            "{nfs: {server: nfs.example.org, path: /export/home}}"
        )
    if storage.uid == 0:
        raise ManifestError("storage.uid is 0 (root); jobs run as the user, never as root")
    labels = job_labels(spec)
    engine = flavor_engine(flavor, spec.queue, settings.kueue)
    resources = flavor_resources(flavor)
    env = [{"name": k, "value": v} for k, v in sorted(flavor.env.items())]
    env.append({"name": "NBJOBS_JOB_ID", "value": spec.job_id})
    if not flavor.gpus:
        # On a GPU node the NVIDIA runtime would otherwise hand a CPU job every GPU.
        env += [
            {"name": "CUDA_VISIBLE_DEVICES", "value": ""},
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"},
        ]
    identity: dict[str, Any] = {"runAsNonRoot": True}
    if storage.uid is not None:
        identity["runAsUser"] = storage.uid
    if storage.gid is not None:
        identity["runAsGroup"] = storage.gid
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": image,
        "command": runner_command(spec, storage, settings, limits, log_mode, telemetry),
        "workingDir": pod_path(storage, spec.user, spec.cwd),
        "env": env,
        "resources": {"requests": dict(resources), "limits": dict(resources)},
        "volumeMounts": [
            {
                "name": VOLUME_NAME,
                "mountPath": storage.mount_path,
                "subPath": user_subpath(storage, spec.user),
            }
        ],
        "securityContext": {
            **identity,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    if settings.image_pull_policy:
        container["imagePullPolicy"] = settings.image_pull_policy
    pod_security: dict[str, Any] = {**identity, "seccompProfile": {"type": "RuntimeDefault"}}
    if storage.gid is not None:
        pod_security["fsGroup"] = storage.gid
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": settings.termination_grace_seconds,
        "securityContext": pod_security,
        "containers": [container],
        "volumes": [{"name": VOLUME_NAME, **copy.deepcopy(storage.volume)}],
        "affinity": node_affinity(flavor.affinity, [*settings.drained_nodes, *drained]),
    }
    if settings.service_account:
        pod_spec["serviceAccountName"] = settings.service_account
    if flavor.node_selector:
        pod_spec["nodeSelector"] = dict(flavor.node_selector)
    if flavor.tolerations:
        pod_spec["tolerations"] = copy.deepcopy(flavor.tolerations)
    if flavor.priority_class:
        pod_spec["priorityClassName"] = flavor.priority_class
    if engine.scheduler_name:
        pod_spec["schedulerName"] = engine.scheduler_name
    # the flavor's own labels first: nbjobs' labels are never overridden (the config
    # refuses reserved keys; this order holds should one slip through)
    job_labels_ = {**engine.job_labels, **labels}
    template_meta: dict[str, Any] = {"labels": {**engine.pod_labels, **labels}}
    if engine.pod_annotations:
        template_meta["annotations"] = dict(engine.pod_annotations)
    job_spec: dict[str, Any] = {
        "backoffLimit": 0,
        "ttlSecondsAfterFinished": settings.ttl_seconds_after_finished,
        "template": {"metadata": template_meta, "spec": pod_spec},
    }
    if spec.time_limit:
        grace = (limits or LimitsConfig()).time_limit_grace or 0
        job_spec["activeDeadlineSeconds"] = math.ceil(spec.time_limit + grace)
    if settings.kueue is not None:
        if settings.kueue.priority_class:
            job_labels_[KUEUE_PRIORITY_LABEL] = settings.kueue.priority_class
        job_spec["suspend"] = True
    name = job_name(spec.job_id, spec.attempt)
    if flavor.nodes > 1:
        # one pod per rank, each its index; any rank failing fails the job (backoffLimit
        # 0: the Job controller stops the others), all succeeding completes it
        nodes = flavor.nodes
        job_spec.update(completionMode="Indexed", completions=nodes, parallelism=nodes)
        if settings.multi_node == "jobset":
            master = f"{jobset_child(name)}-0.{name}"  # the JobSet names its pods' hosts
        else:
            master = f"{name}-0.{name}"  # the Indexed Job's pod 0, in the Service of its name
            pod_spec["subdomain"] = name
        env += rank_env(nodes, master)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": settings.namespace,
            "labels": job_labels_,
            "annotations": {**engine.job_annotations, OWNER_ANNOTATION: spec.user},
        },
        "spec": job_spec,
    }


def make_rank_service(job: Mapping[str, Any], uid: str | None = None) -> dict[str, Any]:
    """The headless Service that names the pods of a multi-node Indexed Job
    (``nbjobs-ID-0.nbjobs-ID``: rank 0, where the others meet), owned by the Job (``uid``:
    the created Job's) so that it goes when the Job goes, however the Job goes."""
    meta = job["metadata"]
    service: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": {k: v for k, v in meta["labels"].items() if k.startswith("nbjobs.io/")}
            | MANAGED_BY,
        },
        "spec": {
            "clusterIP": "None",
            # the Job controller labels every pod of the Job with its name
            "selector": {"job-name": meta["name"]},
            # ranks find each other before they are ready (there is no readiness probe)
            "publishNotReadyAddresses": True,
            "ports": [{"name": "rendezvous", "port": RENDEZVOUS_PORT, "protocol": "TCP"}],
        },
    }
    if uid:
        service["metadata"]["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"], "uid": uid}
        ]
    return service


def make_jobset(job: Mapping[str, Any]) -> dict[str, Any]:
    """A multi-node job's Indexed Job (:func:`make_job`) as a JobSet of one replicated
    Job: the JobSet controller makes the Job (``NAME-node-0``) and the headless Service
    that names its pods; Kueue admits the JobSet whole (it holds the queue's label and
    ``suspend``), KAI Scheduler gangs its pods. No restart: a rank that fails fails it."""
    job = copy.deepcopy(dict(job))
    meta = job["metadata"]
    job_spec = job["spec"]
    suspend = job_spec.pop("suspend", None)
    ttl = job_spec.pop("ttlSecondsAfterFinished", None)
    spec: dict[str, Any] = {
        "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
        "failurePolicy": {"maxRestarts": 0},
        "successPolicy": {"operator": "All"},
        "replicatedJobs": [
            {
                "name": RANKS_JOB,
                "replicas": 1,
                # the Job the controller makes carries these (its owner: adopt())
                "template": {
                    "metadata": {
                        "labels": dict(meta["labels"]),
                        "annotations": dict(meta.get("annotations") or {}),
                    },
                    "spec": job_spec,
                },
            }
        ],
    }
    if suspend is not None:
        spec["suspend"] = suspend
    if ttl is not None:
        spec["ttlSecondsAfterFinished"] = ttl
    return {
        "apiVersion": f"{JOBSET_GROUP}/{JOBSET_VERSION}",
        "kind": "JobSet",
        "metadata": meta,
        "spec": spec,
    }


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
_CANNOT_START = {
    "ErrImagePull": "could not pull image",
    "ImagePullBackOff": "could not pull image",
    "InvalidImageName": "the image name is not valid",
    "ErrImageNeverPull": "the image is not on the node and imagePullPolicy is Never",
    "CreateContainerConfigError": "the container could not be configured",
    "CreateContainerError": "the container could not be created",
}

_DISRUPTIONS = {
    "PreemptionByScheduler": "preempted by a higher-priority pod",
    "EvictionByEvictionAPI": "evicted (the node is being drained or scaled down)",
    "DeletionByTaintManager": "stopped because its node was tainted NoExecute",
    "DeletionByPodGC": "lost with its node",
    "TerminationByKubelet": "stopped by the node's kubelet",
}


@dataclass
class Verdict:
    """What a Job and its pod mean now, in nbjobs' terms.

    ``done`` jobs have ended; ``state`` then overrides what the runner's exit
    code says (None: let the status file and exit code decide). A job that is
    not done may be ``waiting`` in the cluster (a sentence says for what).
    """

    done: bool = False
    state: str | None = None
    exit_code: int | None = None
    message: str | None = None
    #: the job cannot start as it is: the backend should delete its Job
    stuck: bool = False
    waiting: str | None = None
    running: bool = False
    node: str | None = None
    #: the cluster stopped it for reasons of its own (eviction, preemption, a lost node):
    #: not the notebook's fault, so the flavor may put it back in the queue
    disrupted: bool = False
    #: when it started and ended, as the cluster says (the container's start, the Job's
    #: completion), not when the service noticed; None when the cluster does not say
    started_at: datetime | None = None
    finished_at: datetime | None = None


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind and cond.get("status") == "True":
            return cond
    return None


def _container_statuses(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    status = pod.get("status") or {}
    return list(status.get("initContainerStatuses") or []) + list(
        status.get("containerStatuses") or []
    )


def _memory_limit(pod: Mapping[str, Any]) -> str | None:
    for container in (pod.get("spec") or {}).get("containers") or []:
        limit = ((container.get("resources") or {}).get("limits") or {}).get("memory")
        if limit:
            return str(limit)
    return None


def waiting_for(flavor: Flavor, capacity: Capacity | None) -> str:
    """The sentence for a job no node can take now."""
    selector = ", ".join(f"{k}={v}" for k, v in sorted(flavor.node_selector.items()))
    where = f"on nodes with {selector}" if selector else "on any node"
    free = f" ({capacity.gpus_free} free)" if capacity is not None else ""
    if flavor.gpus:
        return f"waiting for {flavor.gpus} × {flavor.gpu_resource} {where}{free}"  # noqa: RUF001
    asked = " and ".join(
        f"{v} {k}" for k, v in flavor_resources(flavor).items() if k in ("cpu", "memory")
    )
    return f"waiting for room for {asked or 'one more pod'} {where}"


#: how long a pod may wait for its scheduler's first word before nbjobs says that no
#: scheduler of that name seems to run
SCHEDULER_SILENT_AFTER = 60.0


def engine_holds(pod: Mapping[str, Any]) -> bool:
    """Whether a scheduler other than Kubernetes' own holds the pod unplaced."""
    engine = (pod.get("spec") or {}).get("schedulerName")
    return (
        (pod.get("status") or {}).get("phase") == "Pending"
        and not (pod.get("spec") or {}).get("nodeName")
        and bool(engine)
        and engine != DEFAULT_SCHEDULER
        and "deletionTimestamp" not in (pod.get("metadata") or {})
    )


def newest_warning(events: Iterable[Mapping[str, Any]]) -> str | None:
    """The message of the newest Warning among ``events`` (core/v1 Events), or None."""

    def when(event: Mapping[str, Any]) -> str:
        # a series' last time, else the event's own, else when the object was made
        return (
            (event.get("series") or {}).get("lastObservedTime")
            or event.get("lastTimestamp")
            or event.get("eventTime")
            or (event.get("metadata") or {}).get("creationTimestamp")
            or ""
        )

    warnings = [
        e for e in events if e.get("type") == "Warning" and (e.get("message") or e.get("reason"))
    ]
    if not warnings:
        return None
    newest = max(warnings, key=when)
    return str(newest.get("message") or newest.get("reason"))


def engine_waiting(
    pod: Mapping[str, Any],
    engine: str,
    scheduled: Mapping[str, Any] | None,
    now: datetime | None = None,
    said: str | None = None,
) -> str:
    """Why a pod another scheduler (KAI, Volcano, HAMi's) holds has not started: that
    scheduler's name and queue, and its own words from the pod's PodScheduled condition,
    else from its latest warning event (``said``); if it has said nothing for a while,
    that it may not be running at all."""
    meta = pod.get("metadata") or {}
    queue = (meta.get("labels") or {}).get(KAI_QUEUE_LABEL) or (meta.get("annotations") or {}).get(
        VOLCANO_QUEUE_ANNOTATION
    )
    text = f"queued by {engine_title(engine)}" + (f", queue {queue}" if queue else "")
    if scheduled is not None and scheduled.get("status") == "False":
        said = scheduled.get("message") or scheduled.get("reason") or said
        return f"{text}: {said}" if said else text
    if said:
        return f"{text}: {said}"
    created = _timestamp(meta.get("creationTimestamp"))
    now = now or datetime.now(timezone.utc)
    if created is not None and (now - created).total_seconds() > SCHEDULER_SILENT_AFTER:
        waited = max(1, round((now - created).total_seconds() / 60))
        return (
            f"{text}: no scheduler named {engine} has looked at it in {waited} min; is "
            f"{engine_title(engine)} installed and running? Ask your admin"
        )
    return text


def _pod_failure(pod: Mapping[str, Any]) -> tuple[str | None, int | None, bool]:
    """Why a pod ended badly, if the cluster says more than an exit code; the code; and
    whether the cluster stopped it for reasons of its own (evicted, preempted, node lost)."""
    status = pod.get("status") or {}
    node = (pod.get("spec") or {}).get("nodeName")
    exit_code = None
    for cs in _container_statuses(pod):
        terminated = (cs.get("state") or {}).get("terminated")
        if not terminated:
            continue
        exit_code = terminated.get("exitCode")
        if terminated.get("reason") == "OOMKilled":
            limit = _memory_limit(pod)
            if limit:
                return f"out of memory (limit {limit})", exit_code, False
            text = "out of memory (the flavor sets no memory limit; the node ran out)"
            return text, exit_code, False
    disruption = _condition(pod, "DisruptionTarget")
    if disruption is not None:
        reason = disruption.get("reason") or "Disrupted"
        what = _DISRUPTIONS.get(reason, "stopped by the cluster")
        detail = disruption.get("message") or ""
        on = f" on node {node}" if node else ""
        text = f"the job's pod was {what}{on} ({reason}{': ' + detail if detail else ''})"
        return text + "; re-run it", exit_code, True
    if status.get("reason") == "Evicted":
        on = f" from node {node}" if node else ""
        detail = status.get("message") or "no reason given"
        return f"the job's pod was evicted{on}: {detail}; re-run it", exit_code, True
    return None, exit_code, False


def pods_by_rank(
    job: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]
) -> dict[int, Mapping[str, Any]]:
    """The newest pod of each rank of a multi-node (Indexed, several completions) Job, by
    its completion index; empty for a Job of one pod."""
    spec = job.get("spec") or {}
    if spec.get("completionMode") != "Indexed" or (spec.get("completions") or 1) < 2:
        return {}
    ranks: dict[int, Mapping[str, Any]] = {}
    for pod in sorted(pods, key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or ""):
        rank = _rank_of(pod)
        if rank is not None:
            ranks[rank] = pod
    return ranks


def _rank_of(pod: Mapping[str, Any]) -> int | None:
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(COMPLETION_INDEX)
    return int(text) if isinstance(text, str) and text.isdigit() else None


def _node_of(pod: Mapping[str, Any]) -> str | None:
    return (pod.get("spec") or {}).get("nodeName")


def _finished_at(pod: Mapping[str, Any]) -> str:
    for cs in _container_statuses(pod):
        terminated = (cs.get("state") or {}).get("terminated") or {}
        if terminated.get("finishedAt"):
            return str(terminated["finishedAt"])
    return "~"  # not ended: after every time


def _telling_pod(ranks: Mapping[int, Mapping[str, Any]]) -> Mapping[str, Any]:
    """The rank's pod that says most of a multi-node job: the first that failed (by its
    container's end; a tie goes to the lower rank), else the first still pending, else
    rank 0's."""
    failed = [
        (_finished_at(p), rank, p)
        for rank, p in ranks.items()
        if (p.get("status") or {}).get("phase") == "Failed"
    ]
    if failed:
        return min(failed, key=lambda item: item[:2])[2]
    pending = [
        (rank, p) for rank, p in ranks.items() if (p.get("status") or {}).get("phase") == "Pending"
    ]
    if pending:
        return min(pending, key=lambda item: item[0])[1]
    return ranks[min(ranks)]


def job_verdict(
    job: Mapping[str, Any] | None,
    pods: Iterable[Mapping[str, Any]],
    flavor: Flavor | None,
    capacity: Capacity | Callable[[], Capacity | None] | None = None,
    engine_said: str | None = None,
) -> Verdict:
    """Map a Job (None: it is gone) and its pods to what a person should be told,
    with the cluster's own times of its start and end; ``engine_said`` is the latest
    warning event of the engine that holds its pod, if any. ``capacity`` may be a
    function, asked only for a job whose pod no node takes now (its words say how many
    GPUs are free): working it out for every followed job at every change of the
    cluster was most of the service's time in a burst of 200 starts."""
    pods = list(pods)
    verdict = _job_verdict(job, pods, flavor, capacity, engine_said)
    if job is not None:
        verdict.started_at, verdict.finished_at = cluster_times(job, pods)
    return verdict


def cluster_times(
    job: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]
) -> tuple[datetime | None, datetime | None]:
    """When the job's notebook started and ended, as Kubernetes recorded it.

    Start: the runner container's start (running or terminated ``startedAt``) of
    the newest pod, else the Job's ``startTime``. End, for a Job that ended: its
    ``completionTime``, else its Failed condition's ``lastTransitionTime``, else the
    container's ``finishedAt``.
    """
    newest = sorted(
        pods, key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or "", reverse=True
    )
    started = finished = None
    for cs in _container_statuses(newest[0]) if newest else []:
        state = cs.get("state") or {}
        for phase in ("running", "terminated"):
            if state.get(phase):
                started = started or state[phase].get("startedAt")
                if phase == "terminated":
                    finished = state[phase].get("finishedAt")
    status = job.get("status") or {}
    started = started or status.get("startTime")
    end = status.get("completionTime")
    failed = _condition(job, "Failed")
    if end is None and failed is not None:
        end = failed.get("lastTransitionTime")
    if end is None and (failed is not None or _condition(job, "Complete") is not None):
        end = finished
    return _timestamp(started), _timestamp(end)


def _timestamp(value: Any) -> datetime | None:
    """A Kubernetes time (RFC 3339, ``2026-11-25T09:30:00Z``) as an aware datetime."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _job_verdict(
    job: Mapping[str, Any] | None,
    pods: list[Mapping[str, Any]],
    flavor: Flavor | None,
    capacity: Capacity | Callable[[], Capacity | None] | None,
    engine_said: str | None = None,
) -> Verdict:
    if job is None:
        return Verdict(
            done=True,
            state="failed",
            message="the job's Kubernetes Job was deleted outside nbjobs; re-run it",
        )
    pods = sorted(
        pods, key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or "", reverse=True
    )
    pod = pods[0] if pods else None
    node = (pod.get("spec") or {}).get("nodeName") if pod else None
    ranks = pods_by_rank(job, pods)
    if ranks:
        # a multi-node job: the pod that tells its story (the first to fail, else one
        # still waiting, else rank 0), and every node its ranks run on
        pod = _telling_pod(ranks)
        node = (
            NODE_SEPARATOR.join(
                dict.fromkeys(n for _, p in sorted(ranks.items()) if (n := _node_of(p)))
            )
            or None
        )
    failed = _condition(job, "Failed")
    if (
        failed is not None
        and failed.get("reason") != "DeadlineExceeded"
        and ranks
        and pod is not None
        and _rank_of(pod) not in (None, 0)
    ):
        # another rank than 0 failed: rank 0 was stopped for it (its status file says
        # cancelled), so the job's end is that rank's
        message, code, disrupted = _pod_failure(pod)
        rank = _rank_of(pod)
        what = message or (f"its runner exited with code {code}" if code is not None else None)
        return Verdict(
            done=True,
            state="failed",
            exit_code=code,
            message=f"rank {rank} of {(job.get('spec') or {}).get('completions')} failed "
            f"({what or failed.get('reason')}); "
            f"the other ranks were stopped; see the log of rank {rank}",
            node=node,
            disrupted=disrupted,
        )
    if failed is not None:
        if failed.get("reason") == "DeadlineExceeded":
            deadline = (job.get("spec") or {}).get("activeDeadlineSeconds")
            limit = f" ({deadline} s)" if deadline else ""
            return Verdict(
                done=True,
                state="timed_out",
                message=f"stopped by Kubernetes at its time limit{limit}",
                node=node,
            )
        message, code, disrupted = _pod_failure(pod) if pod else (None, None, False)
        if message is None and code is None:
            detail = failed.get("message") or failed.get("reason") or "no reason given"
            return Verdict(
                done=True, state="failed", message=f"the Job failed: {detail}", node=node
            )
        return Verdict(
            done=True,
            state="failed" if message else None,
            exit_code=code,
            message=message,
            node=node,
            disrupted=disrupted,
        )
    if _condition(job, "Complete") is not None:
        code = 0
        if pod is not None:
            _, found, _ = _pod_failure(pod)
            code = found if found is not None else 0
        return Verdict(done=True, exit_code=code, node=node)
    if (job.get("spec") or {}).get("suspend"):
        queue = ((job.get("metadata") or {}).get("labels") or {}).get(KUEUE_QUEUE_LABEL)
        where = f" (queue {queue})" if queue else ""
        return Verdict(waiting=f"waiting for Kueue to admit it{where}")
    if pod is None:
        return Verdict()
    for cs in _container_statuses(pod):
        waiting = (cs.get("state") or {}).get("waiting") or {}
        reason = waiting.get("reason")
        if reason in _CANNOT_START:
            image = cs.get("image") or ""
            what = _CANNOT_START[reason]
            if "image" in what and image:
                what += f" {image}"
            detail = waiting.get("message")
            return Verdict(
                done=True,
                stuck=True,
                state="failed",
                message=f"{what} ({reason}{': ' + detail if detail else ''})",
                node=node,
            )
    phase = (pod.get("status") or {}).get("phase")
    scheduled = next(
        (
            c
            for c in (pod.get("status") or {}).get("conditions") or []
            if c.get("type") == "PodScheduled"
        ),
        None,
    )
    if engine_holds(pod):
        engine = str((pod.get("spec") or {}).get("schedulerName"))
        return Verdict(waiting=engine_waiting(pod, engine, scheduled, said=engine_said))
    if (
        phase == "Pending"
        and scheduled is not None
        and scheduled.get("status") == "False"
        and scheduled.get("reason") == "Unschedulable"
    ):
        if callable(capacity):
            capacity = capacity()
        text = waiting_for(flavor, capacity) if flavor is not None else "waiting for a node"
        if capacity is None and scheduled.get("message"):
            text += f": {scheduled['message']}"
        return Verdict(waiting=text)
    return Verdict(running=phase == "Running", node=node)

"""Kubernetes objects for nbjobs' jobs, built by pure functions (no API calls here).

:func:`make_job` turns one job (a :class:`LaunchSpec`), the storage rules and the
backend's settings into a ``batch/v1`` Job as a plain dict (a JobSet and its ranks'
Service for a job on several nodes). What the cluster says back is read by pure
functions too: how many jobs of a flavor fit on its nodes now
(:mod:`.kubernetes_capacity`) and what a Job and its pods mean for a person
(:mod:`.kubernetes_verdicts`). The backend (``kubernetes.py``) is a thin layer that
sends these dicts and feeds those functions.
"""

from __future__ import annotations

import copy
import hashlib
import math
import re
from collections.abc import Iterable, Mapping
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
    EngineFields,
    engine_fields,
)
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
#: which nbjobs made an object (its database's instance id, job_service/db.py): a service
#: stops only objects that carry its own
INSTANCE_LABEL = "nbjobs.io/instance"
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


def job_labels(spec: LaunchSpec, instance: str | None = None) -> dict[str, str]:
    """Labels naming the job, its flavor, its owner and the nbjobs that made it (on the
    Job and its pod)."""
    labels = {
        **MANAGED_BY,
        JOB_ID_LABEL: spec.job_id,
        FLAVOR_LABEL: spec.flavor.name,
        OWNER_LABEL: owner_label(spec.user),
    }
    if instance:
        labels[INSTANCE_LABEL] = instance
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
    instance: str | None = None,
) -> dict[str, Any]:
    """The ``batch/v1`` Job that runs one nbjobs job (``limits``, ``log_mode`` and
    ``telemetry``: see :func:`runner_command`; ``drained``: nodes admins drained besides
    nbjobs.yaml's ``drained_nodes``, which it may not land on; ``instance``: the id of the
    nbjobs making it, on its labels)."""
    flavor = spec.flavor
    image = _job_image(flavor, storage, settings)
    labels = job_labels(spec, instance)
    engine = flavor_engine(flavor, spec.queue, settings.kueue)
    resources = flavor_resources(flavor)
    env = _job_env(spec)
    identity = _identity(storage)
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
    pod_spec = _pod_spec(flavor, storage, settings, container, identity, engine, drained)
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
        env += _one_pod_per_rank(job_spec, pod_spec, name, flavor.nodes, settings.multi_node)
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


def _identity(storage: StorageConfig) -> dict[str, Any]:
    """Who the job's processes are: never root, the storage's owner when it says one."""
    identity: dict[str, Any] = {"runAsNonRoot": True}
    if storage.uid is not None:
        identity["runAsUser"] = storage.uid
    if storage.gid is not None:
        identity["runAsGroup"] = storage.gid
    return identity


def _one_pod_per_rank(
    job_spec: dict[str, Any], pod_spec: dict[str, Any], name: str, nodes: int, multi_node: str
) -> list[dict[str, str]]:
    """A multi-node job: one pod per rank, each its index; any rank failing fails the job
    (backoffLimit 0: the Job controller stops the others), all succeeding completes it.
    Returns the ranks' environment (where rank 0 is)."""
    job_spec.update(completionMode="Indexed", completions=nodes, parallelism=nodes)
    if multi_node == "jobset":
        master = f"{jobset_child(name)}-0.{name}"  # the JobSet names its pods' hosts
    else:
        master = f"{name}-0.{name}"  # the Indexed Job's pod 0, in the Service of its name
        pod_spec["subdomain"] = name
    return rank_env(nodes, master)


def _job_image(flavor: Flavor, storage: StorageConfig, settings: KubernetesBackendConfig) -> str:
    """The job's image; refused when nbjobs.yaml lacks what a job's pod needs."""
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
    return image


def _job_env(spec: LaunchSpec) -> list[dict[str, str]]:
    """The runner's environment: the flavor's, the job's id, no GPU for a CPU job."""
    flavor = spec.flavor
    env = [{"name": k, "value": v} for k, v in sorted(flavor.env.items())]
    env.append({"name": "NBJOBS_JOB_ID", "value": spec.job_id})
    if not flavor.gpus:
        # On a GPU node the NVIDIA runtime would otherwise hand a CPU job every GPU.
        env += [
            {"name": "CUDA_VISIBLE_DEVICES", "value": ""},
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"},
        ]
    return env


def _pod_spec(
    flavor: Flavor,
    storage: StorageConfig,
    settings: KubernetesBackendConfig,
    container: dict[str, Any],
    identity: dict[str, Any],
    engine: EngineFields,
    drained: Iterable[str],
) -> dict[str, Any]:
    """The pod of a job's rank: no credentials, restricted, on the flavor's nodes
    (never a drained one), scheduled by the flavor's engine."""
    assert storage.volume is not None  # refused before (_job_image)
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
    return pod_spec


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

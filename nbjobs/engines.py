"""How a flavor reaches the GPU-sharing engine of a cluster.

An admin writes the intent in a flavor (``scheduler``, ``queue``, ``fraction``,
``gpu_sharing``, ``resources``); :func:`engine_fields` turns it into the fields each
engine reads, so that nobody has to remember that KAI Scheduler wants a
``gpu-fraction`` annotation and no ``nvidia.com/gpu`` request while HAMi wants
``nvidia.com/gpu: 1`` beside a memory percentage. The table (also in the admin guide's GPU page):

==============  ==========================================  ==================================
engine          fields nbjobs writes                        what nbjobs reads back
==============  ==========================================  ==================================
default         ``{gpu_resource}: gpus``; with Kueue the     node allocatable: free GPUs
                Job label ``kueue.x-k8s.io/queue-name``
hami            ``nvidia.com/gpu: 1``,                       node allocatable of every resource
                ``nvidia.com/gpumem-percentage`` and         the nodes list (``nvidia.com/gpu``
                ``nvidia.com/gpucores`` (fraction x 100)     split slots, ``nvidia.com/gpumem``)
                unless ``resources`` gives them
time-slicing    ``{gpu_resource}: 1`` (a renamed resource    node allocatable: free replicas
                such as ``nvidia.com/gpu.shared``)
mig             ``{gpu_resource}: 1`` (``nvidia.com/mig-*``) node allocatable: free slices
kai             ``schedulerName: kai-scheduler``, label      nothing: KAI decides; the pod's
                ``kai.scheduler/queue``, annotation          PodScheduled message
                ``gpu-fraction``; no GPU resource request
volcano         ``schedulerName: volcano``, annotation       nothing: Volcano decides; the
                ``scheduling.volcano.sh/queue-name``,        pod's PodScheduled message
                ``volcano.sh/vgpu-number: 1`` and
                ``volcano.sh/vgpu-cores`` (fraction x 100)
==============  ==========================================  ==================================

Everything here is pure (no cluster, no config file): the config validates with it and
the Kubernetes backend builds Jobs with it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

#: the ways a cluster shares one GPU between jobs
Sharing = Literal["hami", "kai", "volcano", "time-slicing", "mig"]
SHARINGS: tuple[str, ...] = ("hami", "kai", "volcano", "time-slicing", "mig")

#: the short scheduler names nbjobs knows, and the ``schedulerName`` each stands for
SCHEDULERS = {"kai": "kai-scheduler", "volcano": "volcano"}
#: what people call the engines (in queue reasons: "queued by KAI Scheduler")
ENGINE_TITLES = {
    "kai-scheduler": "KAI Scheduler",
    "volcano": "Volcano",
    "hami-scheduler": "HAMi's scheduler",
}
DEFAULT_SCHEDULER = "default-scheduler"

KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KAI_QUEUE_LABEL = "kai.scheduler/queue"
KAI_FRACTION_ANNOTATION = "gpu-fraction"
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
HAMI_MEMORY = "nvidia.com/gpumem"
HAMI_MEMORY_PERCENT = "nvidia.com/gpumem-percentage"
HAMI_CORES = "nvidia.com/gpucores"
VOLCANO_VGPU = "volcano.sh/vgpu-number"
VOLCANO_CORES = "volcano.sh/vgpu-cores"

#: label and annotation keys a flavor may not set: nbjobs writes them (its own, and the
#: engines' queue and fraction fields, which come from ``queue:`` and ``fraction:``)
RESERVED_PREFIXES = ("nbjobs.io/", "batch.kubernetes.io/", "kueue.x-k8s.io/")
RESERVED_KEYS = frozenset(
    {
        "app.kubernetes.io/managed-by",
        "controller-uid",
        "job-name",
        KAI_QUEUE_LABEL,
        "runai/queue",
        KAI_FRACTION_ANNOTATION,
        "gpu-memory",
        VOLCANO_QUEUE_ANNOTATION,
    }
)

_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def scheduler_name(scheduler: str | None) -> str | None:
    """The pod's ``schedulerName`` for a flavor's ``scheduler`` (None: the cluster's
    default scheduler, the field left out)."""
    if scheduler is None or scheduler in ("default", DEFAULT_SCHEDULER):
        return None
    return SCHEDULERS.get(scheduler, scheduler)


def engine_title(name: str | None) -> str:
    """What a person calls the scheduler ``name`` (a ``schedulerName``)."""
    if name is None:
        return "the cluster's scheduler"
    return ENGINE_TITLES.get(name, f"the scheduler {name!r}")


def check_key(key: str, what: str) -> str | None:
    """Why ``key`` cannot be a label or annotation key a flavor sets (None: it can)."""
    prefix, _, name = key.rpartition("/")
    if (prefix and not _DNS_SUBDOMAIN.match(prefix)) or not _LABEL_NAME.match(name):
        return f"{what} key {key!r} is not a valid Kubernetes key (like example.org/team)"
    if key in RESERVED_KEYS or any(key.startswith(p) for p in RESERVED_PREFIXES):
        return (
            f"{what} {key!r} is written by nbjobs (queues come from queue:, fractions "
            "from fraction:); leave it out"
        )
    return None


def check_label_value(value: str) -> str | None:
    if not _LABEL_VALUE.match(value):
        return (
            f"label value {value!r} is not valid in Kubernetes (at most 63 letters, "
            "digits, '-', '_' or '.', starting and ending with a letter or digit)"
        )
    return None


def sharing_of(
    fraction: float | None, gpu_sharing: str | None, scheduler: str | None, gpu_resource: str
) -> str | None:
    """The engine that shares GPUs for a flavor: as given, else what its scheduler or GPU
    resource says (None: whole GPUs)."""
    if gpu_sharing is not None:
        return gpu_sharing
    if fraction is None:
        return None
    name = scheduler_name(scheduler)
    if name == SCHEDULERS["kai"]:
        return "kai"
    if name == SCHEDULERS["volcano"]:
        return "volcano"
    if gpu_resource.startswith("nvidia.com/mig-"):
        return "mig"
    if gpu_resource != "nvidia.com/gpu":
        return "time-slicing"
    return None


@dataclass
class EngineFields:
    """What a job of one flavor carries for the cluster's engines."""

    scheduler_name: str | None = None
    #: extended resources for requests and limits (the GPU resource included)
    resources: dict[str, str] = field(default_factory=dict)
    pod_labels: dict[str, str] = field(default_factory=dict)
    pod_annotations: dict[str, str] = field(default_factory=dict)
    job_labels: dict[str, str] = field(default_factory=dict)
    job_annotations: dict[str, str] = field(default_factory=dict)
    #: True: the engine, not nbjobs, decides when and where the job runs (nbjobs hands
    #: it over at once and shows no count of free GPUs it cannot know)
    engine_decides: bool = False


def _percent(fraction: float) -> str:
    return str(max(1, min(100, round(fraction * 100))))


def engine_fields(
    *,
    gpus: int,
    gpu_resource: str,
    fraction: float | None,
    gpu_sharing: str | None,
    scheduler: str | None,
    resources: Mapping[str, str],
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    queue: str | None,
    kueue: bool,
) -> EngineFields:
    """The fields of one flavor's jobs (``queue``: the job's queue, its class's or its
    flavor's or Kueue's; ``kueue``: Kueue admits the jobs)."""
    name = scheduler_name(scheduler)
    sharing = sharing_of(fraction, gpu_sharing, scheduler, gpu_resource)
    if sharing == "kai":
        name = name or SCHEDULERS["kai"]
    elif sharing == "volcano":
        name = name or SCHEDULERS["volcano"]
    out = EngineFields(scheduler_name=name)
    out.pod_labels.update(labels)
    out.job_labels.update(labels)
    out.pod_annotations.update(annotations)
    out.job_annotations.update(annotations)
    out.resources.update(resources)
    if gpus:
        if sharing == "kai" and fraction is not None:
            # KAI hands out the share itself: a GPU request would take a whole GPU
            out.pod_annotations[KAI_FRACTION_ANNOTATION] = f"{fraction:g}"
        elif sharing == "volcano" and fraction is not None:
            out.resources.setdefault(VOLCANO_VGPU, "1")
            out.resources.setdefault(VOLCANO_CORES, _percent(fraction))
        elif sharing == "hami" and fraction is not None:
            out.resources[gpu_resource] = "1"
            if HAMI_MEMORY not in resources:
                out.resources.setdefault(HAMI_MEMORY_PERCENT, _percent(fraction))
            out.resources.setdefault(HAMI_CORES, _percent(fraction))
        else:
            out.resources[gpu_resource] = str(1 if fraction is not None else gpus)
    if queue:
        if name == SCHEDULERS["kai"]:
            out.pod_labels[KAI_QUEUE_LABEL] = queue
            out.job_labels[KAI_QUEUE_LABEL] = queue
        elif name == SCHEDULERS["volcano"]:
            out.pod_annotations[VOLCANO_QUEUE_ANNOTATION] = queue
            out.job_annotations[VOLCANO_QUEUE_ANNOTATION] = queue
        if kueue:
            out.job_labels[KUEUE_QUEUE_LABEL] = queue
    # HAMi's scheduler places by the node resources nbjobs reads too; KAI, Volcano and
    # schedulers nbjobs does not know keep their own books
    out.engine_decides = name is not None and name != "hami-scheduler"
    return out

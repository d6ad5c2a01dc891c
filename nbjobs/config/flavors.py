"""Flavors (what a job gets: GPUs, CPU, memory, image, time limit, engine) with their
approval and idle-GPU policies, and the notebook servers' profiles."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ..engines import (
    SCHEDULERS,
    Sharing,
    check_key,
    check_label_value,
    scheduler_name,
    sharing_of,
)
from .backends import JobEnv
from .values import _NAME, _SCHEDULER, Duration, Quantity, TaskCount, _check_queue, _Model


class ApprovalPolicy(_Model):
    """Jobs on a flavor wait for a person's yes (a flavor's ``approval``).

    A job of a member of ``groups`` (empty: of anyone but nbjobs admins) waits as
    ``pending_approval`` until an nbjobs admin, or a teacher of a class its owner is in,
    approves it (it is queued) or rejects it with a reason (it is cancelled, the reason
    recorded); unanswered after ``expires_after`` it is cancelled, saying so.
    """

    #: JupyterHub groups whose members' jobs wait for approval; empty: everyone's (admins' jobs
    #: never wait)
    groups: list[str] = []
    #: how long a request waits for an answer, from its submit, before the job is cancelled
    #: (``3d``, ``12h``; at least a minute)
    expires_after: Duration = 3 * 24 * 3600.0

    @field_validator("expires_after")
    @classmethod
    def _at_least_a_minute(cls, value: float | None) -> float:
        if value is None or value < 60:
            raise ValueError("expires_after needs to be a minute or more, like 3d or 12h")
        return value


class IdleGpuPolicy(_Model):
    """What happens to a job that leaves its GPUs idle (a flavor's ``idle_gpu``).

    Idle: the job's GPU utilisation (its runner's telemetry; the mean over its GPUs)
    stays below ``below_percent`` in every sample. After ``after`` of that its owner is
    warned (the job shows the warning); with ``action: cancel`` a job still idle
    ``grace`` later is cancelled, the reason recorded in the job and in its output's
    banner, its partial output kept. Jobs of ``exempt_groups`` are never warned or
    cancelled. Needs telemetry (``telemetry.interval`` not 0).
    """

    #: the GPU utilisation, in percent (the mean over the job's GPUs), below which a telemetry
    #: sample counts as idle
    below_percent: float = Field(default=5.0, gt=0, le=100)
    #: how long every sample must be idle before the owner is warned (``30m``; at least a minute)
    after: Duration = 30 * 60.0
    #: ``warn``: only warn (taken back once the GPUs work again); ``cancel``: also cancel a job
    #: still idle ``grace`` after the warning
    action: Literal["warn", "cancel"] = "warn"
    #: with ``action: cancel``, how long a warned job may stay idle before it is cancelled
    #: (``5m``; at least a minute)
    grace: Duration = 5 * 60.0
    #: JupyterHub groups whose members' jobs are never warned or cancelled (the groups the owner
    #: was in at submit)
    exempt_groups: list[str] = []

    @field_validator("after", "grace")
    @classmethod
    def _a_while(cls, value: float | None) -> float:
        if value is None or value < 60:
            raise ValueError("give at least a minute (60s, 5m), so that a pause is not idling")
        return value


class Flavor(_Model):
    """What a job runs on: GPUs, CPU, memory, image, time limit; and who may use it."""

    #: what users pick (``nbjobs submit -f``) and job records keep: lowercase letters, digits and
    #: '-', at most 40 (``a100-1``); classes and teachers name flavors by it
    name: str
    #: the name people see (``A100 (80 GB)``), in the Submit dialog beside ``name``; None: ``name``
    display_name: str | None = None
    #: a sentence the Submit dialog shows under the flavor (``For training; 80 GB of memory``)
    description: str = ""
    #: whole GPUs each job gets: on one machine of ``backend.local.gpus`` (its
    #: CUDA_VISIBLE_DEVICES), on Kubernetes that many ``gpu_resource``; 0: none, the job sees no
    #: GPU. ``shared`` and ``fraction`` need 1
    gpus: int = Field(default=0, ge=0)
    #: how many nodes one job spans (a multi-node job: torchrun, DeepSpeed), each with
    #: ``gpus``, ``cpu`` and ``memory``; they start together or not at all (on Kubernetes
    #: a JobSet or an Indexed Job, see ``backend.kubernetes.multi_node``; on one machine
    #: that many local ranks). Quotas, GPU-hours and credits count nodes x gpus
    nodes: int = Field(default=1, ge=1, le=64)
    #: the extended resource to ask for (a MIG slice: ``nvidia.com/mig-1g.10gb``)
    gpu_resource: str = "nvidia.com/gpu"
    #: the GPU's name people see with the flavor (``A100``); only a label: it selects no node
    #: (on Kubernetes ``node_selector`` does, e.g. ``nvidia.com/gpu.product``)
    gpu_type: str | None = None
    #: a fractional GPU: the job gets a slot of a GPU shared with other such jobs
    shared: bool = False
    #: CPUs per job, requested and limited alike (``4``, ``500m``); None: not asked for. On one
    #: machine the job's control group gets this CPU quota
    cpu: Quantity = None
    #: memory per job, requested and limited alike (``16Gi``); None: not asked for. On one
    #: machine the job's control group gets this limit (past it: "out of memory")
    memory: Quantity = None
    #: the most processes and threads a job may hold at once, on one machine (past it:
    #: "too many processes"); None: ``backend.local.tasks``. On Kubernetes the kubelet's
    #: ``podPidsLimit`` sets it for every pod
    tasks: TaskCount = None
    #: the job pods' image on Kubernetes, with nbjobs installed; None:
    #: ``backend.kubernetes.default_image`` (with neither, the flavor cannot run). Unused on one
    #: machine
    image: str | None = None
    #: the longest a job may run (``4h``, ``90m``, seconds); users may ask for less, not more. The
    #: runner stops the notebook there and keeps its output; None: no limit
    time_limit: Duration = 4 * 3600.0
    #: node labels a job pod must have on Kubernetes (``{nvidia.com/gpu.product: Tesla-T4}``);
    #: nbjobs counts free capacity on those nodes only
    node_selector: dict[str, str] = {}
    #: the job pods' tolerations on Kubernetes, as a pod spec writes them
    #: (``[{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]``)
    tolerations: list[dict[str, Any]] = []
    #: the job pods' ``affinity`` on Kubernetes, as a pod spec writes it; nbjobs adds its rule
    #: keeping jobs off drained nodes to each required node term
    affinity: dict[str, Any] | None = None
    #: the job pods' Kubernetes PriorityClass (``priorityClassName``; it must exist in the
    #: cluster), for the cluster's scheduler; nbjobs' own queue order does not use it
    priority_class: str | None = None
    #: JupyterHub groups allowed to use it; empty means everyone
    groups: list[str] = []
    #: environment variables every job of this flavor gets (``{HF_HOME: /data/hf}``); on one
    #: machine they go over ``backend.local.env``
    env: JobEnv = {}
    #: how many times a job the cluster stops for reasons of its own (evicted, preempted
    #: by a higher priority, its node lost) goes back to the queue to run again from the
    #: top; 0: it fails with the reason. A notebook's own failure is never re-queued.
    requeue_on_eviction: int = Field(default=0, ge=0, le=10)
    #: what one GPU-hour of this flavor costs (any currency: usage reports multiply the
    #: GPU-hours allocated by it); None: reports show no cost for it
    cost_per_gpu_hour: float | None = Field(default=None, ge=0)
    #: warn about (or cancel) jobs that leave their GPUs idle; None: never
    idle_gpu: IdleGpuPolicy | None = None
    #: jobs wait for an admin's (or their teacher's) approval; None: they queue at once
    approval: ApprovalPolicy | None = None
    #: the pod's scheduler: ``kai`` (KAI Scheduler), ``volcano``, any other
    #: ``schedulerName``; None or ``default``: the cluster's default scheduler
    scheduler: str | None = None
    #: the queue of this flavor's jobs (a Kueue LocalQueue, a KAI or Volcano queue); a
    #: class's own queue (``classes[].queue``) wins for its students' jobs
    queue: str | None = None
    #: the share of one GPU a job gets (0.25: a quarter); quotas, GPU-hours and usage
    #: count it as that much of a GPU. How it is asked for depends on ``gpu_sharing``
    fraction: float | None = Field(default=None, gt=0, lt=1)
    #: how the cluster shares GPUs: ``hami``, ``kai``, ``volcano``, ``time-slicing`` (a
    #: renamed resource like ``nvidia.com/gpu.shared``) or ``mig``; None: worked out from
    #: ``scheduler`` and ``gpu_resource``
    gpu_sharing: Sharing | None = None
    #: more requests (and equal limits) for the job's container, beside the GPU resource:
    #: e.g. HAMi's ``{nvidia.com/gpumem: 10000}`` (MiB)
    resources: dict[str, Quantity] = {}
    #: labels for the Job and its pod (nbjobs' own and the engines' queue and fraction keys are
    #: refused: they come from ``queue`` and ``fraction``)
    labels: dict[str, str] = {}
    #: annotations for the Job and its pod (the same keys are refused as for ``labels``)
    annotations: dict[str, str] = {}
    #: the kernels its image has (names as ``jupyter kernelspec list`` shows them): the
    #: Submit dialog offers them and a notebook on another kernel is refused at submit.
    #: Empty: on one machine the kernels installed there; on a cluster not known (a
    #: missing kernel then fails the job, saying so)
    kernels: list[str] = []

    @field_validator("name")
    @classmethod
    def _dns_name(cls, value: str) -> str:
        if not _NAME.match(value) or len(value) > 40:
            raise ValueError(
                f"flavor name {value!r} must be lowercase letters, digits and '-' "
                "(at most 40), like 'a100-1'"
            )
        return value

    @field_validator("scheduler")
    @classmethod
    def _scheduler_name(cls, value: str | None) -> str | None:
        if value is not None and not _SCHEDULER.match(value):
            raise ValueError(
                f"scheduler {value!r} must be kai, volcano, default or a scheduler's name "
                "(lowercase letters, digits, '-' and '.')"
            )
        return value

    @field_validator("queue")
    @classmethod
    def _queue_name(cls, value: str | None) -> str | None:
        return _check_queue(value)

    @field_validator("labels", "annotations")
    @classmethod
    def _keys(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        what = "label" if info.field_name == "labels" else "annotation"
        for key, text in value.items():
            problem = check_key(key, what) or (check_label_value(text) if what == "label" else None)
            if problem:
                raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _shared_needs_one_gpu(self) -> Flavor:
        if self.nodes > 1 and self.shares_a_gpu:
            raise ValueError(
                f"nodes: {self.nodes} with a share of a GPU (shared or fraction): a job on "
                "several nodes takes whole GPUs; set nodes: 1 or drop the share"
            )
        if self.shared and self.gpus != 1:
            raise ValueError("a shared (fractional) flavor takes a slot of one GPU: set gpus: 1")
        if self.idle_gpu is not None and not self.gpus:
            raise ValueError("idle_gpu is for flavors with GPUs; this one has none")
        for key in self.resources:
            if key in ("cpu", "memory", self.gpu_resource):
                raise ValueError(
                    f"resources: {key} is set by the flavor's "
                    f"{'gpus' if key == self.gpu_resource else key}: setting, not here"
                )
            problem = check_key(key, "resource")
            if problem and "written by nbjobs" not in problem:
                raise ValueError(problem)
        self._check_sharing()
        return self

    def _check_sharing(self) -> None:
        sharing = self.sharing
        if self.fraction is not None and self.gpus != 1:
            raise ValueError(
                f"fraction {self.fraction:g} is a share of one GPU: set gpus: 1 (not {self.gpus})"
            )
        if self.fraction is not None and sharing is None and not self.shared:
            raise ValueError(
                f"fraction {self.fraction:g} needs to say how the cluster shares GPUs: set "
                "gpu_sharing: hami, kai, volcano, time-slicing or mig (or scheduler: kai "
                "or volcano, or a gpu_resource such as nvidia.com/gpu.shared)"
            )
        if self.gpu_sharing is not None and not self.gpus:
            raise ValueError(f"gpu_sharing {self.gpu_sharing} is for flavors with gpus: 1")
        if sharing in ("kai", "hami", "volcano") and self.fraction is None:
            raise ValueError(
                f"gpu_sharing {sharing} hands out part of a GPU: give the part as "
                "fraction (e.g. 0.25)"
            )
        chosen = scheduler_name(self.scheduler)
        for engine in ("kai", "volcano"):
            wanted = SCHEDULERS[engine]
            if sharing == engine and chosen is not None and chosen != wanted:
                raise ValueError(
                    f"gpu_sharing {engine} needs scheduler: {engine} (the pods go to "
                    f"{wanted}), not {self.scheduler}"
                )
        if sharing == "mig" and not self.gpu_resource.startswith("nvidia.com/mig-"):
            raise ValueError(
                "gpu_sharing mig needs gpu_resource set to the MIG profile's resource, "
                "like nvidia.com/mig-1g.10gb"
            )
        if (
            sharing == "time-slicing"
            and self.gpu_resource == "nvidia.com/gpu"
            and (self.fraction is None)
        ):
            raise ValueError(
                "gpu_sharing time-slicing counts a replica of a GPU: give its share as "
                "fraction (1 / the device plugin's replicas, e.g. 0.25)"
            )

    @property
    def sharing(self) -> str | None:
        """How the cluster shares this flavor's GPU (None: whole GPUs)."""
        return sharing_of(self.fraction, self.gpu_sharing, self.scheduler, self.gpu_resource)

    @property
    def shares_a_gpu(self) -> bool:
        """A job of this flavor gets part of a GPU (a local slot, or a cluster's share)."""
        return self.shared or self.fraction is not None

    @property
    def gpu_equivalents(self) -> float:
        """What one job of this flavor counts in quotas, GPU-hours and usage: its
        fraction of a GPU, else its GPUs on all its nodes."""
        return self.fraction if self.fraction is not None else float(self.gpus * self.nodes)

    @property
    def gpu_count(self) -> int:
        """The GPUs one job holds, on all its nodes."""
        return self.gpus * self.nodes

    @property
    def label(self) -> str:
        """The name a person sees."""
        return self.display_name or self.name


def nodes_words(nodes: int) -> str:
    """``1 node``, ``2 nodes``: how a sentence says a job's span."""
    return f"{nodes} node{'' if nodes == 1 else 's'}"


#: settings that would give a notebook server a GPU; profiles are CPU-only, flavors are not
_PROFILE_GPU_KEYS = {
    "gpus",
    "gpu",
    "gpu_resource",
    "gpu_type",
    "shared",
    "extra_resource_limits",
    "extra_resource_guarantees",
    "nvidia.com/gpu",
}
_CPU_ONLY = (
    "notebook servers are CPU-only in nbjobs, so a profile cannot ask for a GPU ({key}); "
    "give GPUs to a flavor instead (flavors: [{{name: gpu, gpus: 1}}]) and submit the "
    "notebook as a job"
)


class ProfileOverride(_Model):
    """The KubeSpawner settings a profile may override (``kubespawner_override``).

    An allow-list: sizes, image, environment and placement. Anything that could
    give the pod a GPU, a device, credentials or extra containers is refused.
    """

    #: the notebook server's image (KubeSpawner's ``image``); the profile's ``image``, long form
    image: str | None = None
    #: ``Always``, ``IfNotPresent`` or ``Never``; None: Kubernetes' default for the tag
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None
    #: the most CPU the server may use, in cores (``0.5``, ``2``); the profile's ``cpu``, long form
    cpu_limit: float | None = Field(default=None, gt=0)
    #: the CPU the pod requests (reserved for it), in cores; None: not set
    cpu_guarantee: float | None = Field(default=None, gt=0)
    #: the most memory the server may use (``4Gi``, ``512M``); the profile's ``memory``, long form
    mem_limit: Quantity = None
    #: the memory the pod requests (reserved for it), like ``2Gi``; None: not set
    mem_guarantee: Quantity = None
    #: variables the notebook server gets (``NVIDIA_*`` and ``CUDA_*`` names are refused)
    environment: dict[str, str] = {}
    #: the page the server opens at (JupyterHub's ``default_url``, e.g. ``/lab``); None: the
    #: spawner's own
    default_url: str | None = None
    #: node labels the notebook pod must have (``{node-pool: cpu}``)
    node_selector: dict[str, str] = {}
    #: the notebook pod's tolerations, as a pod spec writes them
    tolerations: list[dict[str, Any]] = []

    @model_validator(mode="before")
    @classmethod
    def _allowed(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        for key in data:
            if key in _PROFILE_GPU_KEYS:
                raise ValueError(_CPU_ONLY.format(key=f"kubespawner_override.{key}"))
        unknown = sorted(str(k) for k in data if k not in cls.model_fields)
        if unknown:
            raise ValueError(
                f"kubespawner_override may not set {', '.join(unknown)} in nbjobs (notebook "
                f"pods stay CPU-only and hold no credentials); it may set: "
                f"{', '.join(cls.model_fields)}"
            )
        gpu_env = sorted(
            k for k in data.get("environment") or {} if k.startswith(("NVIDIA_", "CUDA_"))
        )
        if gpu_env:
            raise ValueError(_CPU_ONLY.format(key=f"environment {', '.join(gpu_env)}"))
        return data


class Profile(_Model):
    """A CPU-only notebook server size users pick at spawn.

    Either nbjobs' short form (``name``, ``cpu``, ``memory``, ``image``) or
    KubeSpawner's ``profile_list`` form (``slug``, ``display_name``,
    ``description``, ``default``, ``kubespawner_override: {cpu_limit, mem_limit,
    image, ...}``); ``groups`` limits who is offered it in both.
    """

    #: what users choose (KubeSpawner's ``slug``)
    name: str = ""
    #: ``name`` in KubeSpawner's ``profile_list`` form; give either (or both, alike)
    slug: str | None = None
    #: what the spawn page shows (``Small (1 CPU, 2 GiB)``); None: ``name``
    display_name: str | None = None
    #: a sentence the spawn page shows under it
    description: str = ""
    #: the notebook server's CPU limit (KubeSpawner's ``cpu_limit``): ``1``, ``500m``
    cpu: Quantity = "1"
    #: the notebook server's memory limit (KubeSpawner's ``mem_limit``): ``2Gi``, ``512Mi``
    memory: Quantity = "2Gi"
    #: the notebook server's image; None: KubeSpawner's ``image`` (the hub's setting)
    image: str | None = None
    #: the most processes and threads the server, its kernels and terminals may hold at
    #: once, on one machine; None: ``backend.local.tasks``. On Kubernetes the kubelet's
    #: ``podPidsLimit`` sets it for every pod
    tasks: TaskCount = None
    #: JupyterHub groups it is offered to; empty: everyone. JupyterHub admins are offered all
    groups: list[str] = []
    #: preselected on the spawn page (KubeSpawner's ``default``)
    default: bool = False
    #: KubeSpawner settings for it (only those of :class:`ProfileOverride`); they replace what
    #: ``cpu``, ``memory`` and ``image`` give, and may not repeat a key set there
    kubespawner_override: ProfileOverride | None = None

    @model_validator(mode="before")
    @classmethod
    def _cpu_only(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        for key in data:
            if key in _PROFILE_GPU_KEYS:
                raise ValueError(_CPU_ONLY.format(key=key))
        if "profile_options" in data:
            raise ValueError(
                "profile_options is not supported in nbjobs; list each choice as a profile"
            )
        return data

    @model_validator(mode="after")
    def _one_name_one_size(self) -> Profile:
        if self.slug is not None and self.name and self.name != self.slug:
            raise ValueError(
                f"a profile has one name: give name or slug, not {self.name!r} and {self.slug!r}"
            )
        if not self.name:
            if not self.slug:
                raise ValueError("a profile needs a name (or, in profile_list form, a slug)")
            object.__setattr__(self, "name", self.slug)
        override = self.kubespawner_override
        if override is not None:
            for short, long in (("cpu", "cpu_limit"), ("memory", "mem_limit"), ("image", "image")):
                if short in self.model_fields_set and long in override.model_fields_set:
                    raise ValueError(
                        f"profile {self.name!r} sets both {short} and "
                        f"kubespawner_override.{long}; keep one"
                    )
        return self


#: a quota period as people read it: GPU-hours count over a window that slides with the
#: clock (the last 7 days for ``week``), not a calendar week that starts again on Monday

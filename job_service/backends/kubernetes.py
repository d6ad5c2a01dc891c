"""The Kubernetes backend: every job one ``batch/v1`` Job on the GPU cluster.

Kubernetes places the jobs (its scheduler, priority classes, optionally Kueue);
this backend creates the Job that :func:`make_job` builds, and follows the
cluster through three list-then-watch loops (Jobs and pods in its namespace,
nodes cluster-wide when the ServiceAccount may read them) that keep a local
copy up to date: resourceVersion kept, bookmarks asked for, a re-list after
``410 Gone``. Everything else reads that copy:

- :meth:`wait` returns when the Job has ended (or was deleted), with what the
  cluster says: out of memory, evicted, preempted, image not pullable, deadline;
- :meth:`seen` says why a handed-over job still waits (no node fits, Kueue)
  and on which node it runs;
- :meth:`free_for` counts the flavor's free GPUs from node allocatable minus
  what the namespace's pods request;
- the job's log is the runner's to write: it appends it to the job's folder on the
  shared storage itself (``--log-file``), where the job service serves it from, so it
  is complete whether or not the service was following (a Job that ended and was
  deleted at its TTL while the service was stopped still has its log). Only when a
  runner left no log at all (it never ran: an image without nbjobs, a bad command) does
  the backend keep what the pod printed (``pods/log``, once, bounded) in its place.

Only these API calls are made (``hub_config/examples/kubernetes/rbac.yaml``
grants exactly them): jobs create/get/list/watch/delete, pods list/watch/delete,
pods/log get, events list in the namespace; nodes list/watch cluster-wide (optional).
Events are read only for pods another scheduler (KAI, Volcano) holds and has not placed,
every ``events_interval`` seconds: such an engine may say why a job waits in an event
on the pod or on its PodGroup rather than in the pod's condition.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import json
import os
import time
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from traitlets import Float, Integer, Unicode

from nbjobs.config import ConfigError, Flavor
from nbjobs.engines import KUEUE_QUEUE_LABEL, engine_title
from nbjobs.models import NODE_SEPARATOR
from nbjobs.network import JOBS_POLICY, MANAGED_BY, jobs_policy
from nbjobs.storage import FilesChanged, job_folder, open_in_job_dir, user_folder

from .base import (
    Backend,
    Launched,
    LaunchSpec,
    NodeGpus,
    Outcome,
    Seen,
    write_parameters_file,
)
from .kubernetes_capacity import (
    Capacity,
    free_slots,
    node_accepts,
    parse_quantity,
    pod_holds_resources,
    pod_requests,
)
from .kubernetes_objects import (
    CONTAINER_NAME,
    DRAIN_LABEL,
    JOB_ID_LABEL,
    JOBSET_GROUP,
    JOBSET_VERSION,
    MANAGED_SELECTOR,
    OWNER_ANNOTATION,
    flavor_engine,
    flavor_resources,
    job_name_of,
    jobset_child,
    jobset_parent,
    make_job,
    make_jobset,
    make_rank_service,
    node_affinity,
)
from .kubernetes_verdicts import Verdict, engine_holds, job_verdict, newest_warning
from .kueue_queues import (
    KUEUE_GROUP,
    KUEUE_JOB_UID_LABEL,
    KUEUE_VERSION,
    QueueUse,
    borrowing_words,
    preemption_words,
    queue_uses,
)

Obj = dict[str, Any]
#: why a JobSet job waits before the JobSet controller made its Job
JOBSET_WAITING = (
    "waiting for the JobSet controller to make its Job (if this lasts, JobSet may not be "
    "running in the cluster: ask your admin)"
)
#: deleted pods remembered for their final status (those of followed jobs are
#: dropped at release; this bounds what unfollowed ones can hold)
DELETED_PODS_KEPT = 1000
#: bytes of a pod's own output kept as the job's log when the runner left none
POD_LOG_KEPT = 1024 * 1024
#: waiting engine pods whose events are read per round (the oldest first)
EVENT_READS_PER_ROUND = 50


class KubeError(Exception):
    """The API server said no; ``status`` is its HTTP code, the text its message."""

    def __init__(self, status: int, message: str, reason: str = "") -> None:
        super().__init__(f"Kubernetes API {status} {reason}: {message}".replace("  ", " "))
        self.status = status
        self.reason = reason
        self.message = message


class _Gone(Exception):
    """The watch's resourceVersion is too old (410): list again."""


class KubernetesBackend(Backend):
    """Jobs as Kubernetes ``batch/v1`` Jobs (nbjobs.yaml ``backend.kind: kubernetes``)."""

    #: activeDeadlineSeconds stops a job; time spent waiting for a node or Kueue is not a
    #: reason for the service to stop it
    enforces_time_limit = True
    idempotent_starts = True  # a Job's name is its job's: a second create is a 409, adopted

    kubeconfig = Unicode(
        "",
        help="""A kubeconfig file for the API server. Empty: the ServiceAccount of the
        pod the service runs in, else $KUBECONFIG or ~/.kube/config.

        c.KubernetesBackend.kubeconfig = "/etc/nbjobs/kubeconfig"
        """,
    ).tag(config=True)
    watch_timeout = Integer(
        300, help="seconds a watch request lasts before it is renewed (bookmarks keep its place)"
    ).tag(config=True)
    retry_delay = Float(2.0, help="seconds before a failed list or watch is tried again").tag(
        config=True
    )
    connect_timeout = Float(
        30.0,
        help="""Seconds the service waits, at start, for its first list of Jobs. It does
        not start without one: it would otherwise take every running job for lost.""",
    ).tag(config=True)
    api_connections = Integer(
        20,
        help="""Connections to the API server at most, for Job and pod calls and the
        watches (three of them).

        c.KubernetesBackend.api_connections = 20
        """,
    ).tag(config=True)
    create_attempts = Integer(
        3,
        help="""Times a Job's create is tried when the API server answers 429/5xx or the
        connection fails (the create may have been stored anyway: a retry then finds it,
        409, and adopts it, so no job gets two Jobs).""",
    ).tag(config=True)

    events_interval = Float(
        15.0,
        help="""Seconds between reads of the events of pods that another scheduler (KAI
        Scheduler, Volcano) holds and has not placed: its latest warning is shown as why the
        job waits. 0 reads none.""",
    ).tag(config=True)

    def __init__(self, config_file: Any, **kwargs: Any) -> None:
        super().__init__(config_file, **kwargs)
        self.settings = self.nbjobs.backend.kubernetes
        self.storage = self.nbjobs.storage
        if self.storage.volume is None:
            raise ConfigError(
                "backend kind 'kubernetes' needs storage.volume: the shared volume that holds "
                "users' folders, e.g. {nfs: {server: nfs.example.org, path: /export/home}}"
            )
        self.namespace = self.settings.namespace
        #: the cluster as last seen, by name
        self.jobs: dict[str, Obj] = {}
        self.pods: dict[str, Obj] = {}
        #: the JobSets of multi-node jobs (``multi_node: jobset``), by name; their ranks'
        #: Jobs (``NAME-node-0``) are in ``jobs``, followed as any Job
        self.jobsets: dict[str, Obj] = {}
        #: multi-node flavors run as JobSets here: their JobSets are watched too
        self.uses_jobsets = self.settings.multi_node == "jobset" and any(
            f.nodes > 1 for f in self.nbjobs.flavors
        )
        #: pods as their DELETED event last showed them, by name: with pod-tracking
        #: finalizers a pod is gone before its Job's final condition, and its status
        #: (evicted, preempted, out of memory) is the only place the reason is
        self.deleted_pods: OrderedDict[str, Obj] = OrderedDict()
        #: the node each followed Job's pod was bound to, once known (until release)
        self._placed: dict[str, str] = {}
        #: an engine's latest warning about a Job's waiting pod (or its PodGroup), by Job
        #: name, from the events read every events_interval
        self.engine_said: dict[str, str] = {}
        self.events_readable = True
        #: Kueue's queues (LocalQueues of the jobs' namespace) with their ClusterQueues'
        #: GPUs, read every events_interval while Kueue is on and the service may
        self.kueue_queues: list[QueueUse] = []
        self.kueue_readable = True
        #: Kueue's Workloads may be read (why a job was preempted)
        self.workloads_readable = True
        #: None until nodes are listed, or for good when the ServiceAccount may not read them
        self.nodes: dict[str, Obj] | None = None
        self.nodes_readable = True
        self._synced = {kind: asyncio.Event() for kind in ("jobs", "pods", "nodes", "jobsets")}
        self._tick = asyncio.Event()
        #: the watched objects indexed per Job, for the current tick (see _index)
        self._index_cache: _Index | None = None
        self._cancelling: set[str] = set()
        #: the log file in its job's folder of each followed Job, by Job name
        self._log_files: dict[str, Path] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._api: Any = None
        self._started: asyncio.Future[None] | None = None
        self._last_error: str | None = None
        #: the watches that fail now, by kind, with their last error (for health())
        self._failing: dict[str, str] = {}
        #: when each watch last heard from the API server (an event or a bookmark)
        self._heard: dict[str, float] = {}

    # -- what the service asks ---------------------------------------------------

    @property
    def queues_jobs_itself(self) -> bool:  # type: ignore[override]
        """With Kueue, or without a view of the nodes, every job goes to the cluster at once."""
        return self.settings.kueue is not None or not self.nodes_readable

    def can_ever_fit(self, flavor: Flavor) -> str | None:
        if not (flavor.image or self.settings.default_image):
            return (
                f"flavor {flavor.name!r} names no image and nbjobs.yaml sets no "
                "backend.kubernetes.default_image; ask your admin"
            )
        if not self.nodes or not flavor.gpus or flavor_engine(flavor).engine_decides:
            return None  # no view of the nodes, nodes may yet come, or KAI/Volcano decide
        # Drained and cordoned nodes come back: they count here.
        pod_spec = {**self._flavor_pod_spec(flavor), "affinity": flavor.affinity or {}}
        sizes = [
            int(parse_quantity(node["status"]["allocatable"].get(flavor.gpu_resource, 0)))
            for node in self.nodes.values()
            if node_accepts(
                {**node, "spec": {**node.get("spec", {}), "unschedulable": False}}, pod_spec
            )
            and (node.get("status") or {}).get("allocatable")
        ]
        if sizes and max(sizes) < flavor.gpus:
            return (
                f"flavor {flavor.name!r} needs {flavor.gpus} × {flavor.gpu_resource} on one "  # noqa: RUF001
                f"node and no node it may use has more than {max(sizes)}; pick a smaller flavor"
            )
        return None

    def hands_over(self, flavor: Flavor) -> bool:
        """With Kueue, without a view of the nodes, or for a flavor whose engine (KAI,
        Volcano) places jobs by its own books, a job goes to the cluster at once."""
        return self.queues_jobs_itself or flavor_engine(flavor).engine_decides

    def placement(self, flavor: Flavor, queue: str | None = None) -> str | None:
        engine = flavor_engine(flavor, queue, self.settings.kueue)
        if not engine.engine_decides:
            return None
        chosen = queue or flavor.queue
        where = f", queue {chosen}" if chosen else ""
        return (
            f"queued by {engine_title(engine.scheduler_name)}{where}: it decides when a job starts"
        )

    def free_for(self, flavor: Flavor) -> int:
        if self.nodes is None:
            return 0
        # a multi-node job needs room for each of its pods (one per node it spans)
        return self._capacity(flavor).jobs // flavor.nodes

    def free_gpus(self, flavor: Flavor) -> tuple[int, int] | None:
        if self.nodes is None or not flavor.gpus or flavor_engine(flavor).engine_decides:
            return None  # KAI and Volcano keep their own books: no made-up number
        capacity = self._capacity(flavor)
        if flavor.fraction is not None:
            # slices: jobs of the flavor that fit now, and on the nodes were they empty
            return capacity.jobs, self._slices(flavor)
        return capacity.gpus_free, capacity.gpus_total

    def _slices(self, flavor: Flavor) -> int:
        index = self._index()
        key = f"{flavor.name}\0slices"
        if key not in index.capacity:
            index.capacity[key] = free_slots(
                self._flavor_pod_spec(flavor),
                flavor_resources(flavor),
                list((self.nodes or {}).values()),
                [],
                None,
            )
        return index.capacity[key].jobs

    def seen(self, ref: str) -> Seen | None:
        name = self._name(ref)
        job = self.jobs.get(name)
        if job is None and self._jobset_waits(name):
            return Seen(waiting=JOBSET_WAITING)
        if job is None:
            # gone (cancelled, deleted, past its deadline): where it ran is still known
            node = self._placed.get(name)
            return Seen(node=node) if node else None
        verdict = self._verdict(name)
        use = self.queue_use(job) if verdict.running and self.kueue_queues else None
        borrowing = borrowing_words(use) if use is not None else None
        return Seen(waiting=verdict.waiting, node=verdict.node, borrowing=borrowing)

    # -- life --------------------------------------------------------------------

    async def reconcile(self, wanted: Collection[str]) -> None:
        """List the cluster, then stop Jobs (and bare pods) of jobs the database holds
        finished or does not know: nothing runs that nbjobs thinks has ended."""
        await self._ensure_started()
        for name, job in list(self.jobs.items()):
            labels = (job.get("metadata") or {}).get("labels") or {}
            job_id = labels.get(JOB_ID_LABEL)
            if job_id is None or job_id in wanted or self._finished(job):
                continue
            self.log.warning(
                "Job %s/%s runs but its nbjobs job %s has ended or is unknown; deleting it",
                self.namespace,
                name,
                job_id,
            )
            self._cancelling.add(name)
            await self._delete_job(name)
        for name, jobset in list(self.jobsets.items()):
            labels = (jobset.get("metadata") or {}).get("labels") or {}
            job_id = labels.get(JOB_ID_LABEL)
            if job_id is None or job_id in wanted or jobset_child(name) in self._cancelling:
                continue
            self.log.warning(
                "JobSet %s/%s is there but its nbjobs job %s has ended or is unknown; deleting it",
                self.namespace,
                name,
                job_id,
            )
            self._cancelling.add(jobset_child(name))
            await self._delete_job(jobset_child(name))
        for pod_name, pod in list(self.pods.items()):
            labels = (pod.get("metadata") or {}).get("labels") or {}
            job_id = labels.get(JOB_ID_LABEL)
            if (
                job_id is None
                or job_id in wanted
                or job_name_of(labels) in self.jobs
                or self._pod_ended(pod)
            ):
                continue
            self.log.warning(
                "pod %s/%s has no Job and no active job; deleting it",
                *(
                    self.namespace,
                    pod_name,
                ),
            )
            await self._delete_pod(pod_name)

    def adopt(self, ref: str, gpus: list[str], flavor: Flavor) -> bool:
        name = self._name(ref)
        job = self.jobs.get(name)
        if job is None and self._jobset_waits(name):
            job = self.jobsets[jobset_parent(name) or ""]  # its Job is yet to be made
        if job is None:
            return False
        meta = job.get("metadata") or {}
        owner = (meta.get("annotations") or {}).get(OWNER_ANNOTATION)
        job_id = (meta.get("labels") or {}).get(JOB_ID_LABEL)
        if owner and job_id:
            log_file = job_folder(user_folder(self.storage, owner), job_id) / "log.txt"
            self._log_files[name] = log_file
        return True

    async def start(self, spec: LaunchSpec) -> Launched:
        await self._ensure_started()
        mode, _ = self._shared_file_access()
        manifest = make_job(
            spec,
            self.storage,
            self.settings,
            self.nbjobs.limits,
            mode,
            self.nbjobs.telemetry,
            drained=self.drained,
        )
        self._write_parameters(spec)
        if spec.flavor.nodes > 1 and self.settings.multi_node == "jobset":
            return await self._start_jobset(spec, manifest)
        name = manifest["metadata"]["name"]
        # Counted from now (free_for() sees the Job being created: the service starts
        # several at once), until the API server's answer replaces it.
        self.jobs.setdefault(name, manifest)
        self._changed()

        def uncount() -> None:
            if self.jobs.get(name) is manifest:
                del self.jobs[name]
                self._changed()

        created = await self._create_or_adopt(spec, manifest, uncount)
        if self.jobs.get(name, manifest) is manifest:  # the watch has not brought it yet
            self.jobs[name] = created
            self._changed()
        self._log_files[name] = spec.log_file
        self.log.info("job %s: created Job %s/%s", spec.job_id, self.namespace, name)
        if spec.flavor.nodes > 1:
            await self._name_the_ranks(spec, created)
        return Launched(ref=f"{self.namespace}/{name}", gpus=[])

    async def _name_the_ranks(self, spec: LaunchSpec, job: Obj) -> None:
        """The headless Service of a multi-node Indexed Job, owned by it: without it the
        ranks cannot find rank 0, so a Job whose Service cannot be made goes again."""
        service = make_rank_service(job, (job.get("metadata") or {}).get("uid"))
        try:
            await self._create(service)
        except KubeError as exc:
            if exc.status == 409:
                return  # made by an earlier try of this start
            await self._delete_job(job["metadata"]["name"])
            raise RuntimeError(
                f"the Service that lets the ranks of job {spec.job_id} find each other "
                f"could not be made ({exc}); the job service needs to create services in "
                f"namespace {self.namespace} (rbac.yaml)"
            ) from None

    async def _start_jobset(self, spec: LaunchSpec, job: Obj) -> Launched:
        """Create a multi-node job's JobSet; the Job followed is the one the JobSet
        controller makes for its ranks."""
        manifest = make_jobset(job)
        name = manifest["metadata"]["name"]
        child = jobset_child(name)
        # counted from now, as a Job is (free_for), until the controller's Job replaces it
        placeholder = {**job, "metadata": {**job["metadata"], "name": child}}
        self.jobs.setdefault(child, placeholder)
        self.jobsets.setdefault(name, manifest)
        self._changed()

        def uncount() -> None:
            if self.jobs.get(child) is placeholder:
                del self.jobs[child]
            if self.jobsets.get(name) is manifest:
                del self.jobsets[name]
            self._changed()

        try:
            created = await self._create_or_adopt(spec, manifest, uncount)
        except KubeError as exc:
            if exc.status != 404:
                raise
            raise RuntimeError(
                f"this cluster has no JobSet API ({JOBSET_GROUP}/{JOBSET_VERSION}) "
                "for a job on several nodes: install JobSet, or set "
                "backend.kubernetes.multi_node: indexed-job in nbjobs.yaml"
            ) from None
        if self.jobsets.get(name, manifest) is manifest:
            self.jobsets[name] = created
        if self.jobs.get(child) is placeholder:
            del self.jobs[child]  # the controller's Job, or none yet: the JobSet waits
        self._changed()
        self._log_files[child] = spec.log_file
        self.log.info("job %s: created JobSet %s/%s", spec.job_id, self.namespace, name)
        return Launched(ref=f"{self.namespace}/{child}", gpus=[])

    async def _create_or_adopt(
        self, spec: LaunchSpec, manifest: Obj, uncount: Callable[[], None]
    ) -> Obj:
        """Create a job's Job or JobSet. A create answered 409 is a retried one (the
        service stopped between create and record): what exists is read back and adopted
        when it is this job's. Any other failure first takes back what the caller counted
        (``uncount``), then is raised."""
        kind, name = manifest["kind"], manifest["metadata"]["name"]
        try:
            return await self._create(manifest)
        except asyncio.CancelledError:
            raise  # the service stops: the create may be stored; the next start adopts it
        except BaseException as exc:
            if not isinstance(exc, KubeError) or exc.status != 409:
                uncount()
                raise
        if kind == "JobSet":
            created = await self._call(
                self._custom.get_namespaced_custom_object,
                JOBSET_GROUP,
                JOBSET_VERSION,
                self.namespace,
                "jobsets",
                name,
            )
        else:
            created = await self._call(self._batch.read_namespaced_job, name, self.namespace)
        labels = (created.get("metadata") or {}).get("labels") or {}
        if labels.get(JOB_ID_LABEL) != spec.job_id:
            raise RuntimeError(
                f"a {kind} {name} that nbjobs did not make exists in {self.namespace}"
            )
        self.log.info("job %s: its %s %s existed already; adopted", spec.job_id, kind, name)
        return created

    def _jobset_waits(self, name: str) -> bool:
        """``name`` is a JobSet's ranks' Job that is not made yet, its JobSet there."""
        parent = jobset_parent(name)
        return parent is not None and name not in self.jobs and parent in self.jobsets

    def _write_parameters(self, spec: LaunchSpec) -> None:
        """The job's parameters as a file in its folder on the shared storage, which the
        pod reads (``--parameters``): readable by the pod's account (storage.uid) and, where
        the service can arrange it, by no one else."""
        mode, owner = self._shared_file_access()
        write_parameters_file(spec, mode=mode, owner=owner)

    def _shared_file_access(self) -> tuple[int, tuple[int, int] | None]:
        """The mode of a file in a job's folder that the pod's account (storage.uid and
        gid) and this service both use (the parameters the service writes, the log the
        runner writes), and the owner the service gives one it makes (None: its own)."""
        uid, gid = self.storage.uid, self.storage.gid
        if os.geteuid() == 0 and uid is not None:
            return 0o600, (uid, gid if gid is not None else -1)
        if uid is None or uid == os.geteuid():
            return 0o600, None
        if gid is not None and (gid == os.getegid() or gid in os.getgroups()):
            return 0o640, (-1, gid)
        # The pod's account is neither ours nor in our group: the file is as open as the
        # snapshot beside it, which the pod must read too.
        return 0o644, None

    async def _create(self, manifest: Obj) -> Obj:
        """Create the Job (or a multi-node job's JobSet, or its ranks' Service); try again
        while the API server or the network fails."""
        body = copy.deepcopy(manifest)
        for attempt in range(1, self.create_attempts + 1):
            try:
                if manifest["kind"] == "JobSet":
                    return await self._call(
                        self._custom.create_namespaced_custom_object,
                        JOBSET_GROUP,
                        JOBSET_VERSION,
                        self.namespace,
                        "jobsets",
                        body,
                    )
                if manifest["kind"] == "Service":
                    return await self._call(
                        self._core.create_namespaced_service, self.namespace, body
                    )
                return await self._call(self._batch.create_namespaced_job, self.namespace, body)
            except (KubeError, aiohttp.ClientError, asyncio.TimeoutError) as exc:
                transient = not isinstance(exc, KubeError) or exc.status == 429 or exc.status >= 500
                if not transient or attempt >= self.create_attempts:
                    raise
                self.log.warning(
                    "creating Job %s failed (%s); trying again", manifest["metadata"]["name"], exc
                )
                await asyncio.sleep(self.retry_delay)
        raise AssertionError("unreachable")

    async def wait(self, ref: str) -> Outcome:
        name = self._name(ref)
        await self._ensure_started()
        placed = False
        #: Kueue let it run (it was placed, or its pod ran)
        ran = False
        while True:
            tick = self._tick
            job = self.jobs.get(name)
            if job is None and self._jobset_waits(name):
                await tick.wait()  # the JobSet controller has yet to make its Job
                continue
            if not placed and (node := self._verdict(name).node):
                placed = True  # admins: which job runs where (also the pod's nodeName)
                self.log.info("Job %s/%s runs on node %s", self.namespace, name, node)
            if job is None and name in self._cancelling:
                await self._pods_gone(name)
                await self._keep_pod_log(name)
                return Outcome(None)
            verdict = self._verdict(name)
            ran = ran or placed or verdict.running or self._ran_and_went(name)
            if ran and job is not None and _suspended(job) and name not in self._cancelling:
                return await self._taken_back(name, job)
            if verdict.done:
                if job is None:
                    # Deleted behind our back: stop what it left (orphaned pods) too,
                    # as the API has them (the pods' watch may not have seen them yet).
                    await self._read_pods(name)
                    for pod_name in [p["metadata"]["name"] for p in self._pods_of(name)]:
                        await self._delete_pod(pod_name)
                elif verdict.stuck:
                    self.log.info("Job %s cannot start (%s); deleting it", name, verdict.message)
                    await self._delete_job(name)
                await self._pods_gone(name)
                if job is not None and not verdict.stuck:
                    # The pods' watch may lag the Jobs' one (the two streams are not
                    # ordered): read the pods as they ended from the API itself.
                    await self._read_pods(name)
                    verdict = self._verdict(name)
                await self._keep_pod_log(name)
                return Outcome(
                    verdict.exit_code,
                    verdict.message,
                    state=verdict.state,
                    disrupted=verdict.disrupted,
                    started_at=verdict.started_at,
                    finished_at=verdict.finished_at,
                )
            await tick.wait()

    async def _taken_back(self, name: str, job: Obj) -> Outcome:
        """A Job Kueue suspended again after letting it run: it preempted it (another
        queue of the cohort reclaimed its GPUs, or a job of higher priority needed them).
        The Job goes (a new one goes back to Kueue's queue with the next attempt), the
        pods' log is kept, and the job is queued again."""
        # a JobSet's: Kueue suspended the JobSet, whose Workload says why
        job = self.jobsets.get(jobset_parent(name) or "") or job
        queue = ((job.get("metadata") or {}).get("labels") or {}).get(KUEUE_QUEUE_LABEL)
        self.log.info("Job %s/%s: suspended again after it ran; deleting it", self.namespace, name)
        await self._delete_job(name)
        await self._pods_gone(name)
        await self._keep_pod_log(name)
        if self.settings.kueue is None:
            # no Kueue here: someone suspended it by hand; a disruption like an eviction
            return Outcome(
                None,
                "its Job was suspended outside nbjobs (spec.suspend set on the cluster), "
                "which stopped its pod; re-run it",
                state="failed",
                disrupted=True,
            )
        of = f" from queue {queue}" if queue else ""
        why = await self._why_preempted(job)
        return Outcome(
            None,
            f"Kueue preempted it{of}: {why}"
            if why
            else f"Kueue preempted it{of} to give its GPUs back (to another queue of the "
            "cohort reclaiming what it lent, or to a job of higher priority)",
            disrupted=True,
            requeue=True,
        )

    async def _why_preempted(self, job: Obj) -> str | None:
        """Kueue's reason for preempting a Job, from its Workload (found by the Job's
        uid); None when the service may not read Workloads (an optional read) or Kueue
        said nothing."""
        uid = (job.get("metadata") or {}).get("uid")
        if not uid or not self.workloads_readable:
            return None
        from kubernetes_asyncio import client

        try:
            found = await self._call(
                client.CustomObjectsApi(self._api).list_namespaced_custom_object,
                KUEUE_GROUP,
                KUEUE_VERSION,
                self.namespace,
                "workloads",
                label_selector=f"{KUEUE_JOB_UID_LABEL}={uid}",
            )
        except KubeError as exc:
            if self._kueue_refused(exc, "workloads", "a preempted job is not told why"):
                self.workloads_readable = False
            return None
        except Exception as exc:
            self.log.warning("reading Kueue's workloads failed: %s", exc)
            return None
        return preemption_words(found.get("items") or [])

    async def cancel(self, ref: str) -> None:
        name = self._name(ref)
        self._cancelling.add(name)
        await self._ensure_started()
        await self._delete_job(name)

    def release(self, ref: str) -> None:
        name = self._name(ref)
        self._cancelling.discard(name)
        for pod in [n for n, p in self.deleted_pods.items() if _job_of_pod(p) == name]:
            del self.deleted_pods[pod]
        self._changed()
        self._placed.pop(name, None)
        self._log_files.pop(name, None)

    async def shutdown(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        if self._api is not None:
            await self._api.close()
        self._api = None
        self._started = None

    def inventory(self) -> list[NodeGpus]:
        """Each node's GPUs of the kinds the flavors ask for, and what the pods in the
        jobs' namespace hold of them (pods of other namespaces are not watched). Where a
        node splits its GPUs into more units than it has GPUs (HAMi, time-slicing) and GPU
        feature discovery labels the count, units are turned into GPUs."""
        resources = {f.gpu_resource for f in self.nbjobs.flavors if f.gpus} | {"nvidia.com/gpu"}
        held: dict[tuple[str, str], float] = {}
        for pod in list(self.pods.values()):
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
        drained = self._drained_nodes()
        for node in list((self.nodes or {}).values()):
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
                found.append(
                    NodeGpus(
                        name,
                        gpu_type,
                        resource,
                        total,
                        min(used, total),
                        drained=name in drained
                        or labels.get(DRAIN_LABEL) == "true"
                        or bool((node.get("spec") or {}).get("unschedulable")),
                    )
                )
        return found

    def _drained_nodes(self) -> set[str]:
        """Nodes no new job may land on: nbjobs.yaml's drained_nodes and admins' drains
        (a node labelled nbjobs.io/drain=true is kept off by the affinity's label rule)."""
        return set(self.settings.drained_nodes) | set(self.drained)

    def set_drained(self, nodes: Collection[str]) -> None:
        super().set_drained(nodes)
        self._index_cache = None  # capacity is worked out again without them
        self._changed()

    def maintenance(self, flavor: Flavor) -> str | None:
        if not self.nodes:
            return None
        pod_spec = {**self._flavor_pod_spec(flavor), "affinity": flavor.affinity or {}}
        drained = self._drained_nodes()
        mine = [
            node
            for node in list(self.nodes.values())
            if node_accepts(
                {**node, "spec": {**node.get("spec", {}), "unschedulable": False}}, pod_spec
            )
            and (
                not flavor.gpus
                or parse_quantity(
                    ((node.get("status") or {}).get("allocatable") or {}).get(
                        flavor.gpu_resource, 0
                    )
                )
                > 0
            )
        ]
        off = [
            n
            for n in mine
            if n["metadata"]["name"] in drained
            or ((n["metadata"].get("labels") or {}).get(DRAIN_LABEL) == "true")
            or (n.get("spec") or {}).get("unschedulable")
        ]
        if not off:
            return None
        kind = f"{flavor.gpu_type} " if flavor.gpu_type else ""
        return f"{len(off)} of {len(mine)} {kind}nodes in maintenance"

    def health(self) -> tuple[bool, str]:
        if self._failing:
            kinds = ", ".join(sorted(self._failing))
            error = self._failing[sorted(self._failing)[0]]
            return False, (
                f"cannot follow {kinds} in the cluster ({error}); retrying every "
                f"{self.retry_delay:g} s"
            )
        if not self._synced["jobs"].is_set():
            return False, "not connected to the cluster yet"
        nodes = f", {len(self.nodes)} nodes" if self.nodes is not None else ", nodes not readable"
        heard = [self._heard[k] for k in ("jobs", "pods") if k in self._heard]
        # bookmarks come every minute or so on a quiet cluster: silence much longer than a
        # watch's timeout means the watches are stuck
        lag = time.monotonic() - min(heard) if heard else None
        last = f"; last word from the API server {lag:.0f} s ago" if lag is not None else ""
        healthy = lag is None or lag < self.watch_timeout + 120
        return healthy, (
            f"following namespace {self.namespace}: {len(self.jobs)} Jobs, "
            f"{len(self.pods)} pods{nodes}{last}"
            + ("" if healthy else "; the watches may be stuck (check the service's log)")
        )

    # -- the cluster's view ------------------------------------------------------

    def _name(self, ref: str) -> str:
        return ref.rsplit("/", 1)[-1]

    def _pods_of(self, name: str, *, deleted: bool = False) -> list[Obj]:
        """The Job's pods; with ``deleted``, when none is left, the last ones seen
        deleted (their final status says why the job ended, before the Job's own
        condition does)."""
        index = self._index()
        live = index.pods.get(name, [])
        if live or not deleted:
            return list(live)
        return list(index.deleted.get(name, []))

    def _ran_and_went(self, name: str) -> bool:
        """Pods of the Job were bound to nodes and are going or gone: Kueue had let it
        run and took it back, also when the watches bring all of that at once (under
        load), the Job already suspended again. A bound pod still live and not being
        deleted says nothing: the Job's admission may just not be seen yet (the pods'
        and Jobs' watches are not ordered)."""
        live = self._pods_of(name)
        return any(
            (pod.get("spec") or {}).get("nodeName")
            and (not live or (pod.get("metadata") or {}).get("deletionTimestamp"))
            for pod in live or self._pods_of(name, deleted=True)
        )

    def _index(self) -> _Index:
        """The watched pods per Job and each flavor's capacity, worked out once per
        change of what the watches hold (a new tick), not once per question: every
        follower asks on every change, so without it following n jobs cost n² a change.

        Read through snapshots (``list()``, taken at once): seen() runs on the
        service's database threads too, while the watches change the dicts here.
        """
        tick = self._tick
        index = self._index_cache
        if index is not None and index.tick is tick:
            return index
        index = _Index(tick)
        for pod in list(self.pods.values()):
            if (job := _job_of_pod(pod)) is not None:
                index.pods.setdefault(job, []).append(pod)
        for pod in list(self.deleted_pods.values()):
            if (job := _job_of_pod(pod)) is not None:
                index.deleted.setdefault(job, []).append(pod)
        self._index_cache = index
        return index

    def _remember_deleted(self, pod: Obj) -> None:
        if _job_of_pod(pod) is None:
            return
        self.deleted_pods[pod["metadata"]["name"]] = pod
        self.deleted_pods.move_to_end(pod["metadata"]["name"])
        while len(self.deleted_pods) > DELETED_PODS_KEPT:
            self.deleted_pods.popitem(last=False)

    def _verdict(self, name: str) -> Verdict:
        job = self.jobs.get(name)
        flavor = None
        capacity = None
        if job is not None:
            flavor_name = ((job.get("metadata") or {}).get("labels") or {}).get("nbjobs.io/flavor")
            flavor = self.nbjobs.flavor(flavor_name or "")
            if flavor is not None and self.nodes is not None:
                capacity = functools.partial(self._capacity, flavor)
        verdict = job_verdict(
            job, self._pods_of(name, deleted=True), flavor, capacity, self.engine_said.get(name)
        )
        if verdict.node:
            # kept once bound, for the job's record: every node its ranks ran on, also
            # those whose pods are gone by its end
            known = (self._placed.get(name) or "").split(NODE_SEPARATOR)
            new = [n for n in verdict.node.split(NODE_SEPARATOR) if n not in known]
            verdict.node = NODE_SEPARATOR.join([n for n in known if n] + new)
            self._placed[name] = verdict.node
        return verdict

    @staticmethod
    def _finished(job: Obj) -> bool:
        return any(
            c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
            for c in (job.get("status") or {}).get("conditions") or []
        )

    @staticmethod
    def _pod_ended(pod: Obj) -> bool:
        return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")

    def _flavor_pod_spec(self, flavor: Flavor) -> Obj:
        spec: Obj = {
            "affinity": node_affinity(flavor.affinity, self._drained_nodes()),
            "tolerations": flavor.tolerations,
        }
        if flavor.node_selector:
            spec["nodeSelector"] = flavor.node_selector
        return spec

    def _capacity(self, flavor: Flavor) -> Capacity:
        index = self._index()
        if flavor.name not in index.capacity:
            index.capacity[flavor.name] = self._work_out_capacity(flavor)
        return index.capacity[flavor.name]

    def _work_out_capacity(self, flavor: Flavor) -> Capacity:
        pods = list(self.pods.values())
        # A Job created a moment ago has no pod yet (a multi-node one maybe not all of
        # them): count the pods it will make.
        made = Counter(_job_of_pod(p) for p in pods)
        for name, job in list(self.jobs.items()):
            spec = job.get("spec") or {}
            if self._finished(job) or spec.get("suspend"):
                continue
            template = (spec.get("template") or {}).get("spec") or {}
            missing = (spec.get("parallelism") or 1) - made.get(name, 0)
            pods += [
                {"spec": {"containers": template.get("containers") or []}, "status": {}}
                for _ in range(missing)
            ]
        return free_slots(
            self._flavor_pod_spec(flavor),
            flavor_resources(flavor),
            list((self.nodes or {}).values()),
            pods,
            flavor.gpu_resource if flavor.gpus else None,
        )

    # -- talking to the API server -----------------------------------------------

    async def _ensure_started(self) -> None:
        if self._started is None:
            self._started = asyncio.ensure_future(self._connect())
        await asyncio.shield(self._started)

    async def _connect(self) -> None:
        from kubernetes_asyncio import client, config

        configuration = client.Configuration()
        if self.kubeconfig:
            await config.load_kube_config(
                config_file=self.kubeconfig, client_configuration=configuration
            )
        else:
            try:
                config.load_incluster_config(client_configuration=configuration)
            except config.ConfigException:
                await config.load_kube_config(client_configuration=configuration)
        configuration.connection_pool_maxsize = self.api_connections
        self._api = client.ApiClient(configuration)
        self._batch = client.BatchV1Api(self._api)
        self._core = client.CoreV1Api(self._api)
        self._custom = client.CustomObjectsApi(self._api)
        self._tasks = [
            asyncio.ensure_future(
                self._reflect(
                    "jobs",
                    lambda **kw: self._batch.list_namespaced_job(
                        self.namespace, label_selector=MANAGED_SELECTOR, **kw
                    ),
                    self.jobs,
                )
            ),
            asyncio.ensure_future(
                self._reflect(
                    "pods",
                    lambda **kw: self._core.list_namespaced_pod(self.namespace, **kw),
                    self.pods,
                )
            ),
            asyncio.ensure_future(self._reflect_nodes()),
        ]
        if self.uses_jobsets:
            self._tasks.append(
                asyncio.ensure_future(
                    self._reflect(
                        "jobsets",
                        lambda **kw: self._custom.list_namespaced_custom_object(
                            JOBSET_GROUP,
                            JOBSET_VERSION,
                            self.namespace,
                            "jobsets",
                            label_selector=MANAGED_SELECTOR,
                            **kw,
                        ),
                        self.jobsets,
                    )
                )
            )
        if self.events_interval > 0:
            self._tasks.append(asyncio.ensure_future(self._read_engine_events()))
            if self.settings.kueue is not None:
                self._tasks.append(asyncio.ensure_future(self._read_kueue_queues()))
        waiting = [asyncio.ensure_future(self._synced[k].wait()) for k in ("jobs", "pods")]
        # Whether nodes can be read decides how the service queues: know it before the
        # first job is scheduled (nodes are optional: no answer in time is not fatal).
        nodes = asyncio.ensure_future(self._synced["nodes"].wait())
        try:
            done, _ = await asyncio.wait([*waiting, nodes], timeout=self.connect_timeout)
        finally:
            for w in [*waiting, nodes]:
                w.cancel()
        if len([w for w in waiting if w in done]) < len(waiting):
            raise RuntimeError(
                f"cannot list Jobs and pods in namespace {self.namespace!r} within "
                f"{self.connect_timeout:g} s ({self._last_error or 'no answer'}); check the "
                "service's kubeconfig or ServiceAccount and its Role"
            )
        await self._keep_network_policy(client.NetworkingV1Api(self._api))

    async def _keep_network_policy(self, networking: Any) -> None:
        """Make the jobs' NetworkPolicy what nbjobs.yaml says (``network.jobs``): create
        or replace it, or remove the one nbjobs made when no rules are set. Rules that
        cannot be written stop the start: jobs would reach what the admin shut off."""
        wanted = jobs_policy(self.nbjobs)
        try:
            current: Obj | None = await self._call(
                networking.read_namespaced_network_policy, JOBS_POLICY, self.namespace
            )
        except KubeError as exc:
            if exc.status != 404 and wanted is not None:
                raise self._policy_refused(exc) from None
            current = None  # none, or none this service may read (and none wanted)
        try:
            if wanted is None:
                labels = ((current or {}).get("metadata") or {}).get("labels") or {}
                if current is not None and labels.items() >= MANAGED_BY.items():
                    await self._call(
                        networking.delete_namespaced_network_policy, JOBS_POLICY, self.namespace
                    )
                    self.log.info(
                        "nbjobs: removed the jobs' NetworkPolicy (no rules in network.jobs)"
                    )
                return
            if current is None:
                await self._call(
                    networking.create_namespaced_network_policy, self.namespace, wanted
                )
            elif current.get("spec") != wanted["spec"]:
                wanted["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                await self._call(
                    networking.replace_namespaced_network_policy,
                    JOBS_POLICY,
                    self.namespace,
                    wanted,
                )
            else:
                return
        except KubeError as exc:
            if wanted is None:
                self.log.warning("nbjobs: could not remove the jobs' NetworkPolicy: %s", exc)
                return
            raise self._policy_refused(exc) from None
        self.log.info(
            "nbjobs: the jobs' NetworkPolicy %s in %s allows what network.jobs lists",
            JOBS_POLICY,
            self.namespace,
        )

    def _policy_refused(self, exc: KubeError) -> RuntimeError:
        return RuntimeError(
            f"network.jobs.egress is set, but the NetworkPolicy {JOBS_POLICY} in namespace "
            f"{self.namespace!r} cannot be written ({exc}); give the service's Role "
            "networkpolicies (get, create, update, delete) as in the example rbac.yaml, or "
            "remove network.jobs.egress. No job starts until then."
        )

    async def _call(self, method: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Obj:
        """Call the API with raw JSON in and out (plain dicts, like the builders make)."""
        response = await method(*args, _preload_content=False, **kwargs)
        try:
            body = await response.read()
            if not 200 <= response.status < 300:
                raise _error(response.status, body)
            return json.loads(body) if body else {}
        finally:
            response.release()

    async def _delete_job(self, name: str) -> None:
        """Delete a Job and its pods; a JobSet's ranks' Job: its JobSet (the controller
        would make a deleted Job again), which takes its Job, pods and Service along."""
        parent = jobset_parent(name)
        try:
            if parent is not None:
                await self._call(
                    self._custom.delete_namespaced_custom_object,
                    JOBSET_GROUP,
                    JOBSET_VERSION,
                    self.namespace,
                    "jobsets",
                    parent,
                    propagation_policy="Background",
                )
                return
            await self._call(
                self._batch.delete_namespaced_job,
                name,
                self.namespace,
                propagation_policy="Background",
            )
        except KubeError as exc:
            if exc.status != 404:
                raise

    async def _delete_pod(self, name: str) -> None:
        try:
            await self._call(self._core.delete_namespaced_pod, name, self.namespace)
        except KubeError as exc:
            if exc.status != 404:
                raise

    async def _read_pods(self, name: str) -> None:
        """Refresh the cache with the Job's pods as the API server has them now."""
        try:
            listed = await self._call(
                self._core.list_namespaced_pod,
                self.namespace,
                # "job-name": set by the Job controller on every version (the
                # batch.kubernetes.io/ one only from 1.27)
                label_selector=f"job-name={name}",
            )
        except (KubeError, OSError) as exc:
            self.log.warning("cannot read the pods of Job %s (%s)", name, exc)
            return
        for item in listed.get("items") or []:
            self.pods[item["metadata"]["name"]] = item
        self._changed()

    async def _pods_gone(self, name: str) -> None:
        """Wait (a while) until the job's pods have ended: the runner saves its output on
        SIGTERM, and the status file is final only after that."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.termination_grace_seconds + 15
        while loop.time() < deadline:
            tick = self._tick
            if all(
                self._pod_ended(p) and not (p.get("metadata") or {}).get("deletionTimestamp")
                for p in self._pods_of(name)
            ) or not self._pods_of(name):
                return
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(tick.wait(), timeout=max(0.01, deadline - loop.time()))

    def _kind_of(self, store: dict[str, Obj]) -> str:
        kinds = {id(self.jobs): "jobs", id(self.pods): "pods", id(self.jobsets): "jobsets"}
        return kinds.get(id(store), "nodes")

    def _changed(self) -> None:
        tick, self._tick = self._tick, asyncio.Event()
        tick.set()

    async def _reflect(
        self, kind: str, lister: Callable[..., Awaitable[Any]], store: dict[str, Obj]
    ) -> None:
        """List, then watch from the list's resourceVersion; list again after 410 Gone."""
        version: str | None = None
        while True:
            try:
                if version is None:
                    listed = await self._call(lister)
                    store.clear()
                    for item in listed.get("items") or []:
                        store[item["metadata"]["name"]] = item
                    version = (listed.get("metadata") or {}).get("resourceVersion") or ""
                    self._failing.pop(kind, None)
                    self._heard[kind] = time.monotonic()
                    self._synced[kind].set()
                    self._changed()
                version = await self._watch(lister, store, version)
            except _Gone:
                self.log.info("watch of %s: resourceVersion too old; listing again", kind)
                version = None
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._last_error = self._failing[kind] = str(exc)
                self.log.warning("watch of %s failed (%s); retrying", kind, exc)
                await asyncio.sleep(self.retry_delay)

    async def _watch(
        self, lister: Callable[..., Awaitable[Any]], store: dict[str, Obj], version: str
    ) -> str:
        """One watch request; returns the resourceVersion to resume from."""
        response = await lister(
            watch=True,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=self.watch_timeout,
            _preload_content=False,
            _request_timeout=(30, self.watch_timeout + 60),
        )
        try:
            if response.status == 410:
                raise _Gone()
            if response.status != 200:
                raise _error(response.status, await response.read())
            async for line in response.content:
                if not line.strip():
                    continue
                event = json.loads(line)
                obj = event.get("object") or {}
                kind = event.get("type")
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        raise _Gone()
                    raise KubeError(
                        obj.get("code", 500), obj.get("message", ""), obj.get("reason", "")
                    )
                version = (obj.get("metadata") or {}).get("resourceVersion") or version
                self._heard[self._kind_of(store)] = time.monotonic()
                if kind == "BOOKMARK":
                    continue
                name = obj["metadata"]["name"]
                if kind == "DELETED":
                    store.pop(name, None)
                    if store is self.pods:
                        self._remember_deleted(obj)
                else:
                    store[name] = obj
                self._changed()
            # the server ended the request at its timeout: it was there all along
            self._heard[self._kind_of(store)] = time.monotonic()
        finally:
            response.release()
        return version

    async def _reflect_nodes(self) -> None:
        nodes: dict[str, Obj] = {}
        lister = self._core.list_node
        try:
            await self._call(lister, limit=1)
        except KubeError as exc:
            if exc.status in (401, 403):
                self.nodes_readable = False
                self.log.warning(
                    "the service may not read nodes (%s): no free-GPU counts, and every job "
                    "is handed to the cluster at once; hub_config/examples/kubernetes/rbac.yaml "
                    "has the optional ClusterRole",
                    exc.message,
                )
                self._synced["nodes"].set()
                return
        self.nodes = nodes
        await self._reflect("nodes", lister, nodes)

    async def _read_engine_events(self) -> None:
        """Every events_interval, the latest warning an engine left about each pod it
        holds unplaced; stops for good (with one warning in the log) when the Role does
        not let the service list events."""
        while True:
            await asyncio.sleep(self.events_interval)
            try:
                said = await self._engine_events()
            except asyncio.CancelledError:
                raise
            except KubeError as exc:
                if exc.status in (401, 403):
                    self.events_readable = False
                    self.log.warning(
                        "the service may not list events (%s): a job KAI Scheduler or Volcano "
                        "holds shows only what the pod's condition says; "
                        "hub_config/examples/kubernetes/rbac.yaml grants it",
                        exc.message,
                    )
                    return
                self.log.warning("reading events failed (%s); trying again later", exc)
                continue
            except Exception as exc:
                self.log.warning("reading events failed (%s); trying again later", exc)
                continue
            if said != self.engine_said:
                self.engine_said = said
                self._changed()

    async def _read_kueue_queues(self) -> None:
        """Every events_interval, Kueue's queues: what each ClusterQueue's quota is,
        uses, borrows from its cohort and lends. Stops for good (one warning in the log)
        when the service may not list them: an optional read (rbac.yaml's ClusterRole)."""
        from kubernetes_asyncio import client

        custom = client.CustomObjectsApi(self._api)
        gpus = {f.gpu_resource for f in self.nbjobs.flavors if f.gpus}
        while True:
            try:
                local = await self._call(
                    custom.list_namespaced_custom_object,
                    KUEUE_GROUP,
                    KUEUE_VERSION,
                    self.namespace,
                    "localqueues",
                )
                cluster = await self._call(
                    custom.list_cluster_custom_object, KUEUE_GROUP, KUEUE_VERSION, "clusterqueues"
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                so = "borrowed and lent GPUs are not shown"
                if isinstance(exc, KubeError) and self._kueue_refused(exc, "queues", so):
                    self.kueue_readable = False
                    return
                self.log.warning("reading Kueue's queues failed (%s); trying again later", exc)
            else:
                found = queue_uses(local.get("items") or [], cluster.get("items") or [], gpus)
                if found != self.kueue_queues:
                    self.kueue_queues = found
                    self._changed()
            await asyncio.sleep(self.events_interval)

    def _kueue_refused(self, exc: KubeError, what: str, so: str) -> bool:
        """Whether ``exc`` says the service may not read Kueue's ``what`` (no right in
        the optional ClusterRole, or no Kueue installed); says so in the log, with what
        it means (``so``). The caller stops reading them for good."""
        if exc.status not in (401, 403, 404):
            return False
        self.log.warning(
            "the service may not read Kueue's %s (%s): %s; "
            "hub_config/examples/kubernetes/rbac.yaml grants it",
            what,
            exc.message,
            so,
        )
        return True

    def queues(self) -> list[QueueUse]:
        return list(self.kueue_queues)

    def queue_use(self, job: Obj | None) -> QueueUse | None:
        """The Kueue queue a Job was sent to, as last read (None: none, or not known)."""
        queue = (((job or {}).get("metadata") or {}).get("labels") or {}).get(KUEUE_QUEUE_LABEL)
        return next((q for q in self.kueue_queues if q.local_queue == queue), None)

    async def _engine_events(self) -> dict[str, str]:
        """The newest warning about each waiting engine pod, by Job name: events on the
        pod itself, and on its PodGroup (KAI's podgrouper and Volcano name a pod's group
        after its owner's uid, so a group whose name holds the Job's uid is the Job's)."""
        held = {
            job: pod
            for pod in list(self.pods.values())
            if (job := _job_of_pod(pod)) is not None and engine_holds(pod)
        }
        if not held:
            return {}
        oldest = sorted(
            held.items(), key=lambda kv: kv[1]["metadata"].get("creationTimestamp") or ""
        )[:EVENT_READS_PER_ROUND]
        lists = await asyncio.gather(
            self._list_events("involvedObject.kind=PodGroup"),
            *(
                self._list_events(
                    f"involvedObject.kind=Pod,involvedObject.name={pod['metadata']['name']}"
                )
                for _, pod in oldest
            ),
        )
        groups, per_pod = lists[0], lists[1:]
        said = {}
        for (job, _), events in zip(oldest, per_pod, strict=True):
            uid = ((self.jobs.get(job) or {}).get("metadata") or {}).get("uid")
            mine = events + [
                e for e in groups if uid and uid in (e.get("involvedObject") or {}).get("name", "")
            ]
            if (text := newest_warning(mine)) is not None:
                said[job] = text
        return said

    async def _list_events(self, selector: str) -> list[Obj]:
        listed = await self._call(
            self._core.list_namespaced_event, self.namespace, field_selector=selector
        )
        return list(listed.get("items") or [])

    async def _keep_pod_log(self, name: str) -> None:
        """When the ended job's runner left no log in its folder (it never ran: an image
        without nbjobs, a command the image cannot run), keep what its pod printed there
        instead, if the pod is still there: the user's only clue.

        Never a second writer: the log is made only where none exists (``O_EXCL``, which
        an NFS server decides, whatever this machine's cache says), once the container
        has ended, and without following links in the user's folder.
        """
        log_file = self._log_files.get(name)
        pods = sorted(
            self._pods_of(name),  # a deleted pod's log is gone with it
            key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or "",
            reverse=True,
        )
        if log_file is None or not pods or self._runner_log_exists(name, log_file):
            return
        pod_name = pods[0]["metadata"]["name"]
        try:
            response: Any = await self._core.read_namespaced_pod_log(
                pod_name,
                self.namespace,
                container=CONTAINER_NAME,
                limit_bytes=POD_LOG_KEPT,
                _preload_content=False,
            )
            try:
                status, body = response.status, await response.read()
            finally:
                response.release()
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            self.log.info("job %s left no log, and its pod's log cannot be read: %s", name, exc)
            return
        if status != 200 or not body:
            return  # the container never started, or the pod is gone already
        try:
            log = open_in_job_dir(log_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            return  # the runner's, after all
        except (FilesChanged, OSError) as exc:
            self.log.warning(
                "job %s: its pod's log is not kept: %s in its folder (links are not followed)",
                name,
                exc,
            )
            return
        with os.fdopen(log, "wb") as out:
            out.write(body)
            if len(body) >= POD_LOG_KEPT:
                out.write(
                    f"\n[nbjobs] the pod printed more; the first {POD_LOG_KEPT:,} bytes are "
                    "kept here\n".encode()
                )
        self.log.info("job %s: the runner left no log; its pod's output is kept instead", name)

    def _runner_log_exists(self, name: str, log_file: Path) -> bool:
        try:
            os.close(open_in_job_dir(log_file, os.O_RDONLY))
        except FileNotFoundError:
            return False
        except (FilesChanged, OSError) as exc:
            self.log.warning("job %s: its log cannot be opened: %s", name, exc)
            return True  # nothing to add there
        return True


def _suspended(job: Obj) -> bool:
    return bool((job.get("spec") or {}).get("suspend"))


def _job_of_pod(pod: Obj) -> str | None:
    """The name of the Job a pod belongs to (either label the Job controller sets; a
    JobSet's pods belong to the Job its controller made, not one nbjobs named)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return (
        labels.get("batch.kubernetes.io/job-name") or labels.get("job-name") or job_name_of(labels)
    )


def _error(status: int, body: bytes) -> KubeError:
    try:
        parsed = json.loads(body)
    except ValueError:
        return KubeError(status, body.decode(errors="replace")[:300])
    return KubeError(status, parsed.get("message", ""), parsed.get("reason", ""))


@dataclass
class _Index:
    """What :meth:`KubernetesBackend._index` works out once per tick."""

    tick: asyncio.Event
    pods: dict[str, list[Obj]] = field(default_factory=dict)
    deleted: dict[str, list[Obj]] = field(default_factory=dict)
    capacity: dict[str, Capacity] = field(default_factory=dict)

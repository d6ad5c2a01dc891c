"""The Kubernetes backend: every job one ``batch/v1`` Job on the GPU cluster.

Kubernetes places the jobs (its scheduler, priority classes, optionally Kueue);
this backend creates the Job that :func:`make_job` builds and answers the service's
questions from its copy of the cluster. Three modules, one concern each:

- here, the rules: what to create and when, what a Job's end means for its job, how
  many more jobs of a flavor fit, what a node drain takes off;
- :mod:`.kubernetes_mirror`: the copy of the cluster (Jobs, pods, JobSets, nodes,
  engines' events, Kueue's queues) that list-then-watch loops keep up to date;
- :mod:`.kubernetes_api`: the calls to the API server, raw JSON in and out.

What the backend answers from the copy:

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
import functools
import os
import time
from collections import Counter
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from traitlets import Float, Integer, Unicode

from nbjobs.config import ConfigError, Flavor
from nbjobs.engines import KUEUE_QUEUE_LABEL, engine_title
from nbjobs.models import NODE_SEPARATOR
from nbjobs.network import jobs_policy
from nbjobs.storage import job_folder, user_folder

from .base import (
    Backend,
    Launched,
    LaunchSpec,
    NodeGpus,
    Outcome,
    Seen,
    write_parameters_file,
)
from .kubernetes_api import KubeApi, KubeError
from .kubernetes_capacity import (
    Capacity,
    free_slots,
    node_accepts,
    node_gpus,
    nodes_off,
    parse_quantity,
)
from .kubernetes_keep import keep_network_policy, keep_pod_log
from .kubernetes_mirror import ClusterMirror, Reads, job_finished, job_of_pod
from .kubernetes_objects import (
    JOB_ID_LABEL,
    JOBSET_GROUP,
    JOBSET_VERSION,
    OWNER_ANNOTATION,
    flavor_engine,
    flavor_resources,
    jobset_child,
    jobset_parent,
    make_job,
    make_jobset,
    make_rank_service,
    node_affinity,
)
from .kubernetes_reconcile import reconcile
from .kubernetes_verdicts import Verdict, job_verdict, refused_for_too_long
from .kueue_queues import (
    KUEUE_GROUP,
    KUEUE_JOB_UID_LABEL,
    KUEUE_VERSION,
    QueueUse,
    borrowing_words,
    preemption_words,
)

Obj = dict[str, Any]
#: why a JobSet job waits before the JobSet controller made its Job
JOBSET_WAITING = (
    "waiting for the JobSet controller to make its Job (if this lasts, JobSet may not be "
    "running in the cluster: ask your admin)"
)


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
        5.0,
        help="""Seconds between reads of the events of Jobs the cluster makes no pod for
        (a ResourceQuota, Pod Security admission, a LimitRange, a webhook refuses it) and of
        pods that another scheduler (KAI Scheduler, Volcano) holds and has not placed: their
        latest warning is shown as why the job waits. Reads only while such a job exists.
        0 reads none.""",
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
        #: multi-node flavors run as JobSets here: their JobSets are watched too
        self.uses_jobsets = self.settings.multi_node == "jobset" and any(
            f.nodes > 1 for f in self.nbjobs.flavors
        )
        self.api = KubeApi(self.namespace, self.log)
        #: the cluster as last seen
        self.mirror = ClusterMirror(
            self.api,
            Reads(
                watch_timeout=self.watch_timeout,
                retry_delay=self.retry_delay,
                connect_timeout=self.connect_timeout,
                events_interval=self.events_interval,
                jobsets=self.uses_jobsets,
                kueue_gpus=None
                if self.settings.kueue is None
                else {f.gpu_resource for f in self.nbjobs.flavors if f.gpus},
            ),
            self.log,
        )
        #: the node each followed Job's pod was bound to, once known (until release)
        self._placed: dict[str, str] = {}
        #: Kueue's Workloads may be read (why a job was preempted)
        self.workloads_readable = True
        self._cancelling: set[str] = set()
        #: the log file in its job's folder of each followed Job, by Job name
        self._log_files: dict[str, Path] = {}
        self._started: asyncio.Future[None] | None = None

    # -- what the service asks ---------------------------------------------------

    @property
    def queues_jobs_itself(self) -> bool:  # type: ignore[override]
        """With Kueue, or without a view of the nodes, every job goes to the cluster at once."""
        return self.settings.kueue is not None or not self.mirror.nodes_readable

    def can_ever_fit(self, flavor: Flavor) -> str | None:
        if not (flavor.image or self.settings.default_image):
            return (
                f"flavor {flavor.name!r} names no image and nbjobs.yaml sets no "
                "backend.kubernetes.default_image; ask your admin"
            )
        if not self.mirror.nodes or not flavor.gpus or flavor_engine(flavor).engine_decides:
            return None  # no view of the nodes, nodes may yet come, or KAI/Volcano decide
        # Drained and cordoned nodes come back: they count here.
        pod_spec = {**self._flavor_pod_spec(flavor), "affinity": flavor.affinity or {}}
        sizes = [
            int(parse_quantity(node["status"]["allocatable"].get(flavor.gpu_resource, 0)))
            for node in self.mirror.nodes.values()
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
        if self.mirror.nodes is None:
            return 0
        # a multi-node job needs room for each of its pods (one per node it spans)
        return self._capacity(flavor).jobs // flavor.nodes

    def free_gpus(self, flavor: Flavor) -> tuple[int, int] | None:
        if self.mirror.nodes is None or not flavor.gpus or flavor_engine(flavor).engine_decides:
            return None  # KAI and Volcano keep their own books: no made-up number
        capacity = self._capacity(flavor)
        if flavor.fraction is not None:
            # slices: jobs of the flavor that fit now, and on the nodes were they empty
            return capacity.jobs, self._slices(flavor)
        return capacity.gpus_free, capacity.gpus_total

    def _slices(self, flavor: Flavor) -> int:
        index = self.mirror.index()
        key = f"{flavor.name}\0slices"
        if key not in index.capacity:
            index.capacity[key] = free_slots(
                self._flavor_pod_spec(flavor),
                flavor_resources(flavor),
                list((self.mirror.nodes or {}).values()),
                [],
                None,
            )
        return index.capacity[key].jobs

    def seen(self, ref: str) -> Seen | None:
        name = self._name(ref)
        job = self.mirror.jobs.get(name)
        if job is None and self._jobset_waits(name):
            return Seen(waiting=JOBSET_WAITING)
        if job is None:
            # gone (cancelled, deleted, past its deadline): where it ran is still known
            node = self._placed.get(name)
            return Seen(node=node) if node else None
        verdict = self._verdict(name)
        use = self.mirror.queue_use(job) if verdict.running and self.mirror.kueue_queues else None
        borrowing = borrowing_words(use) if use is not None else None
        return Seen(waiting=verdict.waiting, node=verdict.node, borrowing=borrowing)

    # -- life --------------------------------------------------------------------

    async def reconcile(self, wanted: Collection[str]) -> None:
        """List the cluster, then stop what no job of this nbjobs wants
        (:func:`.kubernetes_reconcile.reconcile`)."""
        await self._ensure_started()
        await reconcile(self, wanted)

    def adopt(self, ref: str, gpus: list[str], flavor: Flavor) -> bool:
        name = self._name(ref)
        job = self.mirror.jobs.get(name)
        if job is None and self._jobset_waits(name):
            job = self.mirror.jobsets[jobset_parent(name) or ""]  # its Job is yet to be made
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
            instance=self.instance,
        )
        self._write_parameters(spec)
        if spec.flavor.nodes > 1 and self.settings.multi_node == "jobset":
            return await self._start_jobset(spec, manifest)
        name = manifest["metadata"]["name"]
        # Counted from now (free_for() sees the Job being created: the service starts
        # several at once), until the API server's answer replaces it.
        self.mirror.jobs.setdefault(name, manifest)
        self.mirror.changed()

        def uncount() -> None:
            if self.mirror.jobs.get(name) is manifest:
                del self.mirror.jobs[name]
                self.mirror.changed()

        created = await self._create_or_adopt(spec, manifest, uncount)
        if self.mirror.jobs.get(name, manifest) is manifest:  # the watch has not brought it yet
            self.mirror.jobs[name] = created
            self.mirror.changed()
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
            await self.api.create(service, self.create_attempts, self.retry_delay)
        except KubeError as exc:
            if exc.status == 409:
                return  # made by an earlier try of this start
            await self.api.delete_job(job["metadata"]["name"])
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
        self.mirror.jobs.setdefault(child, placeholder)
        self.mirror.jobsets.setdefault(name, manifest)
        self.mirror.changed()

        def uncount() -> None:
            if self.mirror.jobs.get(child) is placeholder:
                del self.mirror.jobs[child]
            if self.mirror.jobsets.get(name) is manifest:
                del self.mirror.jobsets[name]
            self.mirror.changed()

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
        if self.mirror.jobsets.get(name, manifest) is manifest:
            self.mirror.jobsets[name] = created
        if self.mirror.jobs.get(child) is placeholder:
            del self.mirror.jobs[child]  # the controller's Job, or none yet: the JobSet waits
        self.mirror.changed()
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
            return await self.api.create(manifest, self.create_attempts, self.retry_delay)
        except asyncio.CancelledError:
            raise  # the service stops: the create may be stored; the next start adopts it
        except BaseException as exc:
            if not isinstance(exc, KubeError) or exc.status != 409:
                uncount()
                raise
        created = await self.api.read(kind, name)
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
        return parent is not None and name not in self.mirror.jobs and parent in self.mirror.jobsets

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

    async def wait(self, ref: str) -> Outcome:
        name = self._name(ref)
        await self._ensure_started()
        placed = False
        #: Kueue let it run (it was placed, or its pod ran)
        ran = False
        while True:
            tick = self.mirror.job_tick(name)
            job = self.mirror.jobs.get(name)
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
            ran = ran or placed or verdict.running or self.mirror.ran_and_went(name)
            if ran and job is not None and _suspended(job) and name not in self._cancelling:
                return await self._taken_back(name, job)
            if verdict.done:
                if job is None:
                    # Deleted behind our back: stop what it left (orphaned pods) too,
                    # as the API has them (the pods' watch may not have seen them yet).
                    await self.mirror.read_pods(name)
                    for pod_name in [p["metadata"]["name"] for p in self.mirror.pods_of(name)]:
                        await self.api.delete_pod(pod_name)
                elif verdict.stuck:
                    self.log.info("Job %s cannot start (%s); deleting it", name, verdict.message)
                    await self.api.delete_job(name)
                await self._pods_gone(name)
                if job is not None and not verdict.stuck:
                    # The pods' watch may lag the Jobs' one (the two streams are not
                    # ordered): read the pods as they ended from the API itself.
                    await self.mirror.read_pods(name)
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
            # the cluster refusing its pod: looked at again when the admin's rule may end it
            again = self.settings.fail_refused_after if verdict.refused else None
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(tick.wait(), again)

    async def _taken_back(self, name: str, job: Obj) -> Outcome:
        """A Job Kueue suspended again after letting it run: it preempted it (another
        queue of the cohort reclaimed its GPUs, or a job of higher priority needed them).
        The Job goes (a new one goes back to Kueue's queue with the next attempt), the
        pods' log is kept, and the job is queued again."""
        # a JobSet's: Kueue suspended the JobSet, whose Workload says why
        job = self.mirror.jobsets.get(jobset_parent(name) or "") or job
        queue = ((job.get("metadata") or {}).get("labels") or {}).get(KUEUE_QUEUE_LABEL)
        self.log.info("Job %s/%s: suspended again after it ran; deleting it", self.namespace, name)
        await self.api.delete_job(name)
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
        try:
            found = await self.api.call(
                self.api.custom.list_namespaced_custom_object,
                KUEUE_GROUP,
                KUEUE_VERSION,
                self.namespace,
                "workloads",
                label_selector=f"{KUEUE_JOB_UID_LABEL}={uid}",
            )
        except KubeError as exc:
            if self.mirror.kueue_refused(exc, "workloads", "a preempted job is not told why"):
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
        await self.api.delete_job(name)

    def release(self, ref: str) -> None:
        name = self._name(ref)
        self._cancelling.discard(name)
        self.mirror.forget_deleted(name)
        self._placed.pop(name, None)
        self._log_files.pop(name, None)

    async def shutdown(self) -> None:
        await self.mirror.stop()
        await self.api.close()
        self._started = None

    def inventory(self) -> list[NodeGpus]:
        """Each node's GPUs of the kinds the flavors ask for, and what the pods in the
        jobs' namespace hold of them (pods of other namespaces are not watched)."""
        resources = {f.gpu_resource for f in self.nbjobs.flavors if f.gpus} | {"nvidia.com/gpu"}
        return node_gpus(
            list((self.mirror.nodes or {}).values()),
            list(self.mirror.pods.values()),
            resources,
            self._drained_nodes(),
        )

    def _drained_nodes(self) -> set[str]:
        """Nodes no new job may land on: nbjobs.yaml's drained_nodes and admins' drains
        (a node labelled nbjobs.io/drain=true is kept off by the affinity's label rule)."""
        return set(self.settings.drained_nodes) | set(self.drained)

    def set_drained(self, nodes: Collection[str], gpus: Collection[tuple[str, str]] = ()) -> None:
        super().set_drained(nodes, gpus)  # gpus: none; a cluster drains whole nodes
        self.mirror.changed()  # capacity is worked out again without them

    def maintenance(self, flavor: Flavor) -> str | None:
        if not self.mirror.nodes:
            return None
        pod_spec = {**self._flavor_pod_spec(flavor), "affinity": flavor.affinity or {}}
        resource = flavor.gpu_resource if flavor.gpus else None
        off, mine = nodes_off(
            list(self.mirror.nodes.values()), pod_spec, resource, self._drained_nodes()
        )
        if not off:
            return None
        kind = f"{flavor.gpu_type} " if flavor.gpu_type else ""
        return f"{off} of {mine} {kind}nodes in maintenance"

    def health(self) -> tuple[bool, str]:
        if self.mirror.failing:
            kinds = ", ".join(sorted(self.mirror.failing))
            error = self.mirror.failing[sorted(self.mirror.failing)[0]]
            return False, (
                f"cannot follow {kinds} in the cluster ({error}); retrying every "
                f"{self.retry_delay:g} s"
            )
        if not self.mirror.synced["jobs"].is_set():
            return False, "not connected to the cluster yet"
        nodes = (
            f", {len(self.mirror.nodes)} nodes"
            if self.mirror.nodes is not None
            else ", nodes not readable"
        )
        heard = [self.mirror.heard[k] for k in ("jobs", "pods") if k in self.mirror.heard]
        # bookmarks come every minute or so on a quiet cluster: silence much longer than a
        # watch's timeout means the watches are stuck
        lag = time.monotonic() - min(heard) if heard else None
        last = f"; last word from the API server {lag:.0f} s ago" if lag is not None else ""
        healthy = lag is None or lag < self.watch_timeout + 120
        return healthy, (
            f"following namespace {self.namespace}: {len(self.mirror.jobs)} Jobs, "
            f"{len(self.mirror.pods)} pods{nodes}{last}"
            + ("" if healthy else "; the watches may be stuck (check the service's log)")
        )

    # -- the cluster's view ------------------------------------------------------

    def _name(self, ref: str) -> str:
        return ref.rsplit("/", 1)[-1]

    def _verdict(self, name: str) -> Verdict:
        job = self.mirror.jobs.get(name)
        flavor = None
        capacity = None
        if job is not None:
            flavor_name = ((job.get("metadata") or {}).get("labels") or {}).get("nbjobs.io/flavor")
            flavor = self.nbjobs.flavor(flavor_name or "")
            if flavor is not None and self.mirror.nodes is not None:
                capacity = functools.partial(self._capacity, flavor)
        said = self.mirror.engine_said.get(name)
        verdict = job_verdict(job, self.mirror.pods_of(name, deleted=True), flavor, capacity, said)
        limit = self.settings.fail_refused_after
        if job is not None and said and verdict.refused and limit is not None:
            # only a Job without a pod: one an engine holds (KAI, Volcano) waits as it says
            verdict = refused_for_too_long(job, said, limit) or verdict
        if verdict.node:
            # kept once bound, for the job's record: every node its ranks ran on, also
            # those whose pods are gone by its end
            known = (self._placed.get(name) or "").split(NODE_SEPARATOR)
            new = [n for n in verdict.node.split(NODE_SEPARATOR) if n not in known]
            verdict.node = NODE_SEPARATOR.join([n for n in known if n] + new)
            self._placed[name] = verdict.node
        return verdict

    def _flavor_pod_spec(self, flavor: Flavor) -> Obj:
        spec: Obj = {
            "affinity": node_affinity(flavor.affinity, self._drained_nodes()),
            "tolerations": flavor.tolerations,
        }
        if flavor.node_selector:
            spec["nodeSelector"] = flavor.node_selector
        return spec

    def _capacity(self, flavor: Flavor) -> Capacity:
        index = self.mirror.index()
        if flavor.name not in index.capacity:
            index.capacity[flavor.name] = self._work_out_capacity(flavor)
        return index.capacity[flavor.name]

    def _work_out_capacity(self, flavor: Flavor) -> Capacity:
        pods = list(self.mirror.pods.values())
        # A Job created a moment ago has no pod yet (a multi-node one maybe not all of
        # them): count the pods it will make.
        made = Counter(job_of_pod(p) for p in pods)
        for name, job in list(self.mirror.jobs.items()):
            spec = job.get("spec") or {}
            if job_finished(job) or spec.get("suspend"):
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
            list((self.mirror.nodes or {}).values()),
            pods,
            flavor.gpu_resource if flavor.gpus else None,
        )

    # -- talking to the API server -----------------------------------------------

    async def _ensure_started(self) -> None:
        if self._started is None:
            self._started = asyncio.ensure_future(self._connect())
        await asyncio.shield(self._started)

    async def _connect(self) -> None:
        await self.api.connect(self.kubeconfig, self.api_connections)
        await self.mirror.start()
        await keep_network_policy(self.api, jobs_policy(self.nbjobs), self.log)

    async def _keep_pod_log(self, name: str) -> None:
        """The pod's output in place of a log its runner never wrote (kubernetes_keep)."""
        if (log_file := self._log_files.get(name)) is not None:
            # a deleted pod's log is gone with it: only the live ones
            await keep_pod_log(self.api, name, self.mirror.pods_of(name), log_file, self.log)

    async def _pods_gone(self, name: str) -> None:
        """Wait (a while) until the job's pods have ended: the runner saves its output on
        SIGTERM, and the status file is final only after that."""
        await self.mirror.pods_gone(name, self.settings.termination_grace_seconds + 15)

    def queues(self) -> list[QueueUse]:
        return list(self.mirror.kueue_queues)


def _suspended(job: Obj) -> bool:
    return bool((job.get("spec") or {}).get("suspend"))

"""The Kubernetes backend's copy of the cluster, kept up to date by list-then-watch loops.

:class:`ClusterMirror` lists, then watches, the nbjobs Jobs and the pods of the jobs'
namespace, the nodes cluster-wide when the ServiceAccount may read them, and the
JobSets of multi-node jobs when they run as JobSets: resourceVersion kept, bookmarks
asked for, a re-list after ``410 Gone``, a failed watch tried again every
``retry_delay``. Every ``events_interval`` it also reads what an engine (KAI, Volcano)
said about the pods it holds unplaced, and Kueue's queues. Each change makes a new
:attr:`ClusterMirror.tick`: whoever waits for the cluster to change waits on it; whoever
follows one Job waits on :meth:`ClusterMirror.job_tick`, which a change of another Job
or its pods leaves alone (following 200 Jobs woke 200 followers at each change of any:
a sixth of the service's time in a burst of 200 starts).

Everything the backend decides it decides from this copy; nothing here decides.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from nbjobs.engines import KUEUE_QUEUE_LABEL

from .kubernetes_api import KubeApi, KubeError, api_error
from .kubernetes_capacity import Capacity
from .kubernetes_objects import JOBSET_GROUP, JOBSET_VERSION, MANAGED_SELECTOR, job_name_of
from .kubernetes_verdicts import engine_holds, newest_warning
from .kueue_queues import KUEUE_GROUP, KUEUE_VERSION, QueueUse, queue_uses

Obj = dict[str, Any]
#: deleted pods remembered for their final status (those of followed jobs are
#: dropped at release; this bounds what unfollowed ones can hold)
DELETED_PODS_KEPT = 1000
#: waiting engine pods whose events are read per round (the oldest first)
EVENT_READS_PER_ROUND = 50


class _Gone(Exception):
    """The watch's resourceVersion is too old (410): list again."""


def job_of_pod(pod: Obj) -> str | None:
    """The name of the Job a pod belongs to (either label the Job controller sets; a
    JobSet's pods belong to the Job its controller made, not one nbjobs named)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return (
        labels.get("batch.kubernetes.io/job-name") or labels.get("job-name") or job_name_of(labels)
    )


def pod_ended(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def job_finished(job: Obj) -> bool:
    """Whether a Job has its final condition (Complete or Failed)."""
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


@dataclass
class Index:
    """What :meth:`ClusterMirror.index` works out once per tick: the pods of each Job,
    live and deleted, and (filled in by whoever asks) each flavor's capacity."""

    tick: asyncio.Event
    pods: dict[str, list[Obj]] = field(default_factory=dict)
    deleted: dict[str, list[Obj]] = field(default_factory=dict)
    capacity: dict[str, Capacity] = field(default_factory=dict)


@dataclass
class Reads:
    """How the mirror reads the cluster (the backend's settings)."""

    watch_timeout: int
    retry_delay: float
    connect_timeout: float
    #: seconds between reads of engines' events and Kueue's queues; 0: none
    events_interval: float
    #: JobSets are watched too (multi-node jobs run as JobSets)
    jobsets: bool
    #: Kueue's queues are read, with the GPUs of these resources
    kueue_gpus: Collection[str] | None


class ClusterMirror:
    """The jobs' namespace (and the nodes) as last seen, by name."""

    def __init__(self, api: KubeApi, reads: Reads, log: logging.Logger | Any) -> None:
        self.api = api
        self.reads = reads
        self.log = log
        self.namespace = api.namespace
        self.jobs: dict[str, Obj] = {}
        self.pods: dict[str, Obj] = {}
        #: the JobSets of multi-node jobs (``multi_node: jobset``), by name; their ranks'
        #: Jobs (``NAME-node-0``) are in ``jobs``, followed as any Job
        self.jobsets: dict[str, Obj] = {}
        #: pods as their DELETED event last showed them, by name: with pod-tracking
        #: finalizers a pod is gone before its Job's final condition, and its status
        #: (evicted, preempted, out of memory) is the only place the reason is
        self.deleted_pods: OrderedDict[str, Obj] = OrderedDict()
        #: None until nodes are listed, or for good when the ServiceAccount may not read them
        self.nodes: dict[str, Obj] | None = None
        self.nodes_readable = True
        #: an engine's latest warning about a Job's waiting pod (or its PodGroup), by Job
        #: name, from the events read every events_interval
        self.engine_said: dict[str, str] = {}
        self.events_readable = True
        #: Kueue's queues (LocalQueues of the jobs' namespace) with their ClusterQueues'
        #: GPUs, read every events_interval while Kueue is on and the service may
        self.kueue_queues: list[QueueUse] = []
        self.kueue_readable = True
        self.synced = {kind: asyncio.Event() for kind in ("jobs", "pods", "nodes", "jobsets")}
        #: set (and replaced) at every change of what the mirror holds
        self.tick = asyncio.Event()
        #: by Job name: set (and dropped) at the next change of the Job or one of its
        #: pods, and at every change that concerns every Job (see :meth:`changed`)
        self._job_ticks: dict[str, asyncio.Event] = {}
        #: the watches that fail now, by kind, with their last error
        self.failing: dict[str, str] = {}
        #: when each watch last heard from the API server (an event or a bookmark)
        self.heard: dict[str, float] = {}
        self.last_error: str | None = None
        self._index: Index | None = None
        self._tasks: list[asyncio.Task[None]] = []

    # -- keeping it ------------------------------------------------------------------

    async def start(self) -> None:
        """Start every loop; return once Jobs and pods are listed (and nodes, or known
        unreadable, or not in time: they are optional). Raises RuntimeError when Jobs
        and pods cannot be listed within ``connect_timeout``."""
        api = self.api
        self._spawn(
            self._reflect(
                "jobs",
                lambda **kw: api.batch.list_namespaced_job(
                    self.namespace, label_selector=MANAGED_SELECTOR, **kw
                ),
                self.jobs,
            ),
            self._reflect(
                "pods", lambda **kw: api.core.list_namespaced_pod(self.namespace, **kw), self.pods
            ),
            self._reflect_nodes(),
        )
        if self.reads.jobsets:
            self._spawn(
                self._reflect(
                    "jobsets",
                    lambda **kw: api.custom.list_namespaced_custom_object(
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
        if self.reads.events_interval > 0:
            self._spawn(self._read_engine_events())
            if self.reads.kueue_gpus is not None:
                self._spawn(self._read_kueue_queues(self.reads.kueue_gpus))
        waiting = [asyncio.ensure_future(self.synced[k].wait()) for k in ("jobs", "pods")]
        # Whether nodes can be read decides how the service queues: know it before the
        # first job is scheduled (nodes are optional: no answer in time is not fatal).
        nodes = asyncio.ensure_future(self.synced["nodes"].wait())
        try:
            done, _ = await asyncio.wait([*waiting, nodes], timeout=self.reads.connect_timeout)
        finally:
            for w in [*waiting, nodes]:
                w.cancel()
        if len([w for w in waiting if w in done]) < len(waiting):
            raise RuntimeError(
                f"cannot list Jobs and pods in namespace {self.namespace!r} within "
                f"{self.reads.connect_timeout:g} s ({self.last_error or 'no answer'}); check "
                "the service's kubeconfig or ServiceAccount and its Role"
            )

    def _spawn(self, *loops: Awaitable[None]) -> None:
        self._tasks += [asyncio.ensure_future(loop) for loop in loops]

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def changed(self) -> None:
        """What the mirror holds changed in a way that may concern any Job (nodes, a new
        list, an engine's or Kueue's words, the backend's own counting): wake whoever
        waits on the tick, and every Job's follower."""
        self._advance()
        ticks, self._job_ticks = self._job_ticks, {}
        for tick in ticks.values():
            tick.set()

    def job_tick(self, job: str) -> asyncio.Event:
        """Set at the next change of the Job ``job`` or of one of its pods, or at the next
        change that concerns every Job (:meth:`changed`); a new one after that."""
        tick = self._job_ticks.get(job)
        if tick is None:
            tick = self._job_ticks[job] = asyncio.Event()
        return tick

    def _advance(self) -> None:
        tick, self.tick = self.tick, asyncio.Event()
        tick.set()

    def _object_changed(self, kind: str, obj: Obj) -> None:
        """A watched object changed: a Job or a pod wakes its Job's follower alone (and
        whoever waits on the tick); a node or a JobSet, everyone."""
        if kind == "jobs":
            job: str | None = obj["metadata"]["name"]
        elif kind == "pods":
            job = job_of_pod(obj)
        else:
            self.changed()
            return
        self._advance()
        if job is not None and (tick := self._job_ticks.pop(job, None)) is not None:
            tick.set()

    async def _reflect(
        self, kind: str, lister: Callable[..., Awaitable[Any]], store: dict[str, Obj]
    ) -> None:
        """List, then watch from the list's resourceVersion; list again after 410 Gone."""
        version: str | None = None
        while True:
            try:
                if version is None:
                    listed = await self.api.call(lister)
                    store.clear()
                    for item in listed.get("items") or []:
                        store[item["metadata"]["name"]] = item
                    version = (listed.get("metadata") or {}).get("resourceVersion") or ""
                    self.failing.pop(kind, None)
                    self.heard[kind] = time.monotonic()
                    self.synced[kind].set()
                    self.changed()
                version = await self._watch(kind, lister, store, version)
            except _Gone:
                self.log.info("watch of %s: resourceVersion too old; listing again", kind)
                version = None
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.last_error = self.failing[kind] = str(exc)
                self.log.warning("watch of %s failed (%s); retrying", kind, exc)
                await asyncio.sleep(self.reads.retry_delay)

    async def _watch(
        self, kind: str, lister: Callable[..., Awaitable[Any]], store: dict[str, Obj], version: str
    ) -> str:
        """One watch request; returns the resourceVersion to resume from."""
        timeout = self.reads.watch_timeout
        response = await lister(
            watch=True,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=timeout,
            _preload_content=False,
            _request_timeout=(30, timeout + 60),
        )
        try:
            if response.status == 410:
                raise _Gone()
            if response.status != 200:
                raise api_error(response.status, await response.read())
            async for line in response.content:
                if not line.strip():
                    continue
                event = json.loads(line)
                obj = event.get("object") or {}
                what = event.get("type")
                if what == "ERROR":
                    if obj.get("code") == 410:
                        raise _Gone()
                    raise KubeError(
                        obj.get("code", 500), obj.get("message", ""), obj.get("reason", "")
                    )
                version = (obj.get("metadata") or {}).get("resourceVersion") or version
                self.heard[kind] = time.monotonic()
                if what == "BOOKMARK":
                    continue
                name = obj["metadata"]["name"]
                if what == "DELETED":
                    store.pop(name, None)
                    if kind == "pods":
                        self._remember_deleted(obj)
                else:
                    store[name] = obj
                self._object_changed(kind, obj)
            # the server ended the request at its timeout: it was there all along
            self.heard[kind] = time.monotonic()
        finally:
            response.release()
        return version

    async def _reflect_nodes(self) -> None:
        nodes: dict[str, Obj] = {}
        lister = self.api.core.list_node
        try:
            await self.api.call(lister, limit=1)
        except KubeError as exc:
            if exc.status in (401, 403):
                self.nodes_readable = False
                self.log.warning(
                    "the service may not read nodes (%s): no free-GPU counts, and every job "
                    "is handed to the cluster at once; hub_config/examples/kubernetes/rbac.yaml "
                    "has the optional ClusterRole",
                    exc.message,
                )
                self.synced["nodes"].set()
                return
        self.nodes = nodes
        await self._reflect("nodes", lister, nodes)

    def _remember_deleted(self, pod: Obj) -> None:
        if job_of_pod(pod) is None:
            return
        self.deleted_pods[pod["metadata"]["name"]] = pod
        self.deleted_pods.move_to_end(pod["metadata"]["name"])
        while len(self.deleted_pods) > DELETED_PODS_KEPT:
            self.deleted_pods.popitem(last=False)

    def forget_deleted(self, job: str) -> None:
        """Drop the deleted pods kept of ``job`` (it is no longer followed)."""
        for pod in [n for n, p in self.deleted_pods.items() if job_of_pod(p) == job]:
            del self.deleted_pods[pod]
        self.changed()

    async def read_pods(self, job: str) -> None:
        """Refresh the copy with the Job's pods as the API server has them now (the pods'
        watch may lag the Jobs' one: the two streams are not ordered)."""
        try:
            pods = await self.api.pods_of_job(job)
        except (KubeError, OSError) as exc:
            self.log.warning("cannot read the pods of Job %s (%s)", job, exc)
            return
        for item in pods:
            self.pods[item["metadata"]["name"]] = item
        self.changed()

    # -- what engines and Kueue say ------------------------------------------------

    async def _read_engine_events(self) -> None:
        """Every events_interval, the latest warning an engine left about each pod it
        holds unplaced; stops for good (with one warning in the log) when the Role does
        not let the service list events."""
        while True:
            await asyncio.sleep(self.reads.events_interval)
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
                self.changed()

    async def _engine_events(self) -> dict[str, str]:
        """The newest warning about each waiting engine pod, by Job name: events on the
        pod itself, and on its PodGroup (KAI's podgrouper and Volcano name a pod's group
        after its owner's uid, so a group whose name holds the Job's uid is the Job's)."""
        held = {
            job: pod
            for pod in list(self.pods.values())
            if (job := job_of_pod(pod)) is not None and engine_holds(pod)
        }
        refused = await self._refused_jobs()
        if not held:
            return refused
        oldest = sorted(
            held.items(), key=lambda kv: kv[1]["metadata"].get("creationTimestamp") or ""
        )[:EVENT_READS_PER_ROUND]
        lists = await asyncio.gather(
            self.api.events("involvedObject.kind=PodGroup"),
            *(
                self.api.events(
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
        return {**refused, **said}

    async def _refused_jobs(self) -> dict[str, str]:
        """The Job controller's newest ``FailedCreate`` warning about each Job it has made
        no pod for (the cluster refuses it: a ResourceQuota, Pod Security admission, a
        LimitRange, a webhook), by Job name, in the cluster's own words."""
        with_pods = {job for pod in list(self.pods.values()) if (job := job_of_pod(pod))}
        podless = [
            (name, job)
            for name, job in list(self.jobs.items())
            if name not in with_pods
            and not (job.get("spec") or {}).get("suspend")
            and (job.get("metadata") or {}).get("uid")  # created, not only being created
            and not job_finished(job)
        ]
        podless.sort(key=lambda kv: kv[1]["metadata"].get("creationTimestamp") or "")
        podless = podless[:EVENT_READS_PER_ROUND]
        if not podless:
            return {}
        lists = await asyncio.gather(
            *(
                self.api.events(f"involvedObject.kind=Job,involvedObject.name={name}")
                for name, _ in podless
            )
        )
        said = {}
        for (name, _), events in zip(podless, lists, strict=True):
            failed = [e for e in events if e.get("reason") == "FailedCreate"]
            if (text := newest_warning(failed)) is not None:
                said[name] = text
        return said

    async def _read_kueue_queues(self, gpus: Collection[str]) -> None:
        """Every events_interval, Kueue's queues: what each ClusterQueue's quota is,
        uses, borrows from its cohort and lends. Stops for good (one warning in the log)
        when the service may not list them: an optional read (rbac.yaml's ClusterRole)."""
        custom = self.api.custom
        while True:
            try:
                local = await self.api.call(
                    custom.list_namespaced_custom_object,
                    KUEUE_GROUP,
                    KUEUE_VERSION,
                    self.namespace,
                    "localqueues",
                )
                cluster = await self.api.call(
                    custom.list_cluster_custom_object, KUEUE_GROUP, KUEUE_VERSION, "clusterqueues"
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                so = "borrowed and lent GPUs are not shown"
                if isinstance(exc, KubeError) and self.kueue_refused(exc, "queues", so):
                    self.kueue_readable = False
                    return
                self.log.warning("reading Kueue's queues failed (%s); trying again later", exc)
            else:
                found = queue_uses(local.get("items") or [], cluster.get("items") or [], gpus)
                if found != self.kueue_queues:
                    self.kueue_queues = found
                    self.changed()
            await asyncio.sleep(self.reads.events_interval)

    def kueue_refused(self, exc: KubeError, what: str, so: str) -> bool:
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

    # -- reading it --------------------------------------------------------------------

    def index(self) -> Index:
        """The watched pods per Job (and room for each flavor's capacity), worked out once
        per change of what the watches hold (a new tick), not once per question: every
        follower asks on every change, so without it following n jobs cost n² a change.

        Read through snapshots (``list()``, taken at once): the backend's questions come
        from the service's database threads too, while the watches change the dicts here.
        """
        tick = self.tick
        index = self._index
        if index is not None and index.tick is tick:
            return index
        index = Index(tick)
        for pod in list(self.pods.values()):
            if (job := job_of_pod(pod)) is not None:
                index.pods.setdefault(job, []).append(pod)
        for pod in list(self.deleted_pods.values()):
            if (job := job_of_pod(pod)) is not None:
                index.deleted.setdefault(job, []).append(pod)
        self._index = index
        return index

    def pods_of(self, job: str, *, deleted: bool = False) -> list[Obj]:
        """The Job's pods; with ``deleted``, when none is left, the last ones seen
        deleted (their final status says why the job ended, before the Job's own
        condition does)."""
        index = self.index()
        live = index.pods.get(job, [])
        if live or not deleted:
            return list(live)
        return list(index.deleted.get(job, []))

    def ran_and_went(self, job: str) -> bool:
        """Pods of the Job were bound to nodes and are going or gone: Kueue had let it
        run and took it back, also when the watches bring all of that at once (under
        load), the Job already suspended again. A bound pod still live and not being
        deleted says nothing: the Job's admission may just not be seen yet (the pods'
        and Jobs' watches are not ordered)."""
        live = self.pods_of(job)
        return any(
            (pod.get("spec") or {}).get("nodeName")
            and (not live or (pod.get("metadata") or {}).get("deletionTimestamp"))
            for pod in live or self.pods_of(job, deleted=True)
        )

    async def pods_gone(self, job: str, within: float) -> None:
        """Wait (up to ``within`` seconds) until the Job's pods have ended."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while loop.time() < deadline:
            tick = self.job_tick(job)
            pods = self.pods_of(job)
            if not pods or all(
                pod_ended(p) and not (p.get("metadata") or {}).get("deletionTimestamp")
                for p in pods
            ):
                return
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(tick.wait(), timeout=max(0.01, deadline - loop.time()))

    def queue_use(self, job: Obj | None) -> QueueUse | None:
        """The Kueue queue a Job was sent to, as last read (None: none, or not known)."""
        queue = (((job or {}).get("metadata") or {}).get("labels") or {}).get(KUEUE_QUEUE_LABEL)
        return next((q for q in self.kueue_queues if q.local_queue == queue), None)

"""A Kubernetes API server on loopback for tests: Jobs, Pods and Nodes in memory.

It behaves like the real one where nbjobs' backend depends on it:

- one cluster-wide, monotonically increasing ``resourceVersion``; lists carry it,
  watches resume from it, and a watch from a version older than the last
  compaction gets the in-stream ``ERROR`` event with a ``410 Expired`` Status,
  as an etcd-backed server sends it (``fail_watch_with_http_410`` sends a plain
  HTTP 410 instead, which some proxies and versions do);
- ``?watch=true`` / ``watch=1`` / ``watch=True`` (what kubernetes_asyncio sends)
  streams newline-delimited JSON events; ``allowWatchBookmarks`` adds
  ``BOOKMARK`` events; ``timeoutSeconds`` ends the stream; a watch without a
  resourceVersion starts with synthetic ``ADDED`` events for what exists;
- equality and set-based label selectors, ``fieldSelector=metadata.name=…``; a
  watch sees an object whose labels stop matching its selector as ``DELETED``,
  and one that starts matching as ``ADDED``;
- ``metadata.generateName``; 404 / 409 / 422 answers with ``Status`` bodies like
  the real ones; some of the server's validation of Jobs (restartPolicy,
  extended-resource requests equal to limits, DNS names);
- ``DELETE`` honours ``propagationPolicy``: Jobs default to ``Orphan`` (as
  batch/v1 does), ``Background`` deletes the Job at once and its pods after,
  ``Foreground`` keeps the Job (with a deletionTimestamp) until its pods are gone;
  like the real server it reads a DeleteOptions body when one is sent and the
  query parameter only when none is;
- ``events`` (core/v1) listed with ``fieldSelector=involvedObject.kind=…,involvedObject.name=…``;
- ``pods/{name}/log`` as text/plain, ``follow=true`` streams until the
  container ends; 400 while the container has not started;
  :meth:`FakeApiServer.cut_log_streams` ends open streams early (a proxy's idle
  timeout, an API server restart);
- ``fail_creates`` answers creates with errors the real server gives under load:
  ``500`` after storing the object (etcd timed out, the write went through), or
  ``429`` / ``503`` without storing it.

Schedulers (:meth:`FakeApiServer.schedule_pending`, called by the test): each pending
pod goes to the scheduler its ``schedulerName`` names, if that one is in ``schedulers``
(else it stays Pending with no PodScheduled condition at all, as a pod does on a cluster
where no such scheduler runs); with ``hami_webhook`` a pod asking for HAMi's GPU memory
or cores goes to ``hami-scheduler``, as HAMi's admission webhook sends it. The default
scheduler binds a pod to the first node with room for all it requests, counting every
resource the node lists (extended ones such as ``nvidia.com/gpumem`` included) and
refusing a resource no node lists, with the real "0/N nodes are available: …" message.
KAI Scheduler and Volcano keep their own books: a ``gpu-fraction`` annotation takes that
part of a node's ``nvidia.com/gpu``; resources no node lists are theirs to count and
limit nothing; a pod that does not fit gets the PodScheduled False condition with the
engine's own words (``engine_messages``).
Otherwise nothing runs: the test plays the Job controller, the TTL controller
(:meth:`FakeApiServer.expire_ttl`) and the kubelet with the helper methods
(:meth:`FakeApiServer.start_pod`, :meth:`FakeApiServer.finish_pod`, ...).
Every request is recorded as an RBAC (verb, group, resource) in ``requests``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import re
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from aiohttp import web

Obj = dict[str, Any]

#: resource -> (API group, kind, namespaced)
RESOURCES = {
    "jobs": ("batch", "Job", True),
    "pods": ("", "Pod", True),
    "nodes": ("", "Node", False),
    "events": ("", "Event", True),
    "networkpolicies": ("networking.k8s.io", "NetworkPolicy", True),
    # Kueue's queues, as its controller keeps them (a test writes their status)
    "localqueues": ("kueue.x-k8s.io", "LocalQueue", True),
    "clusterqueues": ("kueue.x-k8s.io", "ClusterQueue", False),
    "workloads": ("kueue.x-k8s.io", "Workload", True),
    # the headless Service of a multi-node Indexed Job (or the one a JobSet makes)
    "services": ("", "Service", True),
    # JobSet's (its controller: reconcile_jobsets, played by the test)
    "jobsets": ("jobset.x-k8s.io", "JobSet", True),
}
#: the version each API group is served at (v1 unless here)
VERSIONS = {"kueue.x-k8s.io": "v1beta1", "jobset.x-k8s.io": "v1alpha2"}
#: where an Indexed Job's pod has its index
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
_SUFFIX = {
    "": 1.0, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
    "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40,
}  # fmt: skip


def _quantity(value: Any) -> float:
    """A resource quantity as the scheduler compares it (``500m``, ``16Gi``, ``4``)."""
    match = re.match(r"^([0-9.]+)([a-zA-Z]*)$", str(value))
    if not match or match.group(2) not in _SUFFIX:
        raise ValueError(f"not a quantity: {value!r}")
    return float(match.group(1)) * _SUFFIX[match.group(2)]


def _requests(pod: Obj) -> dict[str, float]:
    """What a pod's containers request (their limits where they give no request)."""
    total: dict[str, float] = {"pods": 1.0}
    for container in pod["spec"].get("containers") or []:
        resources = container.get("resources") or {}
        for k, v in {
            **(resources.get("limits") or {}),
            **(resources.get("requests") or {}),
        }.items():
            total[k] = total.get(k, 0.0) + _quantity(v)
    return total


_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_TRUE = {"1", "t", "T", "true", "TRUE", "True"}


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_body(code: int, reason: str, message: str, details: Obj | None = None) -> Obj:
    body: Obj = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details is not None:
        body["details"] = details
    return body


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: Obj | None = None):
        super().__init__(message)
        self.body = status_body(code, reason, message, details)


def _has_condition(obj: Obj, kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def _parse_selector(text: str) -> list[Callable[[dict[str, str]], bool]]:
    """Label selector requirements: ``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``,
    ``a notin (x)``, ``a``, ``!a``."""
    rules: list[Callable[[dict[str, str]], bool]] = []
    parts = re.findall(r"[^,(]+(?:\([^)]*\))?", text or "")
    for raw in parts:
        part = raw.strip()
        if not part:
            continue
        m = re.match(r"^(\S+)\s+(in|notin)\s+\(([^)]*)\)$", part)
        if m:
            key, op, values = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",")}
            if op == "in":
                rules.append(lambda labels, k=key, vs=values: labels.get(k) in vs)
            else:
                rules.append(lambda labels, k=key, vs=values: labels.get(k) not in vs)
            continue
        m = re.match(r"^([^!=]+)(==|=|!=)(.*)$", part)
        if m:
            key, op, value = m.group(1).strip(), m.group(2), m.group(3).strip()
            if op == "!=":
                rules.append(lambda labels, k=key, v=value: labels.get(k) != v)
            else:
                rules.append(lambda labels, k=key, v=value: labels.get(k) == v)
            continue
        if part.startswith("!"):
            rules.append(lambda labels, k=part[1:]: k not in labels)
        else:
            rules.append(lambda labels, k=part: k in labels)
    return rules


def _matches(obj: Obj, labels: str, fields: str) -> bool:
    have = (obj.get("metadata") or {}).get("labels") or {}
    if not all(rule(have) for rule in _parse_selector(labels)):
        return False
    for part in [p for p in (fields or "").split(",") if p]:
        key, _, value = part.partition("=")
        key = key.rstrip("=")
        if key == "metadata.name" and obj["metadata"]["name"] != value.lstrip("="):
            return False
        if key == "metadata.namespace" and obj["metadata"].get("namespace") != value.lstrip("="):
            return False
        if key == "spec.nodeName" and (obj.get("spec") or {}).get("nodeName") != value:
            return False
        if key == "status.phase" and (obj.get("status") or {}).get("phase") != value:
            return False
        if key.startswith("involvedObject."):
            field_name = key.split(".", 1)[1]
            if str((obj.get("involvedObject") or {}).get(field_name)) != value.lstrip("="):
                return False
    return True


def _as_seen_by(watcher: _Watcher, kind: str, obj: Obj, before: Obj | None) -> str | None:
    """The event a watch with selectors gets for a change, if any (as the real server:
    leaving the selection is DELETED, entering it ADDED)."""
    now_in = _matches(obj, watcher.labels, watcher.fields)
    if kind != "MODIFIED" or before is None:
        return kind if now_in else None
    was_in = _matches(before, watcher.labels, watcher.fields)
    if now_in and was_in:
        return "MODIFIED"
    if now_in:
        return "ADDED"
    return "DELETED" if was_in else None


@dataclass
class _Watcher:
    resource: str
    namespace: str | None
    labels: str
    fields: str
    queue: asyncio.Queue[Obj | None] = field(default_factory=asyncio.Queue)


class FakeApiServer:
    """The fake API server; ``await start()``, then point a client at ``url``."""

    def __init__(self, bookmark_interval: float = 0.2) -> None:
        self.objects: dict[tuple[str, str | None, str], Obj] = {}
        self.resource_version = 100
        #: watches from a version at or below this are told 410 Gone
        self.compacted = 0
        #: (resourceVersion, resource, event type, object, the object before) since the
        #: last compaction
        self.history: list[tuple[int, str, str, Obj, Obj | None]] = []
        self.watchers: list[_Watcher] = []
        self.logs: dict[tuple[str, str], str] = {}
        #: every request as RBAC sees it: (verb, API group, resource or resource/subresource)
        self.requests: list[tuple[str, str, str]] = []
        #: (verb, resource, query parameters) of every request
        self.queries: list[tuple[str, str, dict[str, str]]] = []
        #: resources the caller's ServiceAccount may not touch (403 Forbidden)
        self.forbidden: set[str] = set()
        #: the order objects were created in, by uid (Kueue admits the oldest first; two
        #: creates in one second have the same creationTimestamp)
        self.created: dict[str, int] = {}
        #: resources this cluster does not serve (a CRD not installed, e.g. jobsets): 404
        self.absent: set[str] = set()
        #: the resourceVersion of every BOOKMARK event sent
        self.bookmarks: list[int] = []
        self.bookmark_interval = bookmark_interval
        self.fail_watch_with_http_410 = False
        #: the next creates' answers: (status, stored) — e.g. (500, True): the object is
        #: stored but the client is told the request timed out
        self.fail_creates: list[tuple[int, bool]] = []
        #: log streams opened with follow=true that are open now
        self.open_log_streams = 0
        self._log_cuts = 0
        #: seconds a pod of a Background-deleted Job takes to terminate (its grace)
        self.pod_termination_delay = 0.05
        #: seconds every create takes before it is stored and answered (a validating
        #: admission webhook, a busy API server); creates in flight overlap, as on a real
        #: server
        self.create_delay = 0.0
        #: creates being answered now, and the most seen at once
        self.creates_in_flight = 0
        self.most_creates_in_flight = 0
        #: while set to an unset event, every create waits for it (a webhook that hangs
        #: until the test lets it answer): creates overlap whatever the machine's load
        self.create_gate: asyncio.Event | None = None
        #: the schedulers running in this cluster (see schedule_pending)
        self.schedulers: set[str] = {"default-scheduler"}
        #: HAMi's mutating webhook: a pod asking for HAMi's GPU memory or cores is sent
        #: to hami-scheduler (kube-scheduler with HAMi's extender), as HAMi installs it
        self.hami_webhook = False
        #: what a scheduler other than the default writes on a pod it cannot place
        self.engine_messages = {
            "kai-scheduler": "Resources were not found for pod group: not enough GPUs "
            "in queue {queue}",
            "volcano": "1/1 tasks in gang unschedulable: pod group is not ready, "
            "1 Pending, 1 minAvailable; Pending: 1 Unschedulable",
        }
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.port = 0

    # -- life -------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self._dispatch)
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.1)
        await self._runner.setup()
        # bound here and handed over: a port only looked up and bound later can be
        # taken in between by any process on the machine
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        site = web.SockSite(self._runner, sock)
        await site.start()

    async def stop(self) -> None:
        for watcher in self.watchers:
            watcher.queue.put_nowait(None)
        for task in list(self._tasks):
            task.cancel()
        if self._runner is not None:
            await self._runner.cleanup()

    def kubeconfig(self) -> Obj:
        """A kubeconfig that points kubernetes_asyncio at this server."""
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": "fake-token"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
            "current-context": "fake",
        }

    # -- storage ----------------------------------------------------------------

    def _next_version(self) -> int:
        self.resource_version += 1
        return self.resource_version

    def _emit(self, resource: str, kind: str, obj: Obj, before: Obj | None = None) -> None:
        version = int(obj["metadata"]["resourceVersion"])
        snapshot = copy.deepcopy(obj)
        before = copy.deepcopy(before) if before is not None else None
        self.history.append((version, resource, kind, snapshot, before))
        for watcher in self.watchers:
            if watcher.resource != resource:
                continue
            if watcher.namespace and snapshot["metadata"].get("namespace") != watcher.namespace:
                continue
            seen = _as_seen_by(watcher, kind, snapshot, before)
            if seen is not None:
                watcher.queue.put_nowait({"type": seen, "object": snapshot})

    def put(self, resource: str, obj: Obj, event: str = "MODIFIED") -> Obj:
        """Store an object as a controller would write it (new resourceVersion, event)."""
        meta = obj["metadata"]
        key = (resource, meta.get("namespace"), meta["name"])
        before = self.objects.get(key)
        meta["resourceVersion"] = str(self._next_version())
        self.objects[key] = obj
        self._emit(resource, event, obj, before if event == "MODIFIED" else None)
        self._poke()
        return obj

    def remove(self, resource: str, namespace: str | None, name: str) -> Obj | None:
        obj = self.objects.pop((resource, namespace, name), None)
        if obj is not None:
            obj["metadata"]["resourceVersion"] = str(self._next_version())
            self._emit(resource, "DELETED", obj)
            if resource == "pods":
                self._maybe_finish_foreground(obj)
            self._collect_garbage(obj)
        return obj

    def _collect_garbage(self, owner: Obj) -> None:
        """The garbage collector: what the removed object owned goes too (a Job's
        Service, a JobSet's Jobs and Service; a Job's pods terminate, gracefully)."""
        uid = owner["metadata"].get("uid")
        for (resource, namespace, name), obj in list(self.objects.items()):
            refs = obj["metadata"].get("ownerReferences") or []
            if not uid or not any(ref.get("uid") == uid for ref in refs):
                continue
            if resource == "pods":
                self._terminate_pod(obj)
            elif resource in ("services", "jobs"):
                if resource == "jobs":
                    for pod in self.pods_of(name, namespace or ""):
                        self._terminate_pod(pod)
                self.remove(resource, namespace, name)

    def get(self, resource: str, namespace: str | None, name: str) -> Obj | None:
        return self.objects.get((resource, namespace, name))

    def list(self, resource: str, namespace: str | None = None, labels: str = "") -> list[Obj]:
        return [
            o
            for (r, ns, _), o in sorted(self.objects.items(), key=lambda kv: kv[0][2])
            if r == resource and (namespace is None or ns == namespace) and _matches(o, labels, "")
        ]

    def compact(self) -> None:
        """Forget history up to now: older resourceVersions get 410 Gone (etcd compaction)."""
        self.compacted = self.resource_version
        self.history.clear()

    # -- what controllers and kubelets do (driven by the test) ------------------

    def add_node(
        self,
        name: str,
        labels: dict[str, str] | None = None,
        allocatable: dict[str, str] | None = None,
        taints: list[Obj] | None = None,
        unschedulable: bool = False,
    ) -> Obj:
        spec: Obj = {}
        if taints:
            spec["taints"] = taints
        if unschedulable:
            spec["unschedulable"] = True
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "uid": str(uuid.uuid4()),
                "creationTimestamp": now(),
                "labels": {"kubernetes.io/hostname": name, **(labels or {})},
            },
            "spec": spec,
            "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}},
        }
        node["status"]["allocatable"].update(allocatable or {})
        existing = self.get("nodes", None, name)
        return self.put("nodes", node, "MODIFIED" if existing else "ADDED")

    def label_node(self, name: str, **labels: str) -> Obj:
        node = copy.deepcopy(self.objects[("nodes", None, name)])
        node["metadata"]["labels"].update(labels)
        return self.put("nodes", node)

    def start_pod(
        self, job_name: str, namespace: str, node: str | None = None, index: int | None = None
    ) -> Obj:
        """The Job controller makes the Job's pod; with ``node`` the scheduler binds it.
        An Indexed Job's pod gets its ``index`` (annotation and label) and, as the real
        controller names it, the hostname ``JOB-INDEX``."""
        job = self.objects[("jobs", namespace, job_name)]
        template = copy.deepcopy(job["spec"]["template"])
        if job["spec"].get("completionMode") == "Indexed":
            index = index or 0
            template["metadata"].setdefault("annotations", {})[COMPLETION_INDEX] = str(index)
            template["metadata"].setdefault("labels", {})[COMPLETION_INDEX] = str(index)
            template["spec"]["hostname"] = f"{job_name}-{index}"
        labels = dict(template["metadata"].get("labels") or {})
        labels.update(
            {
                "batch.kubernetes.io/controller-uid": job["metadata"]["uid"],
                "batch.kubernetes.io/job-name": job_name,
                "controller-uid": job["metadata"]["uid"],
                "job-name": job_name,
            }
        )
        name = f"{job_name}-{uuid.uuid4().hex[:5]}"
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "generateName": f"{job_name}-",
                "namespace": namespace,
                "uid": str(uuid.uuid4()),
                "creationTimestamp": now(),
                "labels": labels,
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": job_name,
                        "uid": job["metadata"]["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": template["spec"],
            "status": {"phase": "Pending", "qosClass": "Guaranteed"},
        }
        if template["metadata"].get("annotations"):  # the Job controller copies them
            pod["metadata"]["annotations"] = dict(template["metadata"]["annotations"])
        if self.hami_webhook and any(
            name.startswith(("nvidia.com/gpumem", "nvidia.com/gpucores"))
            for c in pod["spec"]["containers"]
            for name in (c.get("resources") or {}).get("limits") or {}
        ):
            pod["spec"]["schedulerName"] = "hami-scheduler"
        if node:
            pod["spec"]["nodeName"] = node
            pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]
        self.put("pods", pod, "ADDED")
        job = copy.deepcopy(job)
        active = [
            p
            for p in self.pods_of(job_name, namespace)
            if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]
        job["status"].update({"active": len(active)})
        job["status"].setdefault("startTime", now())
        job["status"].setdefault("ready", 0)
        self.put("jobs", job)
        return pod

    def pods_of(self, job_name: str, namespace: str) -> list[Obj]:
        return self.list("pods", namespace, f"batch.kubernetes.io/job-name={job_name}")

    def start_ranks(self, job_name: str, namespace: str, nodes: list[str]) -> list[str]:
        """The Job controller makes every pod of an Indexed Job at once (it was admitted
        whole), the scheduler binds pod i to ``nodes[i]``, the kubelets start them: their
        names, by index."""
        names = []
        for index, node in enumerate(nodes):
            pod = self.start_pod(job_name, namespace, node, index=index)
            self.run_pod(pod["metadata"]["name"], namespace)
            names.append(pod["metadata"]["name"])
        return names

    def update_pod(self, pod_name: str, namespace: str, **status: Any) -> Obj:
        pod = copy.deepcopy(self.objects[("pods", namespace, pod_name)])
        pod["status"].update(status)
        return self.put("pods", pod)

    def unschedulable(self, pod_name: str, namespace: str, message: str) -> Obj:
        return self.update_pod(
            pod_name,
            namespace,
            conditions=[
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                    "lastTransitionTime": now(),
                }
            ],
        )

    def add_event(
        self,
        namespace: str,
        kind: str,
        name: str,
        reason: str,
        message: str,
        type: str = "Warning",
        last: str | None = None,
    ) -> Obj:
        """An event about ``kind``/``name``, as a controller or scheduler records one."""
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
            "involvedObject": {"kind": kind, "name": name, "namespace": namespace},
            "reason": reason,
            "message": message,
            "type": type,
            "count": 1,
            "lastTimestamp": last or now(),
        }
        return self.put("events", event, "ADDED")

    def schedule_pending(self) -> list[str]:
        """Play every running scheduler once over the pending pods, oldest first; the
        names of the pods bound."""
        bound = []
        pending = sorted(
            (
                p
                for (kind, _, _), p in self.objects.items()
                if kind == "pods"
                and p["status"].get("phase") == "Pending"
                and not p["spec"].get("nodeName")
                and "deletionTimestamp" not in p["metadata"]
            ),
            key=lambda p: p["metadata"]["creationTimestamp"],
        )
        for pod in pending:
            scheduler = pod["spec"].get("schedulerName") or "default-scheduler"
            if scheduler not in self.schedulers:
                continue  # nobody looks at it: no condition, no event
            namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
            node, why = self._place(pod, engine=scheduler != "default-scheduler")
            if node is not None:
                self.bind(name, namespace, node)
                bound.append(name)
            elif scheduler in ("default-scheduler", "hami-scheduler"):
                self.unschedulable(name, namespace, why)  # kube-scheduler's own words
            else:
                meta = pod["metadata"]
                queue = (meta.get("labels") or {}).get("kai.scheduler/queue") or (
                    meta.get("annotations") or {}
                ).get("scheduling.volcano.sh/queue-name", "default")
                message = self.engine_messages.get(scheduler, "cannot place the pod")
                self.unschedulable(name, namespace, message.format(queue=queue))
        return bound

    def _place(self, pod: Obj, *, engine: bool) -> tuple[str | None, str]:
        """The first node with room for ``pod``, or None and the default scheduler's
        reason."""
        asked = _requests(pod)
        fraction = float((pod["metadata"].get("annotations") or {}).get("gpu-fraction") or 0)
        if fraction:
            asked["nvidia.com/gpu"] = asked.get("nvidia.com/gpu", 0.0) + fraction
        nodes = [n for (kind, _, _), n in self.objects.items() if kind == "nodes"]
        short: dict[str, int] = {}
        for node in nodes:
            allocatable = {
                k: _quantity(v) for k, v in node["status"].get("allocatable", {}).items()
            }
            used: dict[str, float] = {}
            for (kind, _, _), other in self.objects.items():
                if (
                    kind == "pods"
                    and other["spec"].get("nodeName") == node["metadata"]["name"]
                    and other["status"].get("phase") not in ("Succeeded", "Failed")
                ):
                    held = _requests(other)
                    part = (other["metadata"].get("annotations") or {}).get("gpu-fraction")
                    if part:
                        held["nvidia.com/gpu"] = held.get("nvidia.com/gpu", 0.0) + float(part)
                    for k, v in held.items():
                        used[k] = used.get(k, 0.0) + v
            missing = [
                k
                for k, v in asked.items()
                if (k in allocatable or not engine)
                and allocatable.get(k, 0.0) - used.get(k, 0.0) < v - 1e-9
            ]
            if not missing:
                return node["metadata"]["name"], ""
            for k in missing:
                short[k] = short.get(k, 0) + 1
        reasons = ", ".join(f"{n} Insufficient {k}" for k, n in sorted(short.items()))
        return None, f"0/{len(nodes)} nodes are available: {reasons}."

    def bind(self, pod_name: str, namespace: str, node: str) -> Obj:
        pod = copy.deepcopy(self.objects[("pods", namespace, pod_name)])
        pod["spec"]["nodeName"] = node
        pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]
        return self.put("pods", pod)

    def waiting(self, pod_name: str, namespace: str, reason: str, message: str = "") -> Obj:
        pod = self.objects[("pods", namespace, pod_name)]
        container = pod["spec"]["containers"][0]
        state = {"waiting": {"reason": reason, **({"message": message} if message else {})}}
        return self.update_pod(
            pod_name,
            namespace,
            containerStatuses=[
                {
                    "name": container["name"],
                    "image": container["image"],
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "started": False,
                    "state": state,
                }
            ],
        )

    def run_pod(self, pod_name: str, namespace: str, started_at: str | None = None) -> Obj:
        """The kubelet started the container (``started_at``: when, as the cluster says)."""
        pod = self.objects[("pods", namespace, pod_name)]
        container = pod["spec"]["containers"][0]
        started_at = started_at or now()
        return self.update_pod(
            pod_name,
            namespace,
            phase="Running",
            startTime=started_at,
            containerStatuses=[
                {
                    "name": container["name"],
                    "image": container["image"],
                    "imageID": "sha256:0",
                    "ready": True,
                    "restartCount": 0,
                    "started": True,
                    "state": {"running": {"startedAt": started_at}},
                }
            ],
        )

    def finish_pod(
        self,
        pod_name: str,
        namespace: str,
        exit_code: int,
        reason: str | None = None,
        pod_reason: str | None = None,
        pod_message: str | None = None,
        disruption: tuple[str, str] | None = None,
        pod_deleted_first: bool = False,
        finished_at: str | None = None,
    ) -> Obj:
        """The kubelet reports the container ended; the Job controller updates the Job.

        ``pod_deleted_first``: the order real clusters show with pod-tracking finalizers
        (an evicted pod, a failed pod the controller cleans up): the pod's ``DELETED``
        event (carrying its final status) arrives before the Job's Failed condition, and
        a list of the Job's pods afterwards is empty.
        """
        pod = self.objects[("pods", namespace, pod_name)]
        container = pod["spec"]["containers"][0]
        finished_at = finished_at or now()
        running = next(
            (
                (cs.get("state") or {}).get("running") or {}
                for cs in (pod.get("status") or {}).get("containerStatuses") or []
            ),
            {},
        )
        terminated: Obj = {
            "exitCode": exit_code,
            "startedAt": running.get("startedAt") or finished_at,
            "finishedAt": finished_at,
        }
        terminated["reason"] = reason or ("Completed" if exit_code == 0 else "Error")
        status: Obj = {
            "phase": "Succeeded" if exit_code == 0 else "Failed",
            "containerStatuses": [
                {
                    "name": container["name"],
                    "image": container["image"],
                    "imageID": "sha256:0",
                    "ready": False,
                    "restartCount": 0,
                    "started": False,
                    "state": {"terminated": terminated},
                }
            ],
        }
        if pod_reason:
            status["reason"] = pod_reason
        if pod_message:
            status["message"] = pod_message
        if disruption:
            status["conditions"] = [
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": disruption[0],
                    "message": disruption[1],
                }
            ]
        done = self.update_pod(pod_name, namespace, **status)
        job_name = pod["metadata"]["labels"].get("batch.kubernetes.io/job-name")
        if pod_deleted_first:
            self.remove("pods", namespace, pod_name)
        if job_name and ("jobs", namespace, job_name) in self.objects:
            job = self.objects[("jobs", namespace, job_name)]
            wanted = job["spec"].get("completions") or 1
            succeeded = [
                p
                for p in self.pods_of(job_name, namespace)
                if (p.get("status") or {}).get("phase") == "Succeeded"
            ]
            if exit_code == 0 and len(succeeded) < wanted and not pod_deleted_first:
                job = copy.deepcopy(job)  # an Indexed Job waits for its other indexes
                job["status"]["succeeded"] = len(succeeded)
                job["status"]["active"] = max(0, job["status"].get("active", 1) - 1)
                self.put("jobs", job)
            elif exit_code == 0:
                self.job_condition(
                    job_name, namespace, "Complete", "CompletionsReached", at=finished_at
                )
            else:
                self.job_condition(
                    job_name,
                    namespace,
                    "Failed",
                    "BackoffLimitExceeded",
                    "Job has reached the specified backoff limit",
                    at=finished_at,
                )
        return done

    def job_condition(
        self,
        job_name: str,
        namespace: str,
        kind: str,
        reason: str,
        message: str = "",
        at: str | None = None,
    ) -> Obj:
        """The Job controller sets a final condition (``at``: its transition time)."""
        at = at or now()
        job = copy.deepcopy(self.objects[("jobs", namespace, job_name)])
        job["status"].setdefault("conditions", []).append(
            {
                "type": kind,
                "status": "True",
                "reason": reason,
                "message": message,
                "lastProbeTime": at,
                "lastTransitionTime": at,
            }
        )
        job["status"]["active"] = 0
        if kind == "Complete":
            job["status"]["succeeded"] = 1
            job["status"]["completionTime"] = at
        elif kind == "Failed":
            job["status"]["failed"] = 1
            # the controller deletes pods still running (deadline exceeded, failure policy)
            for pod in self.pods_of(job_name, namespace):
                if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                    self._terminate_pod(pod)
        return self.put("jobs", job)

    def expire_ttl(self, job_name: str, namespace: str) -> None:
        """The TTL-after-finished controller deletes a finished Job whose
        ``ttlSecondsAfterFinished`` has passed, whether or not anyone watches: with
        foreground propagation, as the real controller does, so its pods go first (each a
        ``DELETED`` event) and the Job after them. Its pods' logs go with them."""
        job = self.objects[("jobs", namespace, job_name)]
        if job["spec"].get("ttlSecondsAfterFinished") is None:
            raise AssertionError(f"Job {job_name} has no ttlSecondsAfterFinished")
        finished = [
            c
            for c in (job.get("status") or {}).get("conditions") or []
            if c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        ]
        if not finished:
            raise AssertionError(f"Job {job_name} has not finished; the TTL starts at its end")
        job = copy.deepcopy(job)
        job["metadata"]["deletionTimestamp"] = now()
        job["metadata"]["finalizers"] = ["foregroundDeletion"]
        self.put("jobs", job)
        for pod in self.pods_of(job_name, namespace):
            self.remove("pods", namespace, pod["metadata"]["name"])
            self.logs.pop((namespace, pod["metadata"]["name"]), None)
        if ("jobs", namespace, job_name) in self.objects:  # no pod left to finish it
            self.remove("jobs", namespace, job_name)

    def admit(self, job_name: str, namespace: str) -> Obj:
        """Kueue admits a suspended Job: it sets ``suspend: false``."""
        job = copy.deepcopy(self.objects[("jobs", namespace, job_name)])
        job["spec"]["suspend"] = False
        return self.put("jobs", job)

    def suspend_again(self, job_name: str, namespace: str) -> Obj:
        """Kueue preempts an admitted Job: it sets ``suspend: true`` again; the Job
        controller then marks it Suspended and deletes its pods (their runners get
        SIGTERM), as for any suspended Job."""
        job = copy.deepcopy(self.objects[("jobs", namespace, job_name)])
        job["spec"]["suspend"] = True
        status = job.setdefault("status", {})
        status["conditions"] = [
            *(status.get("conditions") or []),
            {
                "type": "Suspended",
                "status": "True",
                "reason": "JobSuspended",
                "message": "Job suspended",
                "lastTransitionTime": now(),
            },
        ]
        status["active"] = 0
        stored = self.put("jobs", job)
        for pod in self.pods_of(job_name, namespace):
            self._terminate_pod(pod)
        return stored

    def reconcile_jobsets(self) -> None:
        """The JobSet controller, once over every JobSet: makes the Job of each
        replicated Job (``NAME-RJOB-0``, owned by it, suspended as the JobSet is, its pods
        in the headless Service named after the JobSet), makes that Service, passes a
        change of ``suspend`` on to its Jobs (a suspended Job's pods go), and sets the
        JobSet's Completed or Failed condition from its Jobs'."""
        for jobset in self.list("jobsets"):
            meta, spec = jobset["metadata"], jobset["spec"]
            namespace, name = meta["namespace"], meta["name"]
            if meta.get("deletionTimestamp") or self._jobset_ended(jobset):
                continue
            suspend = bool(spec.get("suspend"))
            owner = {
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "name": name,
                "uid": meta["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
            network = spec.get("network") or {}
            subdomain = network.get("subdomain") or name
            if network.get("enableDNSHostnames", True) and not self.get(
                "services", namespace, subdomain
            ):
                self._store_new(
                    "services",
                    {
                        "apiVersion": "v1",
                        "kind": "Service",
                        "metadata": {
                            "name": subdomain,
                            "namespace": namespace,
                            "ownerReferences": [owner],
                        },
                        "spec": {
                            "clusterIP": "None",
                            "selector": {"jobset.sigs.k8s.io/jobset-name": name},
                            "publishNotReadyAddresses": bool(
                                network.get("publishNotReadyAddresses")
                            ),
                        },
                    },
                )
            for replicated in spec.get("replicatedJobs") or []:
                for index in range(replicated.get("replicas", 1)):
                    job_name = f"{name}-{replicated['name']}-{index}"
                    existing = self.get("jobs", namespace, job_name)
                    if existing is not None:
                        if bool(existing["spec"].get("suspend")) != suspend:
                            if suspend:
                                self.suspend_again(job_name, namespace)
                            else:
                                self.admit(job_name, namespace)
                        continue
                    template = copy.deepcopy(replicated["template"])
                    labels = {
                        **(template.get("metadata") or {}).get("labels", {}),
                        "jobset.sigs.k8s.io/jobset-name": name,
                        "jobset.sigs.k8s.io/replicatedjob-name": replicated["name"],
                        "jobset.sigs.k8s.io/job-index": str(index),
                    }
                    job_spec = template["spec"]
                    job_spec["suspend"] = suspend
                    pod_meta = job_spec["template"].setdefault("metadata", {})
                    pod_meta["labels"] = {
                        **(pod_meta.get("labels") or {}),
                        "jobset.sigs.k8s.io/jobset-name": name,
                    }
                    job_spec["template"]["spec"]["subdomain"] = subdomain
                    self._store_new(
                        "jobs",
                        {
                            "apiVersion": "batch/v1",
                            "kind": "Job",
                            "metadata": {
                                "name": job_name,
                                "namespace": namespace,
                                "labels": labels,
                                "annotations": dict(
                                    (template.get("metadata") or {}).get("annotations") or {}
                                ),
                                "ownerReferences": [owner],
                            },
                            "spec": job_spec,
                        },
                    )
            jobs = self.list("jobs", namespace, f"jobset.sigs.k8s.io/jobset-name={name}")
            for kind, condition in (("Failed", "Failed"), ("Complete", "Completed")):
                done = [j for j in jobs if _has_condition(j, kind)]
                if done and (kind == "Failed" or len(done) == len(jobs)):
                    ended = copy.deepcopy(jobset)
                    ended["status"].setdefault("conditions", []).append(
                        {
                            "type": condition,
                            "status": "True",
                            "reason": f"AllJobs{condition}" if kind == "Complete" else "FailedJobs",
                            "message": f"jobset {condition.lower()}",
                            "lastTransitionTime": now(),
                        }
                    )
                    self.put("jobsets", ended)
                    break

    @staticmethod
    def _jobset_ended(jobset: Obj) -> bool:
        return any(
            c.get("type") in ("Completed", "Failed") and c.get("status") == "True"
            for c in (jobset.get("status") or {}).get("conditions") or []
        )

    def _store_new(self, resource: str, obj: Obj) -> Obj:
        """A controller's create: stored as the server stores a created object."""
        self._stamp(resource, obj)
        return self.put(resource, obj, "ADDED")

    def _stamp(self, resource: str, body: Obj) -> None:
        """What the server adds to an object it creates: its uid, creation time and
        generation; for a Job, the labels of its pods and the defaults of its spec."""
        group, kind, _ = RESOURCES[resource]
        meta = body["metadata"]
        name = meta["name"]
        meta.update({"uid": str(uuid.uuid4()), "creationTimestamp": now(), "generation": 1})
        self.created[meta["uid"]] = len(self.created)
        body.setdefault("apiVersion", f"{group}/{VERSIONS.get(group, 'v1')}" if group else "v1")
        body.setdefault("kind", kind)
        body.setdefault("status", {})
        if resource == "jobs":
            uid = meta["uid"]
            template_labels = (
                body["spec"]["template"].setdefault("metadata", {}).setdefault("labels", {})
            )
            template_labels.update(
                {
                    "batch.kubernetes.io/controller-uid": uid,
                    "batch.kubernetes.io/job-name": name,
                    "controller-uid": uid,
                    "job-name": name,
                }
            )
            body["spec"]["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
            body["spec"].setdefault("parallelism", 1)
            body["spec"].setdefault("completions", 1)
            body["spec"].setdefault("suspend", False)
            body["spec"].setdefault("completionMode", "NonIndexed")
            if not body["spec"]["suspend"]:
                body["status"]["startTime"] = now()

    def set_jobset_suspend(self, name: str, namespace: str, suspend: bool) -> Obj:
        """Kueue admits a JobSet (``suspend: false``) or preempts it (``true`` again); the
        JobSet controller passes it on to its Jobs."""
        jobset = copy.deepcopy(self.objects[("jobsets", namespace, name)])
        jobset["spec"]["suspend"] = suspend
        stored = self.put("jobsets", jobset)
        self.reconcile_jobsets()
        return stored

    def kueue_admit_fitting(self, namespace: str, gpus: float) -> list[str]:
        """Kueue with a ClusterQueue of ``gpus`` nvidia.com/gpu: admit, oldest first, each
        suspended Job or JobSet whose pods' GPUs all fit in what the admitted ones leave,
        whole or not at all (a multi-node job is one Workload of all its pods): the names
        admitted."""

        def wanted(spec: Obj) -> float:
            pod = spec["template"]["spec"]
            per_pod = sum(
                _quantity(((c.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu", 0))
                for c in pod.get("containers") or []
            )
            return per_pod * (spec.get("parallelism") or 1)

        def total(resource: str, obj: Obj) -> float:
            if resource == "jobsets":
                return sum(
                    wanted(r["template"]["spec"]) * r.get("replicas", 1)
                    for r in obj["spec"].get("replicatedJobs") or []
                )
            return wanted(obj["spec"])

        queued: list[tuple[int, str, Obj]] = []
        used = 0.0
        for resource in ("jobs", "jobsets"):
            for obj in self.list(resource, namespace):
                labels = obj["metadata"].get("labels") or {}
                if "kueue.x-k8s.io/queue-name" not in labels:
                    continue  # a JobSet's Job: its JobSet is the Workload
                if obj["spec"].get("suspend"):
                    queued.append((self.created.get(obj["metadata"]["uid"], 0), resource, obj))
                elif not (_has_condition(obj, "Complete") or _has_condition(obj, "Failed")) and (
                    not self._jobset_ended(obj)
                ):
                    used += total(resource, obj)
        admitted = []
        for _, resource, obj in sorted(queued, key=lambda item: item[0]):
            need = total(resource, obj)
            if used + need > gpus + 1e-9:
                continue
            used += need
            name = obj["metadata"]["name"]
            if resource == "jobsets":
                self.set_jobset_suspend(name, namespace, False)
            else:
                self.admit(name, namespace)
            admitted.append(name)
        return admitted

    def cut_log_streams(self) -> None:
        """End every open ``follow`` log stream now, as a proxy's idle timeout does."""
        self._log_cuts += 1
        self._poke()

    def append_log(self, pod_name: str, namespace: str, text: str) -> None:
        self.logs[(namespace, pod_name)] = self.logs.get((namespace, pod_name), "") + text
        self._poke()

    def _poke(self) -> None:
        async def notify() -> None:
            async with self._changed:
                self._changed.notify_all()

        self._spawn(notify())

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- HTTP -------------------------------------------------------------------

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._route(request)
        except ApiError as exc:
            return web.json_response(exc.body, status=exc.body["code"])

    async def _route(self, request: web.Request) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        # /api/v1/... or /apis/batch/v1/...
        if parts[:2] == ["api", "v1"]:
            group, rest = "", parts[2:]
        elif parts[:3] == ["apis", "batch", "v1"]:
            group, rest = "batch", parts[3:]
        elif parts[:3] == ["apis", "networking.k8s.io", "v1"]:
            group, rest = "networking.k8s.io", parts[3:]
        elif len(parts) >= 3 and parts[0] == "apis" and VERSIONS.get(parts[1]) == parts[2]:
            group, rest = parts[1], parts[3:]
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        namespace = None
        if rest[:1] == ["namespaces"] and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        if (
            not rest
            or rest[0] not in RESOURCES
            or RESOURCES[rest[0]][0] != group
            or rest[0] in self.absent
        ):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        resource = rest[0]
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        query = request.query
        watching = query.get("watch", "") in _TRUE
        method = request.method
        verb = {
            "GET": "watch" if watching else ("get" if name else "list"),
            "POST": "create",
            "PUT": "update",
            "PATCH": "patch",
            "DELETE": "delete" if name else "deletecollection",
        }[method]
        self.requests.append((verb, group, f"{resource}/{sub}" if sub else resource))
        self.queries.append((verb, resource, dict(query)))
        if resource in self.forbidden:
            scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
            raise ApiError(
                403,
                "Forbidden",
                f'{resource} is forbidden: User "system:serviceaccount:nbjobs:nbjobs-service" '
                f'cannot {verb} resource "{resource}" in API group "{group}" {scope}',
                {"kind": resource},
            )
        namespaced = RESOURCES[resource][2]
        if namespaced != (namespace is not None) and not (method == "GET" and not name):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if sub == "log" and resource == "pods" and method == "GET":
            return await self._log(request, namespace, name or "")
        if sub is not None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if method == "GET" and name is None:
            if watching:
                return await self._watch(request, resource, namespace)
            return self._list(resource, namespace, query)
        if method == "GET" and name is not None:
            return web.json_response(self._must(resource, namespace, name))
        if method == "POST" and name is None and namespace is not None:
            body = await request.json()
            self.creates_in_flight += 1
            self.most_creates_in_flight = max(self.most_creates_in_flight, self.creates_in_flight)
            try:
                if self.create_delay:
                    await asyncio.sleep(self.create_delay)  # the admission webhooks
                if self.create_gate is not None:
                    await self.create_gate.wait()
                return self._create(resource, namespace, body)
            finally:
                self.creates_in_flight -= 1
        if method == "PUT" and name is not None and namespace is not None:
            return self._replace(resource, namespace, name, await request.json())
        if method == "DELETE" and name is not None:
            body = {}
            if request.can_read_body:
                text = await request.text()
                body = json.loads(text) if text.strip() else {}
            # the real server: a DeleteOptions body if one came, else the query parameters
            policy = body.get("propagationPolicy") if body else query.get("propagationPolicy")
            return self._delete(resource, namespace, name, policy)
        raise ApiError(405, "MethodNotAllowed", f"the server does not allow {method} here")

    def _must(self, resource: str, namespace: str | None, name: str) -> Obj:
        obj = self.get(resource, namespace, name)
        if obj is None:
            group, _, _ = RESOURCES[resource]
            qualified = f"{resource}.{group}" if group else resource
            raise ApiError(
                404,
                "NotFound",
                f'{qualified} "{name}" not found',
                {"name": name, "group": group, "kind": resource},
            )
        return obj

    def _list(self, resource: str, namespace: str | None, query: Any) -> web.Response:
        group, kind, _ = RESOURCES[resource]
        items = [
            o
            for o in self.list(resource, namespace)
            if _matches(o, query.get("labelSelector", ""), query.get("fieldSelector", ""))
        ]
        return web.json_response(
            {
                "kind": f"{kind}List",
                "apiVersion": f"{group}/{VERSIONS.get(group, 'v1')}" if group else "v1",
                "metadata": {"resourceVersion": str(self.resource_version)},
                "items": items,
            }
        )

    def _create(self, resource: str, namespace: str, body: Obj) -> web.Response:
        group, kind, _ = RESOURCES[resource]
        meta = body.setdefault("metadata", {})
        if body.get("metadata", {}).get("namespace", namespace) != namespace:
            raise ApiError(400, "BadRequest", "the namespace of the provided object does not match")
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        qualified = f"{resource}.{group}" if group else resource
        name = meta.get("name") or ""
        causes = self._validate(resource, body)
        if causes:
            message = f'{kind}.{group or "core"} "{name}" is invalid: ' + "; ".join(
                f"{c['field']}: {c['message']}" for c in causes
            )
            raise ApiError(422, "Invalid", message, {"name": name, "kind": kind, "causes": causes})
        failure = self.fail_creates.pop(0) if self.fail_creates else None
        if failure is not None and not failure[1]:
            code = failure[0]
            reason = {422: "Invalid", 429: "TooManyRequests"}.get(code, "ServiceUnavailable")
            raise ApiError(code, reason, "the server is currently unable to handle the request")
        if self.get(resource, namespace, name) is not None:
            raise ApiError(
                409,
                "AlreadyExists",
                f'{qualified} "{name}" already exists',
                {"name": name, "group": group, "kind": resource},
            )
        meta["namespace"] = namespace
        self._stamp(resource, body)
        self.put(resource, body, "ADDED")
        if failure is not None:
            raise ApiError(failure[0], "InternalError", "etcdserver: request timed out")
        return web.json_response(body, status=201)

    def _replace(self, resource: str, namespace: str, name: str, body: Obj) -> web.Response:
        """PUT: the whole object anew, if the resourceVersion it was read at is current."""
        current = self._must(resource, namespace, name)
        group, kind, _ = RESOURCES[resource]
        meta = body.setdefault("metadata", {})
        if meta.get("name") != name:
            raise ApiError(400, "BadRequest", "the name of the object does not match the URL")
        version = meta.get("resourceVersion")
        if version is not None and version != current["metadata"]["resourceVersion"]:
            qualified = f"{resource}.{group}" if group else resource
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {qualified} "{name}": the object has been '
                "modified; please apply your changes to the latest version and try again",
                {"name": name, "group": group, "kind": resource},
            )
        causes = self._validate(resource, body)
        if causes:
            raise ApiError(422, "Invalid", f'{kind} "{name}" is invalid', {"causes": causes})
        for key in ("uid", "creationTimestamp", "namespace"):
            meta[key] = current["metadata"][key]
        meta["generation"] = current["metadata"].get("generation", 1) + 1
        body.setdefault("apiVersion", current["apiVersion"])
        body.setdefault("kind", kind)
        return web.json_response(self.put(resource, body))

    def _validate(self, resource: str, body: Obj) -> list[Obj]:
        causes = []
        if resource == "jobsets":  # the JobSet CRD's schema, and Kubernetes' for its Jobs
            from .jobset_schema import jobset_problems

            causes += [
                {"reason": "FieldValueInvalid", "field": "spec", "message": problem}
                for problem in jobset_problems(body)
            ]
        if resource == "services":
            import kubernetes_validate

            try:
                kubernetes_validate.validate(
                    {"apiVersion": "v1", "kind": "Service", **body}, "1.37.0", strict=True
                )
            except kubernetes_validate.ValidationError as exc:
                causes.append({"reason": "FieldValueInvalid", "field": "spec", "message": str(exc)})
        if resource == "networkpolicies":  # what the real server checks: its schema
            import kubernetes_validate

            try:
                kubernetes_validate.validate(
                    {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", **body},
                    "1.37.0",
                    strict=True,
                )
            except kubernetes_validate.ValidationError as exc:
                causes.append({"reason": "FieldValueInvalid", "field": "spec", "message": str(exc)})
        name = body["metadata"].get("name") or ""
        if not name:
            causes.append(
                {
                    "reason": "FieldValueRequired",
                    "field": "metadata.name",
                    "message": "Required value: name or generateName is required",
                }
            )
        elif not _DNS_LABEL.match(name) or len(name) > 63:
            causes.append(
                {
                    "reason": "FieldValueInvalid",
                    "field": "metadata.name",
                    "message": f'Invalid value: "{name}": a lowercase RFC 1123 label '
                    "must consist of lower case alphanumeric characters or '-'",
                }
            )
        if resource == "jobs":
            pod = ((body.get("spec") or {}).get("template") or {}).get("spec") or {}
            if pod.get("restartPolicy") not in ("Never", "OnFailure"):
                causes.append(
                    {
                        "reason": "FieldValueNotSupported",
                        "field": "spec.template.spec.restartPolicy",
                        "message": f'Unsupported value: "{pod.get("restartPolicy")}": '
                        'supported values: "OnFailure", "Never"',
                    }
                )
            for i, container in enumerate(pod.get("containers") or []):
                resources = container.get("resources") or {}
                requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
                for key in set(requests) | set(limits):
                    extended = "/" in key and not key.startswith("kubernetes.io/")
                    if extended and requests.get(key, limits.get(key)) != limits.get(key):
                        causes.append(
                            {
                                "reason": "FieldValueInvalid",
                                "field": f"spec.template.spec.containers[{i}]"
                                f".resources.requests[{key}]",
                                "message": f"Invalid value: must be equal to {key} limit",
                            }
                        )
        return causes

    def _delete(
        self, resource: str, namespace: str | None, name: str, policy: str | None
    ) -> web.Response:
        obj = self._must(resource, namespace, name)
        if policy not in (None, "Orphan", "Background", "Foreground"):
            raise ApiError(
                422, "Invalid", f'Unsupported value: "{policy}"', {"name": name, "kind": resource}
            )
        if resource != "jobs":
            if resource == "pods":
                self._terminate_pod(obj)
                return web.json_response(obj)
            self.remove(resource, namespace, name)
            return web.json_response(obj)
        policy = policy or "Orphan"  # batch/v1 Jobs orphan their pods unless told otherwise
        pods = self.pods_of(name, namespace or "")
        if policy == "Foreground" and pods:
            job = copy.deepcopy(obj)
            job["metadata"]["deletionTimestamp"] = now()
            job["metadata"]["finalizers"] = ["foregroundDeletion"]
            self.put("jobs", job)
            for pod in pods:
                self._terminate_pod(pod)
            return web.json_response(job)
        self.remove("jobs", namespace, name)
        if policy in ("Background", "Foreground"):
            for pod in pods:
                self._terminate_pod(pod)
        else:
            for pod in pods:  # orphaned: the owner reference goes, the pod stays
                orphan = copy.deepcopy(pod)
                orphan["metadata"].pop("ownerReferences", None)
                self.put("pods", orphan)
        return web.json_response(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": {
                    "name": name,
                    "group": "batch",
                    "kind": "jobs",
                    "uid": obj["metadata"]["uid"],
                },
            }
        )

    def _terminate_pod(self, pod: Obj) -> None:
        """Graceful deletion: deletionTimestamp now, the pod object goes after its grace."""
        meta = pod["metadata"]
        if meta.get("deletionTimestamp"):
            return
        pod = copy.deepcopy(pod)
        pod["metadata"]["deletionTimestamp"] = now()
        self.put("pods", pod)

        async def later() -> None:
            await asyncio.sleep(self.pod_termination_delay)
            self.remove("pods", meta.get("namespace"), meta["name"])
            self._poke()

        self._spawn(later())

    def _maybe_finish_foreground(self, pod: Obj) -> None:
        job_name = (pod["metadata"].get("labels") or {}).get("batch.kubernetes.io/job-name")
        namespace = pod["metadata"].get("namespace")
        job = self.get("jobs", namespace, job_name or "")
        if (
            job
            and job["metadata"].get("deletionTimestamp")
            and not self.pods_of(job_name or "", namespace or "")
        ):
            self.remove("jobs", namespace, job_name or "")

    async def _watch(
        self, request: web.Request, resource: str, namespace: str | None
    ) -> web.StreamResponse:
        query = request.query
        since = query.get("resourceVersion", "")
        bookmarks = query.get("allowWatchBookmarks", "") in _TRUE
        timeout = float(query.get("timeoutSeconds", "0") or 0)
        group, kind, _ = RESOURCES[resource]
        too_old = since not in ("", "0") and int(since) < self.compacted
        if too_old and self.fail_watch_with_http_410:
            raise ApiError(410, "Expired", f"too old resource version: {since} ({self.compacted})")
        watcher = _Watcher(
            resource, namespace, query.get("labelSelector", ""), query.get("fieldSelector", "")
        )
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)

        async def send(event: Obj) -> None:
            await response.write(json.dumps(event).encode() + b"\n")

        if too_old:
            await send(
                {
                    "type": "ERROR",
                    "object": status_body(
                        410, "Expired", f"too old resource version: {since} ({self.compacted})"
                    ),
                }
            )
            return response
        self.watchers.append(watcher)
        try:
            if since in ("", "0"):
                for obj in self.list(resource, namespace):
                    if _matches(obj, watcher.labels, watcher.fields):
                        await send({"type": "ADDED", "object": obj})
            else:
                for version, res, event, obj, before in list(self.history):
                    if res != resource or version <= int(since):
                        continue
                    if namespace and obj["metadata"].get("namespace") != namespace:
                        continue
                    seen = _as_seen_by(watcher, event, obj, before)
                    if seen is not None:
                        await send({"type": seen, "object": obj})
            loop = asyncio.get_running_loop()
            ends = loop.time() + timeout if timeout else None
            while True:
                wait = self.bookmark_interval if bookmarks else 3600.0
                if ends is not None:
                    wait = min(wait, ends - loop.time())
                    if wait <= 0:
                        break
                try:
                    event = await asyncio.wait_for(watcher.queue.get(), timeout=wait)
                except asyncio.TimeoutError:
                    if bookmarks:
                        self.bookmarks.append(self.resource_version)
                        await send(
                            {
                                "type": "BOOKMARK",
                                "object": {
                                    "kind": kind,
                                    "apiVersion": f"{group}/v1" if group else "v1",
                                    "metadata": {"resourceVersion": str(self.resource_version)},
                                },
                            }
                        )
                    continue
                if event is None:
                    break
                await send(event)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.watchers.remove(watcher)
        return response

    async def _log(
        self, request: web.Request, namespace: str | None, name: str
    ) -> web.StreamResponse:
        pod = self._must("pods", namespace, name)
        container = request.query.get("container") or pod["spec"]["containers"][0]["name"]
        if container not in [c["name"] for c in pod["spec"]["containers"]]:
            raise ApiError(400, "BadRequest", f"container {container} is not valid for pod {name}")
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        state = statuses[0].get("state", {}) if statuses else {}
        if not statuses or "waiting" in state:
            reason = (state.get("waiting") or {}).get("reason", "ContainerCreating")
            raise ApiError(
                400,
                "BadRequest",
                f'container "{container}" in pod "{name}" is waiting to start: {reason}',
            )
        follow = request.query.get("follow", "") in _TRUE
        if not follow:
            return web.Response(
                text=self.logs.get((namespace or "", name), ""), content_type="text/plain"
            )
        response = web.StreamResponse(status=200, headers={"Content-Type": "text/plain"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        sent = 0
        cuts = self._log_cuts
        self.open_log_streams += 1
        try:
            while True:
                if self._log_cuts != cuts:
                    break
                text = self.logs.get((namespace or "", name), "")
                if len(text) > sent:
                    await response.write(text[sent:].encode())
                    sent = len(text)
                current = self.get("pods", namespace, name)
                ended = current is None or (current.get("status") or {}).get("phase") in (
                    "Succeeded",
                    "Failed",
                )
                if ended and len(self.logs.get((namespace or "", name), "")) == sent:
                    break
                async with self._changed:
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(self._changed.wait(), timeout=0.2)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.open_log_streams -= 1
        return response

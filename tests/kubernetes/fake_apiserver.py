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
import socket
import uuid
from typing import Any

from aiohttp import web

from . import fake_protobuf
from .fake_controllers import PlayedControllers
from .fake_engines import PlayedEngines
from .fake_objects import (
    _TRUE,
    RESOURCES,
    VERSIONS,
    ApiError,
    Obj,
    _as_seen_by,
    _matches,
    _Watcher,
    now,
    problems,
    status_body,
)
from .fake_platform import discovery, patched, read_patch, split_path


class FakeApiServer(PlayedControllers, PlayedEngines):
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
        if resource not in (
            "secrets",
            "configmaps",
            "serviceaccounts",
            "roles",
            "rolebindings",
            "clusterroles",
            "clusterrolebindings",
        ):
            body.setdefault("status", {})
        _secret_data(resource, body)
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
        document = discovery(parts) if request.method == "GET" else None
        if document is not None:
            return web.json_response(document)
        # /api/v1/... or /apis/batch/v1/...
        where = split_path(parts)
        if where is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        group, rest = where
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
        if method == "POST" and name is None:
            body = await _read_body(request)
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
        if method == "PUT" and name is not None:
            return self._replace(resource, namespace, name, await _read_body(request))
        if method == "PATCH" and name is not None:
            kind = request.content_type
            return self._patch(
                resource, namespace, name, read_patch(await request.text(), kind), kind
            )
        if method == "DELETE" and name is not None:
            body = await _read_body(request) if request.can_read_body else {}
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
        if (meta.get("namespace") or namespace) != namespace:
            raise ApiError(400, "BadRequest", "the namespace of the provided object does not match")
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        qualified = f"{resource}.{group}" if group else resource
        name = meta.get("name") or ""
        causes = problems(resource, body)
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
        if namespace is None:
            meta.pop("namespace", None)
        else:
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
        causes = problems(resource, body)
        if causes:
            raise ApiError(422, "Invalid", f'{kind} "{name}" is invalid', {"causes": causes})
        for key in ("uid", "creationTimestamp", "namespace"):
            if key in current["metadata"]:
                meta[key] = current["metadata"][key]
        _secret_data(resource, body)
        meta["generation"] = current["metadata"].get("generation", 1) + 1
        body.setdefault("apiVersion", current["apiVersion"])
        body.setdefault("kind", kind)
        return web.json_response(self.put(resource, body))

    def _patch(
        self, resource: str, namespace: str | None, name: str, patch: Any, content_type: str
    ) -> web.Response:
        """PATCH: the stored object changed as the patch says (server-side apply creates
        what is not there yet), validated as a create is."""
        current = self.get(resource, namespace, name)
        if current is None and content_type.startswith("application/apply-patch+yaml"):
            return self._create(resource, namespace, patched({}, patch, content_type))
        current = self._must(resource, namespace, name)
        body = patched(current, patch, content_type)
        meta = body["metadata"]
        if meta.get("name") != name:
            raise ApiError(400, "BadRequest", "the name of the object does not match the URL")
        causes = problems(resource, body)
        if causes:
            _, kind, _ = RESOURCES[resource]
            raise ApiError(422, "Invalid", f'{kind} "{name}" is invalid', {"causes": causes})
        _secret_data(resource, body)
        if body.get("spec") != current.get("spec"):
            meta["generation"] = current["metadata"].get("generation", 1) + 1
        return web.json_response(self.put(resource, body))

    def _delete(
        self, resource: str, namespace: str | None, name: str, policy: str | None
    ) -> web.Response:
        obj = self._must(resource, namespace, name)
        if policy not in (None, "Orphan", "Background", "Foreground"):
            raise ApiError(
                422, "Invalid", f'Unsupported value: "{policy}"', {"name": name, "kind": resource}
            )
        if resource == "namespaces":  # the namespace controller empties it, then it goes
            for kind, where, other in [k for k in self.objects if k[1] == name]:
                self.remove(kind, where, other)
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


def _secret_data(resource: str, body: Obj) -> None:
    """A Secret's ``stringData`` is written into its ``data`` (base64), as the real server
    stores it; ``stringData`` itself is never stored."""
    if resource != "secrets" or "stringData" not in body:
        return
    import base64

    data = body.setdefault("data", {})
    for key, value in (body.pop("stringData") or {}).items():
        data[key] = base64.b64encode(str(value).encode()).decode()


async def _read_body(request: web.Request) -> Obj:
    """The object a POST or PUT sends: JSON, or protobuf (what client-go's typed clients
    send for built-in kinds); a body this fake cannot read is refused as the real server
    refuses one it cannot decode."""
    if request.content_type == fake_protobuf.PROTOBUF:
        try:
            return fake_protobuf.read(await request.read())
        except ValueError as exc:
            raise ApiError(415, "UnsupportedMediaType", str(exc)) from None
    text = await request.text()
    return json.loads(text) if text.strip() else {}

"""The Kubernetes backend's calls to the API server, with raw JSON in and out.

:class:`KubeApi` holds the clients (kubernetes_asyncio) for the jobs' namespace and
makes each call the backend needs as plain dicts, the way the manifest builders
(:mod:`.kubernetes_objects`) write them: no model classes on either side. An answer
outside 2xx is a :class:`KubeError` with the API server's own status and message.
What is asked, and when, is the backend's (:mod:`.kubernetes`) and the cluster
mirror's (:mod:`.kubernetes_mirror`) to decide; here only how.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from .kubernetes_objects import JOBSET_GROUP, JOBSET_VERSION, jobset_parent

Obj = dict[str, Any]


class KubeError(Exception):
    """The API server said no; ``status`` is its HTTP code, the text its message."""

    def __init__(self, status: int, message: str, reason: str = "") -> None:
        super().__init__(f"Kubernetes API {status} {reason}: {message}".replace("  ", " "))
        self.status = status
        self.reason = reason
        self.message = message


def api_error(status: int, body: bytes) -> KubeError:
    """The error an answer's status and body say (a Status object, or any text)."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return KubeError(status, body.decode(errors="replace")[:300])
    return KubeError(status, parsed.get("message", ""), parsed.get("reason", ""))


def transient(exc: BaseException) -> bool:
    """A failure worth another try: the connection, a timeout, 429 or a 5xx."""
    return not isinstance(exc, KubeError) or exc.status == 429 or exc.status >= 500


class KubeApi:
    """The clients of one API server, for one namespace."""

    def __init__(self, namespace: str, log: logging.Logger | logging.LoggerAdapter[Any]) -> None:
        self.namespace = namespace
        self.log = log
        self.client: Any = None
        self.batch: Any = None
        self.core: Any = None
        self.custom: Any = None

    async def connect(self, kubeconfig: str, connections: int) -> None:
        """Clients from ``kubeconfig`` (empty: the pod's ServiceAccount, else $KUBECONFIG
        or ~/.kube/config), sharing at most ``connections`` connections."""
        from kubernetes_asyncio import client, config

        configuration = client.Configuration()
        if kubeconfig:
            await config.load_kube_config(
                config_file=kubeconfig, client_configuration=configuration
            )
        else:
            try:
                config.load_incluster_config(client_configuration=configuration)
            except config.ConfigException:
                await config.load_kube_config(client_configuration=configuration)
        configuration.connection_pool_maxsize = connections
        self.client = client.ApiClient(configuration)
        self.batch = client.BatchV1Api(self.client)
        self.core = client.CoreV1Api(self.client)
        self.custom = client.CustomObjectsApi(self.client)

    def networking(self) -> Any:
        from kubernetes_asyncio import client

        return client.NetworkingV1Api(self.client)

    async def close(self) -> None:
        if self.client is not None:
            await self.client.close()
        self.client = None

    async def call(self, method: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Obj:
        """Call the API with raw JSON in and out (plain dicts, like the builders make)."""
        response = await method(*args, _preload_content=False, **kwargs)
        try:
            body = await response.read()
            if not 200 <= response.status < 300:
                raise api_error(response.status, body)
            return json.loads(body) if body else {}
        finally:
            response.release()

    async def create(self, manifest: Obj, attempts: int, retry_delay: float) -> Obj:
        """Create a Job, a multi-node job's JobSet or its ranks' Service; try again (up to
        ``attempts`` times in all) while the API server or the network fails."""
        body = copy.deepcopy(manifest)
        for attempt in range(1, attempts + 1):
            try:
                if manifest["kind"] == "JobSet":
                    return await self.call(
                        self.custom.create_namespaced_custom_object,
                        JOBSET_GROUP,
                        JOBSET_VERSION,
                        self.namespace,
                        "jobsets",
                        body,
                    )
                if manifest["kind"] == "Service":
                    return await self.call(
                        self.core.create_namespaced_service, self.namespace, body
                    )
                return await self.call(self.batch.create_namespaced_job, self.namespace, body)
            except (KubeError, aiohttp.ClientError, asyncio.TimeoutError) as exc:
                if not transient(exc) or attempt >= attempts:
                    raise
                self.log.warning(
                    "creating %s %s failed (%s); trying again",
                    manifest["kind"],
                    manifest["metadata"]["name"],
                    exc,
                )
                await asyncio.sleep(retry_delay)
        raise AssertionError("unreachable")

    async def read(self, kind: str, name: str) -> Obj:
        """A Job or JobSet as the API server has it now."""
        if kind == "JobSet":
            return await self.call(
                self.custom.get_namespaced_custom_object,
                JOBSET_GROUP,
                JOBSET_VERSION,
                self.namespace,
                "jobsets",
                name,
            )
        return await self.call(self.batch.read_namespaced_job, name, self.namespace)

    async def delete_job(self, name: str) -> None:
        """Delete a Job and its pods; a JobSet's ranks' Job: its JobSet (the controller
        would make a deleted Job again), which takes its Job, pods and Service along. One
        already gone is no error."""
        parent = jobset_parent(name)
        try:
            if parent is not None:
                await self.call(
                    self.custom.delete_namespaced_custom_object,
                    JOBSET_GROUP,
                    JOBSET_VERSION,
                    self.namespace,
                    "jobsets",
                    parent,
                    propagation_policy="Background",
                )
                return
            await self.call(
                self.batch.delete_namespaced_job,
                name,
                self.namespace,
                propagation_policy="Background",
            )
        except KubeError as exc:
            if exc.status != 404:
                raise

    async def delete_pod(self, name: str) -> None:
        try:
            await self.call(self.core.delete_namespaced_pod, name, self.namespace)
        except KubeError as exc:
            if exc.status != 404:
                raise

    async def pods_of_job(self, name: str) -> list[Obj]:
        """The Job's pods as the API server has them now."""
        listed = await self.call(
            self.core.list_namespaced_pod,
            self.namespace,
            # "job-name": set by the Job controller on every version (the
            # batch.kubernetes.io/ one only from 1.27)
            label_selector=f"job-name={name}",
        )
        return list(listed.get("items") or [])

    async def events(self, selector: str) -> list[Obj]:
        """The namespace's events that ``selector`` (a field selector) picks."""
        listed = await self.call(
            self.core.list_namespaced_event, self.namespace, field_selector=selector
        )
        return list(listed.get("items") or [])

    async def pod_log(self, pod: str, container: str, limit: int) -> tuple[int, bytes]:
        """The status of the read and the first ``limit`` bytes of what ``container`` of
        ``pod`` printed (no error raised: the caller decides what a 400 or 404 means)."""
        response: Any = await self.core.read_namespaced_pod_log(
            pod, self.namespace, container=container, limit_bytes=limit, _preload_content=False
        )
        try:
            return response.status, await response.read()
        finally:
            response.release()

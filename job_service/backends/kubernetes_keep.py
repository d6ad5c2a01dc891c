"""What the Kubernetes backend keeps in place besides the jobs' Jobs.

- :func:`keep_network_policy`: the jobs' NetworkPolicy as nbjobs.yaml says
  (``network.jobs``), made, replaced or removed when the service starts;
- :func:`keep_pod_log`: for a job whose runner left no log in its folder (it never
  ran: an image without nbjobs, a command the image cannot run), what its pod
  printed, in the log's place.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any

import aiohttp

from nbjobs.network import JOBS_POLICY, MANAGED_BY
from nbjobs.storage import FilesChanged, open_in_job_dir

from .kubernetes_api import KubeApi, KubeError
from .kubernetes_objects import CONTAINER_NAME

Obj = dict[str, Any]
Log = logging.Logger | logging.LoggerAdapter[Any]
#: bytes of a pod's own output kept as the job's log when the runner left none
POD_LOG_KEPT = 1024 * 1024


async def keep_network_policy(api: KubeApi, wanted: Obj | None, log: Log) -> None:
    """Make the jobs' NetworkPolicy ``wanted`` (what nbjobs.yaml's ``network.jobs``
    says): create or replace it, or remove the one nbjobs made when none is wanted.
    Rules that cannot be written stop the start (RuntimeError): jobs would reach what
    the admin shut off."""
    networking = api.networking()
    try:
        current: Obj | None = await api.call(
            networking.read_namespaced_network_policy, JOBS_POLICY, api.namespace
        )
    except KubeError as exc:
        if exc.status != 404 and wanted is not None:
            raise _policy_refused(api, exc) from None
        current = None  # none, or none this service may read (and none wanted)
    try:
        if wanted is None:
            labels = ((current or {}).get("metadata") or {}).get("labels") or {}
            if current is not None and labels.items() >= MANAGED_BY.items():
                await api.call(
                    networking.delete_namespaced_network_policy, JOBS_POLICY, api.namespace
                )
                log.info("nbjobs: removed the jobs' NetworkPolicy (no rules in network.jobs)")
            return
        if current is None:
            await api.call(networking.create_namespaced_network_policy, api.namespace, wanted)
        elif current.get("spec") != wanted["spec"]:
            wanted["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            await api.call(
                networking.replace_namespaced_network_policy, JOBS_POLICY, api.namespace, wanted
            )
        else:
            return
    except KubeError as exc:
        if wanted is None:
            log.warning("nbjobs: could not remove the jobs' NetworkPolicy: %s", exc)
            return
        raise _policy_refused(api, exc) from None
    log.info(
        "nbjobs: the jobs' NetworkPolicy %s in %s allows what network.jobs lists",
        JOBS_POLICY,
        api.namespace,
    )


def _policy_refused(api: KubeApi, exc: KubeError) -> RuntimeError:
    return RuntimeError(
        f"network.jobs.egress is set, but the NetworkPolicy {JOBS_POLICY} in namespace "
        f"{api.namespace!r} cannot be written ({exc}); give the service's Role "
        "networkpolicies (get, create, update, delete) as in the example rbac.yaml, or "
        "remove network.jobs.egress. No job starts until then."
    )


async def keep_pod_log(api: KubeApi, name: str, pods: list[Obj], log_file: Path, log: Log) -> None:
    """When Job ``name``'s runner left no log at ``log_file``, keep there what the newest
    of its ``pods`` printed, if that pod is still there: the user's only clue.

    Never a second writer: the log is made only where none exists (``O_EXCL``, which
    an NFS server decides, whatever this machine's cache says), once the container
    has ended, and without following links in the user's folder.
    """
    newest = sorted(
        pods,
        key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or "",
        reverse=True,
    )
    if not newest or _runner_log_exists(name, log_file, log):
        return
    try:
        status, body = await api.pod_log(
            newest[0]["metadata"]["name"], CONTAINER_NAME, POD_LOG_KEPT
        )
    except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
        log.info("job %s left no log, and its pod's log cannot be read: %s", name, exc)
        return
    if status != 200 or not body:
        return  # the container never started, or the pod is gone already
    try:
        fd = open_in_job_dir(log_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except FileExistsError:
        return  # the runner's, after all
    except (FilesChanged, OSError) as exc:
        log.warning(
            "job %s: its pod's log is not kept: %s in its folder (links are not followed)",
            name,
            exc,
        )
        return
    with os.fdopen(fd, "wb") as out:
        out.write(body)
        if len(body) >= POD_LOG_KEPT:
            out.write(
                f"\n[nbjobs] the pod printed more; the first {POD_LOG_KEPT:,} bytes are "
                "kept here\n".encode()
            )
    log.info("job %s: the runner left no log; its pod's output is kept instead", name)


def _runner_log_exists(name: str, log_file: Path, log: Log) -> bool:
    try:
        os.close(open_in_job_dir(log_file, os.O_RDONLY))
    except FileNotFoundError:
        return False
    except (FilesChanged, OSError) as exc:
        log.warning("job %s: its log cannot be opened: %s", name, exc)
        return True  # nothing to add there
    return True

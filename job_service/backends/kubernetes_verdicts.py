"""What a Job, its pods and the cluster's events mean for a person: why a job waits
(:func:`waiting_for`, :func:`engine_waiting`), how it ended (:func:`job_verdict`: a
:class:`Verdict` in a sentence, a disruption told apart from a failure), and when it
was admitted, started and ended (:func:`cluster_times`). Pure functions: the backend
reads the objects and feeds them here."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from nbjobs.config import Flavor
from nbjobs.engines import (
    DEFAULT_SCHEDULER,
    KAI_QUEUE_LABEL,
    KUEUE_QUEUE_LABEL,
    VOLCANO_QUEUE_ANNOTATION,
    engine_title,
)
from nbjobs.models import NODE_SEPARATOR

from .kubernetes_capacity import Capacity
from .kubernetes_objects import COMPLETION_INDEX, flavor_resources

_CANNOT_START = {
    "ErrImagePull": "could not pull image",
    "ImagePullBackOff": "could not pull image",
    "InvalidImageName": "the image name is not valid",
    "ErrImageNeverPull": "the image is not on the node and imagePullPolicy is Never",
    "CreateContainerConfigError": "the container could not be configured",
    "CreateContainerError": "the container could not be created",
}

_DISRUPTIONS = {
    "PreemptionByScheduler": "preempted by a higher-priority pod",
    "EvictionByEvictionAPI": "evicted (the node is being drained or scaled down)",
    "DeletionByTaintManager": "stopped because its node was tainted NoExecute",
    "DeletionByPodGC": "lost with its node",
    "TerminationByKubelet": "stopped by the node's kubelet",
}


@dataclass
class Verdict:
    """What a Job and its pod mean now, in nbjobs' terms.

    ``done`` jobs have ended; ``state`` then overrides what the runner's exit
    code says (None: let the status file and exit code decide). A job that is
    not done may be ``waiting`` in the cluster (a sentence says for what).
    """

    done: bool = False
    state: str | None = None
    exit_code: int | None = None
    message: str | None = None
    #: the job cannot start as it is: the backend should delete its Job
    stuck: bool = False
    waiting: str | None = None
    running: bool = False
    node: str | None = None
    #: the cluster stopped it for reasons of its own (eviction, preemption, a lost node):
    #: not the notebook's fault, so the flavor may put it back in the queue
    disrupted: bool = False
    #: it waits because the cluster refuses to make its pod (``waiting`` says the cluster's
    #: words): what ``backend.kubernetes.fail_refused_after`` may end
    refused: bool = False
    #: when it started and ended, as the cluster says (the container's start, the Job's
    #: completion), not when the service noticed; None when the cluster does not say
    started_at: datetime | None = None
    finished_at: datetime | None = None


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind and cond.get("status") == "True":
            return cond
    return None


def _container_statuses(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    status = pod.get("status") or {}
    return list(status.get("initContainerStatuses") or []) + list(
        status.get("containerStatuses") or []
    )


def _memory_limit(pod: Mapping[str, Any]) -> str | None:
    for container in (pod.get("spec") or {}).get("containers") or []:
        limit = ((container.get("resources") or {}).get("limits") or {}).get("memory")
        if limit:
            return str(limit)
    return None


def waiting_for(flavor: Flavor, capacity: Capacity | None) -> str:
    """The sentence for a job no node can take now."""
    selector = ", ".join(f"{k}={v}" for k, v in sorted(flavor.node_selector.items()))
    where = f"on nodes with {selector}" if selector else "on any node"
    free = f" ({capacity.gpus_free} free)" if capacity is not None else ""
    if flavor.gpus:
        return f"waiting for {flavor.gpus} × {flavor.gpu_resource} {where}{free}"  # noqa: RUF001
    asked = " and ".join(
        f"{v} {k}" for k, v in flavor_resources(flavor).items() if k in ("cpu", "memory")
    )
    return f"waiting for room for {asked or 'one more pod'} {where}"


#: how long a pod may wait for its scheduler's first word before nbjobs says that no
#: scheduler of that name seems to run
SCHEDULER_SILENT_AFTER = 60.0


def engine_holds(pod: Mapping[str, Any]) -> bool:
    """Whether a scheduler other than Kubernetes' own holds the pod unplaced."""
    engine = (pod.get("spec") or {}).get("schedulerName")
    return (
        (pod.get("status") or {}).get("phase") == "Pending"
        and not (pod.get("spec") or {}).get("nodeName")
        and bool(engine)
        and engine != DEFAULT_SCHEDULER
        and "deletionTimestamp" not in (pod.get("metadata") or {})
    )


def newest_warning(events: Iterable[Mapping[str, Any]]) -> str | None:
    """The message of the newest Warning among ``events`` (core/v1 Events), or None."""

    def when(event: Mapping[str, Any]) -> str:
        # a series' last time, else the event's own, else when the object was made
        return (
            (event.get("series") or {}).get("lastObservedTime")
            or event.get("lastTimestamp")
            or event.get("eventTime")
            or (event.get("metadata") or {}).get("creationTimestamp")
            or ""
        )

    warnings = [
        e for e in events if e.get("type") == "Warning" and (e.get("message") or e.get("reason"))
    ]
    if not warnings:
        return None
    newest = max(warnings, key=when)
    return str(newest.get("message") or newest.get("reason"))


def engine_waiting(
    pod: Mapping[str, Any],
    engine: str,
    scheduled: Mapping[str, Any] | None,
    now: datetime | None = None,
    said: str | None = None,
) -> str:
    """Why a pod another scheduler (KAI, Volcano, HAMi's) holds has not started: that
    scheduler's name and queue, and its own words from the pod's PodScheduled condition,
    else from its latest warning event (``said``); if it has said nothing for a while,
    that it may not be running at all."""
    meta = pod.get("metadata") or {}
    queue = (meta.get("labels") or {}).get(KAI_QUEUE_LABEL) or (meta.get("annotations") or {}).get(
        VOLCANO_QUEUE_ANNOTATION
    )
    text = f"queued by {engine_title(engine)}" + (f", queue {queue}" if queue else "")
    if scheduled is not None and scheduled.get("status") == "False":
        said = scheduled.get("message") or scheduled.get("reason") or said
        return f"{text}: {said}" if said else text
    if said:
        return f"{text}: {said}"
    created = _timestamp(meta.get("creationTimestamp"))
    now = now or datetime.now(timezone.utc)
    if created is not None and (now - created).total_seconds() > SCHEDULER_SILENT_AFTER:
        waited = max(1, round((now - created).total_seconds() / 60))
        return (
            f"{text}: no scheduler named {engine} has looked at it in {waited} min; is "
            f"{engine_title(engine)} installed and running? Ask your admin"
        )
    return text


def _pod_failure(pod: Mapping[str, Any]) -> tuple[str | None, int | None, bool]:
    """Why a pod ended badly, if the cluster says more than an exit code; the code; and
    whether the cluster stopped it for reasons of its own (evicted, preempted, node lost)."""
    status = pod.get("status") or {}
    node = (pod.get("spec") or {}).get("nodeName")
    exit_code = None
    for cs in _container_statuses(pod):
        terminated = (cs.get("state") or {}).get("terminated")
        if not terminated:
            continue
        exit_code = terminated.get("exitCode")
        if terminated.get("reason") == "OOMKilled":
            limit = _memory_limit(pod)
            if limit:
                return f"out of memory (limit {limit})", exit_code, False
            text = "out of memory (the flavor sets no memory limit; the node ran out)"
            return text, exit_code, False
    disruption = _condition(pod, "DisruptionTarget")
    if disruption is not None:
        reason = disruption.get("reason") or "Disrupted"
        what = _DISRUPTIONS.get(reason, "stopped by the cluster")
        detail = disruption.get("message") or ""
        on = f" on node {node}" if node else ""
        text = f"the job's pod was {what}{on} ({reason}{': ' + detail if detail else ''})"
        return text + "; re-run it", exit_code, True
    if status.get("reason") == "Evicted":
        on = f" from node {node}" if node else ""
        detail = status.get("message") or "no reason given"
        return f"the job's pod was evicted{on}: {detail}; re-run it", exit_code, True
    return None, exit_code, False


def pods_by_rank(
    job: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]
) -> dict[int, Mapping[str, Any]]:
    """The newest pod of each rank of a multi-node (Indexed, several completions) Job, by
    its completion index; empty for a Job of one pod."""
    spec = job.get("spec") or {}
    if spec.get("completionMode") != "Indexed" or (spec.get("completions") or 1) < 2:
        return {}
    ranks: dict[int, Mapping[str, Any]] = {}
    for pod in sorted(pods, key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or ""):
        rank = _rank_of(pod)
        if rank is not None:
            ranks[rank] = pod
    return ranks


def _rank_of(pod: Mapping[str, Any]) -> int | None:
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(COMPLETION_INDEX)
    return int(text) if isinstance(text, str) and text.isdigit() else None


def _node_of(pod: Mapping[str, Any]) -> str | None:
    return (pod.get("spec") or {}).get("nodeName")


def _finished_at(pod: Mapping[str, Any]) -> str:
    for cs in _container_statuses(pod):
        terminated = (cs.get("state") or {}).get("terminated") or {}
        if terminated.get("finishedAt"):
            return str(terminated["finishedAt"])
    return "~"  # not ended: after every time


def _telling_pod(ranks: Mapping[int, Mapping[str, Any]]) -> Mapping[str, Any]:
    """The rank's pod that says most of a multi-node job: the first that failed (by its
    container's end; a tie goes to the lower rank), else the first still pending, else
    rank 0's."""
    failed = [
        (_finished_at(p), rank, p)
        for rank, p in ranks.items()
        if (p.get("status") or {}).get("phase") == "Failed"
    ]
    if failed:
        return min(failed, key=lambda item: item[:2])[2]
    pending = [
        (rank, p) for rank, p in ranks.items() if (p.get("status") or {}).get("phase") == "Pending"
    ]
    if pending:
        return min(pending, key=lambda item: item[0])[1]
    return ranks[min(ranks)]


def job_verdict(
    job: Mapping[str, Any] | None,
    pods: Iterable[Mapping[str, Any]],
    flavor: Flavor | None,
    capacity: Capacity | Callable[[], Capacity | None] | None = None,
    engine_said: str | None = None,
) -> Verdict:
    """Map a Job (None: it is gone) and its pods to what a person should be told,
    with the cluster's own times of its start and end; ``engine_said`` is the latest
    warning event of the engine that holds its pod, or of the Job controller that cannot
    make one (``FailedCreate``), if any. ``capacity`` may be a
    function, asked only for a job whose pod no node takes now (its words say how many
    GPUs are free): working it out for every followed job at every change of the
    cluster was most of the service's time in a burst of 200 starts."""
    pods = list(pods)
    verdict = _job_verdict(job, pods, flavor, capacity, engine_said)
    if job is not None:
        verdict.started_at, verdict.finished_at = cluster_times(job, pods)
    return verdict


def refused_for_too_long(job: Mapping[str, Any], said: str, limit: float) -> Verdict | None:
    """A Job the cluster has refused to make a pod for (its verdict ``refused``) since its
    creation, ``limit`` seconds ago or longer (``backend.kubernetes.fail_refused_after``):
    the job fails in the cluster's words ``said``, and its Job goes (``stuck``). None
    while it may still wait."""
    made = _timestamp((job.get("metadata") or {}).get("creationTimestamp"))
    if made is None or (datetime.now(timezone.utc) - made).total_seconds() < limit:
        return None
    return Verdict(
        done=True,
        state="failed",
        stuck=True,
        message=f"the cluster refused to make its pod for {limit:.0f} s: {said}",
    )


def cluster_times(
    job: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]
) -> tuple[datetime | None, datetime | None]:
    """When the job's notebook started and ended, as Kubernetes recorded it.

    Start: the runner container's start (running or terminated ``startedAt``) of
    the newest pod, else the Job's ``startTime``. End, for a Job that ended: its
    ``completionTime``, else its Failed condition's ``lastTransitionTime``, else the
    container's ``finishedAt``.
    """
    newest = sorted(
        pods, key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or "", reverse=True
    )
    started = finished = None
    for cs in _container_statuses(newest[0]) if newest else []:
        state = cs.get("state") or {}
        for phase in ("running", "terminated"):
            if state.get(phase):
                started = started or state[phase].get("startedAt")
                if phase == "terminated":
                    finished = state[phase].get("finishedAt")
    status = job.get("status") or {}
    started = started or status.get("startTime")
    end = status.get("completionTime")
    failed = _condition(job, "Failed")
    if end is None and failed is not None:
        end = failed.get("lastTransitionTime")
    if end is None and (failed is not None or _condition(job, "Complete") is not None):
        end = finished
    return _timestamp(started), _timestamp(end)


def _timestamp(value: Any) -> datetime | None:
    """A Kubernetes time (RFC 3339, ``2026-11-25T09:30:00Z``) as an aware datetime."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _job_verdict(
    job: Mapping[str, Any] | None,
    pods: list[Mapping[str, Any]],
    flavor: Flavor | None,
    capacity: Capacity | Callable[[], Capacity | None] | None,
    engine_said: str | None = None,
) -> Verdict:
    if job is None:
        return Verdict(
            done=True,
            state="failed",
            message="the job's Kubernetes Job was deleted outside nbjobs; re-run it",
        )
    pods = sorted(
        pods, key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or "", reverse=True
    )
    pod = pods[0] if pods else None
    node = (pod.get("spec") or {}).get("nodeName") if pod else None
    ranks = pods_by_rank(job, pods)
    if ranks:
        # a multi-node job: the pod that tells its story (the first to fail, else one
        # still waiting, else rank 0), and every node its ranks run on
        pod = _telling_pod(ranks)
        node = (
            NODE_SEPARATOR.join(
                dict.fromkeys(n for _, p in sorted(ranks.items()) if (n := _node_of(p)))
            )
            or None
        )
    failed = _condition(job, "Failed")
    if failed is not None:
        return _failed_verdict(job, failed, ranks, pod, node, engine_said if pod is None else None)
    if _condition(job, "Complete") is not None:
        code = 0
        if pod is not None:
            _, found, _ = _pod_failure(pod)
            code = found if found is not None else 0
        return Verdict(done=True, exit_code=code, node=node)
    if (job.get("spec") or {}).get("suspend"):
        queue = ((job.get("metadata") or {}).get("labels") or {}).get(KUEUE_QUEUE_LABEL)
        where = f" (queue {queue})" if queue else ""
        return Verdict(waiting=f"waiting for Kueue to admit it{where}")
    if pod is None:
        # no pod yet; where the cluster refuses to make one (a ResourceQuota, Pod Security
        # admission, a LimitRange, a webhook), its own words from the Job's events
        if engine_said:
            return Verdict(
                waiting=f"the cluster refuses to make its pod: {engine_said}", refused=True
            )
        return Verdict()
    return _started_verdict(pod, node, flavor, capacity, engine_said)


def _failed_verdict(
    job: Mapping[str, Any],
    failed: Mapping[str, Any],
    ranks: Mapping[int, Mapping[str, Any]],
    pod: Mapping[str, Any] | None,
    node: str | None,
    refused: str | None = None,
) -> Verdict:
    """A Job that failed: its time limit, a rank other than 0, or its pod's failure."""
    if (
        failed.get("reason") != "DeadlineExceeded"
        and ranks
        and pod is not None
        and _rank_of(pod) not in (None, 0)
    ):
        # another rank than 0 failed: rank 0 was stopped for it (its status file says
        # cancelled), so the job's end is that rank's
        message, code, disrupted = _pod_failure(pod)
        rank = _rank_of(pod)
        what = message or (f"its runner exited with code {code}" if code is not None else None)
        return Verdict(
            done=True,
            state="failed",
            exit_code=code,
            message=f"rank {rank} of {(job.get('spec') or {}).get('completions')} failed "
            f"({what or failed.get('reason')}); "
            f"the other ranks were stopped; see the log of rank {rank}",
            node=node,
            disrupted=disrupted,
        )
    if failed.get("reason") == "DeadlineExceeded":
        deadline = (job.get("spec") or {}).get("activeDeadlineSeconds")
        limit = f" ({deadline} s)" if deadline else ""
        if pod is None and not (job.get("status") or {}).get("ready"):
            # its time ran while no pod of it existed: not a notebook that ran too long
            why = f": {refused}" if refused else ""
            return Verdict(
                done=True,
                state="failed",
                message=f"the cluster never made its pod within its time limit{limit}{why}",
            )
        return Verdict(
            done=True,
            state="timed_out",
            message=f"stopped by Kubernetes at its time limit{limit}",
            node=node,
        )
    message, code, disrupted = _pod_failure(pod) if pod else (None, None, False)
    if message is None and code is None:
        detail = failed.get("message") or failed.get("reason") or "no reason given"
        return Verdict(done=True, state="failed", message=f"the Job failed: {detail}", node=node)
    return Verdict(
        done=True,
        state="failed" if message else None,
        exit_code=code,
        message=message,
        node=node,
        disrupted=disrupted,
    )


def _started_verdict(
    pod: Mapping[str, Any],
    node: str | None,
    flavor: Flavor | None,
    capacity: Capacity | Callable[[], Capacity | None] | None,
    engine_said: str | None,
) -> Verdict:
    """A Job neither ended nor suspended, by its pod: stuck (an image it cannot pull),
    held by a scheduler, waiting for room, or running."""
    for cs in _container_statuses(pod):
        waiting = (cs.get("state") or {}).get("waiting") or {}
        reason = waiting.get("reason")
        if reason in _CANNOT_START:
            image = cs.get("image") or ""
            what = _CANNOT_START[reason]
            if "image" in what and image:
                what += f" {image}"
            detail = waiting.get("message")
            return Verdict(
                done=True,
                stuck=True,
                state="failed",
                message=f"{what} ({reason}{': ' + detail if detail else ''})",
                node=node,
            )
    phase = (pod.get("status") or {}).get("phase")
    scheduled = next(
        (
            c
            for c in (pod.get("status") or {}).get("conditions") or []
            if c.get("type") == "PodScheduled"
        ),
        None,
    )
    if engine_holds(pod):
        engine = str((pod.get("spec") or {}).get("schedulerName"))
        return Verdict(waiting=engine_waiting(pod, engine, scheduled, said=engine_said))
    if (
        phase == "Pending"
        and scheduled is not None
        and scheduled.get("status") == "False"
        and scheduled.get("reason") == "Unschedulable"
    ):
        if callable(capacity):
            capacity = capacity()
        text = waiting_for(flavor, capacity) if flavor is not None else "waiting for a node"
        if capacity is None and scheduled.get("message"):
            text += f": {scheduled['message']}"
        return Verdict(waiting=text)
    return Verdict(running=phase == "Running", node=node)

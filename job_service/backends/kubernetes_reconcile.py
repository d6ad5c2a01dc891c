"""The Kubernetes backend's catching up at a start: what runs in the jobs' namespace that
no job of this nbjobs wants is stopped; what another nbjobs made is left alone."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from .kubernetes_mirror import job_finished, pod_ended
from .kubernetes_objects import (
    INSTANCE_LABEL,
    JOB_ID_LABEL,
    job_name_of,
    jobset_child,
)

if TYPE_CHECKING:
    from .kubernetes import KubernetesBackend

Obj = dict[str, Any]


def made_elsewhere(labels: dict[str, str], instance: str | None, wanted: Collection[str]) -> bool:
    """Whether an object with ``labels`` is another nbjobs's: it carries another
    instance's id, or none (made before instance ids) for a job this database does not
    run."""
    if instance is None:
        return False
    made_by = labels.get(INSTANCE_LABEL)
    return made_by != instance and not (made_by is None and labels.get(JOB_ID_LABEL) in wanted)


def _unwanted(obj: Obj, instance: str | None, wanted: Collection[str]) -> str | None:
    """The nbjobs job id of an object this nbjobs made for a job it no longer runs (ended,
    or unknown to its database); None for anything else."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    job_id = labels.get(JOB_ID_LABEL)
    if job_id is None or job_id in wanted or made_elsewhere(labels, instance, wanted):
        return None
    return job_id


async def reconcile(backend: KubernetesBackend, wanted: Collection[str]) -> None:
    """List the cluster, then stop Jobs (and bare pods) of jobs the database holds
    finished or does not know: nothing runs that nbjobs thinks has ended. Only this
    nbjobs's own (:data:`INSTANCE_LABEL`): another's jobs in the namespace (a second
    service with a database of its own) are left alone, and said once."""
    mirror, instance = backend.mirror, backend.instance
    others = sorted(
        name for name, obj in [*mirror.jobs.items(), *mirror.jobsets.items()]
        if made_elsewhere((obj.get("metadata") or {}).get("labels") or {}, instance, wanted)
    )  # fmt: skip
    if others:
        backend.log.warning(
            "%d Job(s) in namespace %s were made by another nbjobs (another database: "
            "a second hub, a staging copy) or by one from before instance ids: this "
            "service leaves them alone (%s%s); two nbjobs on one namespace share its "
            "quota and nodes",
            len(others),
            backend.namespace,
            ", ".join(others[:5]),
            ", ..." if len(others) > 5 else "",
        )
    for name, job in list(mirror.jobs.items()):
        job_id = _unwanted(job, instance, wanted)
        if job_id is None or job_finished(job):
            continue
        backend.log.warning(
            "Job %s/%s runs but its nbjobs job %s has ended or is unknown; deleting it",
            backend.namespace,
            name,
            job_id,
        )
        backend._cancelling.add(name)
        await backend.api.delete_job(name)
    for name, jobset in list(mirror.jobsets.items()):
        job_id = _unwanted(jobset, instance, wanted)
        if job_id is None or jobset_child(name) in backend._cancelling:
            continue
        backend.log.warning(
            "JobSet %s/%s is there but its nbjobs job %s has ended or is unknown; deleting it",
            backend.namespace,
            name,
            job_id,
        )
        backend._cancelling.add(jobset_child(name))
        await backend.api.delete_job(jobset_child(name))
    for pod_name, pod in list(mirror.pods.items()):
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if (
            _unwanted(pod, instance, wanted) is None
            or job_name_of(labels) in mirror.jobs
            or pod_ended(pod)
        ):
            continue
        backend.log.warning(
            "pod %s/%s has no Job and no active job; deleting it", backend.namespace, pod_name
        )
        await backend.api.delete_pod(pod_name)

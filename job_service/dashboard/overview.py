"""The admins' overview: GPUs per node and kind (total, held, busy), jobs per flavor,
the longest wait, recent failures and whether the backend works."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from nbjobs.models import JobState

from ..db import CHARGED_GPUS, JobRecord, JobSample, utcnow
from .models import (
    BackendHealth,
    Failure,
    FlavorRow,
    GpuCount,
    NodeRow,
    Overview,
    TypeRow,
    WaitingJob,
)

if TYPE_CHECKING:
    from ..context import Context

#: the states of a job that holds its GPUs (the record says starting until the job ends;
#: the runner's status file says when it runs)
STARTED = (JobState.STARTING.value, JobState.RUNNING.value)
#: how far back "recent failures" look, and how many are shown
FAILURES_SINCE = timedelta(hours=24)
FAILURES_SHOWN = 10


def _busy_per_job(ctx: Context) -> dict[str, tuple[str | None, float]]:
    """Each running job's node and busy GPU-equivalents from its latest sample."""
    with ctx.sessions() as db:
        # the newest sample of each running job: the highest id (rows are added in order)
        latest = (
            select(func.max(JobSample.id).label("id"))
            .join(JobRecord, JobRecord.id == JobSample.job_id)
            .where(JobRecord.state.in_(STARTED))
            .group_by(JobSample.job_id)
            .subquery()
        )
        rows = db.execute(
            select(JobRecord.id, JobRecord.node, JobSample.gpu_utilization_percent, CHARGED_GPUS)
            .select_from(JobSample)
            .join(latest, latest.c.id == JobSample.id)
            .join(JobRecord, JobRecord.id == JobSample.job_id)
        ).all()
    return {
        job: (node, (util or 0.0) / 100.0 * float(gpus or 0.0))
        for job, node, util, gpus in rows
        if util is not None
    }


def overview(ctx: Context) -> Overview:
    """The overview now (runs on a database thread)."""
    now = utcnow()
    backend = ctx.backend
    ok, detail = backend.health()
    with ctx.sessions() as db:
        active = db.execute(
            select(
                JobRecord.id,
                JobRecord.user,
                JobRecord.flavor,
                JobRecord.state,
                JobRecord.node,
                JobRecord.submitted_at,
                JobRecord.waiting_reason,
            ).where(JobRecord.state.in_([*STARTED, JobState.QUEUED.value]))
        ).all()
        failures = _recent_failures(db, now)
    nodes = _node_rows(ctx, active)
    types = _type_rows(nodes)
    queued = [a for a in active if a.state == JobState.QUEUED.value]
    flavors = _flavor_rows(ctx, active, queued, now)
    longest = _longest_wait(queued, now)
    busy_nodes = [n.busy for n in nodes if n.busy is not None]
    return Overview(
        generated_at=now,
        backend=BackendHealth(kind=ctx.config.backend.kind, ok=ok, detail=detail),
        gpus=GpuCount(
            total=sum(n.total for n in nodes),
            allocated=round(sum(n.allocated for n in nodes), 3),
            busy=round(sum(busy_nodes), 3) if busy_nodes else None,
        ),
        nodes=nodes,
        types=types,
        flavors=flavors,
        longest_wait=longest,
        recent_failures=failures,
        queues=backend.queues(),
        class_notices=ctx.classes.notices(),
    )


def _recent_failures(db: Session, now: datetime) -> list[Failure]:
    """The jobs that failed or ran out of time lately, newest first."""
    failed = (
        db.execute(
            select(JobRecord)
            .where(
                JobRecord.state.in_([JobState.FAILED.value, JobState.TIMED_OUT.value]),
                JobRecord.finished_at >= now - FAILURES_SINCE,
            )
            .order_by(JobRecord.finished_at.desc())
            .limit(FAILURES_SHOWN)
        )
        .scalars()
        .all()
    )
    return [
        Failure(
            id=r.id,
            user=r.user,
            name=r.name,
            flavor=r.flavor,
            state=r.state,
            message=r.message,
            finished_at=r.finished_at,
        )
        for r in failed
    ]


def _node_rows(ctx: Context, active: Sequence[Any]) -> list[NodeRow]:
    """Each node's GPUs: all, allocated, busy (from its jobs' latest readings), its jobs."""
    busy = _busy_per_job(ctx)
    inventory = ctx.backend.inventory()
    single = len({n.node for n in inventory}) == 1
    nodes = []
    for row in inventory:
        here = [
            job
            for job, state, node in ((a.id, a.state, a.node) for a in active)
            if state in STARTED and (node == row.node or (single and not node))
        ]
        said = [busy[j][1] for j in here if j in busy]
        nodes.append(
            NodeRow(
                node=row.node,
                gpu_type=row.gpu_type,
                resource=row.resource,
                drained=row.drained,
                drained_gpus=[  # in the order the backend lists the node's GPUs
                    g
                    for g in ctx.backend.gpu_ids(row.node) or []
                    if (row.node, g) in ctx.backend.drained_gpus
                ],
                total=row.total,
                allocated=round(row.allocated, 3),
                busy=round(min(sum(said), row.total), 3) if said else None,
                jobs=here,
            )
        )
    return nodes


def _type_rows(nodes: list[NodeRow]) -> list[TypeRow]:
    """The nodes summed per GPU type."""
    types: dict[str, TypeRow] = {}
    for n in nodes:
        t = types.setdefault(
            n.gpu_type, TypeRow(gpu_type=n.gpu_type, nodes=0, total=0, allocated=0)
        )
        t.nodes += 1
        t.total += n.total
        t.allocated = round(t.allocated + n.allocated, 3)
        if n.busy is not None:
            t.busy = round((t.busy or 0.0) + n.busy, 3)
    return list(types.values())


def _flavor_rows(
    ctx: Context, active: Sequence[Any], queued: Sequence[Any], now: datetime
) -> list[FlavorRow]:
    """Each flavor's running and queued jobs and its longest wait."""
    running = Counter(a.flavor for a in active if a.state in STARTED)
    oldest: dict[str, datetime] = {}
    for a in queued:
        if a.flavor not in oldest or a.submitted_at < oldest[a.flavor]:
            oldest[a.flavor] = a.submitted_at
    return [
        FlavorRow(
            name=f.name,
            display_name=f.label,
            running=running.get(f.name, 0),
            queued=sum(1 for a in queued if a.flavor == f.name),
            longest_wait_seconds=(now - oldest[f.name]).total_seconds()
            if f.name in oldest
            else None,
        )
        for f in ctx.config.flavors
    ]


def _longest_wait(queued: Sequence[Any], now: datetime) -> WaitingJob | None:
    """The job that has waited longest, and why it waits."""
    first = min(queued, key=lambda a: a.submitted_at, default=None)
    return (
        WaitingJob(
            id=first.id,
            user=first.user,
            flavor=first.flavor,
            waited_seconds=(now - first.submitted_at).total_seconds(),
            reason=first.waiting_reason,
        )
        if first is not None
        else None
    )

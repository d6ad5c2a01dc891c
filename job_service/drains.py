"""Node maintenance: admins drain a node (no new job starts there; running ones finish, or
are cancelled with a message when the admin asks; nothing is re-queued) and undrain it.
The drains are nbjobs' own state, kept in the database and handed to the backend, which
keeps new jobs off the node: on Kubernetes through the node affinity of the Jobs it
creates (the service needs no write access to nodes); on one machine by starting no GPU
job while it is drained.

Where the backend picks a job's GPUs itself (one machine: :meth:`Backend.gpu_ids`), an
admin may drain one GPU instead of the whole node: no new job gets that GPU, the others
go on. Such a drain is kept under the key ``node/gpu`` (no node's name holds a ``/``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from nbjobs.models import JobState, placed_on

from .db import DrainRecord, JobRecord, utcnow
from .errors import Caller, Conflict, Forbidden, NotFound

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from .context import Context

#: the longest reason an admin may give
MAX_REASON = 500
#: a job on these states holds its node
STARTED = (JobState.STARTING.value, JobState.RUNNING.value)


def drain_key(node: str, gpu: str | None = None) -> str:
    """Where a drain is kept: the node's name, or ``node/gpu`` for one of its GPUs."""
    return node if gpu is None else f"{node}/{gpu}"


def drained_nodes(ctx: Context) -> set[str]:
    """The drains in the database, by :func:`drain_key` (a database thread's work)."""
    with ctx.sessions() as db:
        return set(db.scalars(select(DrainRecord.node)).all())


async def apply(ctx: Context) -> None:
    """Hand the drains to the backend (at start, after each change): read on a database
    thread, handed over on the event loop, where the backend's state lives."""
    keys = await ctx.in_db(drained_nodes, ctx)
    gpus = {(node, gpu) for node, _, gpu in (k.partition("/") for k in keys if "/" in k)}
    ctx.backend.set_drained({k for k in keys if "/" not in k}, gpus)


def known_nodes(ctx: Context) -> list[str]:
    """The nodes the backend sees (those with GPUs of the flavors' kinds)."""
    return sorted({n.node for n in ctx.backend.inventory()})


def started_jobs(db: Session) -> Sequence[Any]:
    """The started jobs, oldest first (id, user, name, flavor, node, GPU count, GPUs):
    what a node's jobs and a drain's cancels are read from."""
    return db.execute(
        select(
            JobRecord.id,
            JobRecord.user,
            JobRecord.name,
            JobRecord.flavor,
            JobRecord.node,
            JobRecord.gpu_count,
            JobRecord.gpus,
        )
        .where(JobRecord.state.in_(STARTED))
        .order_by(JobRecord.started_at)
    ).all()


def placed(started: Sequence[Any], node: str, single: bool) -> list[Any]:
    """Of :func:`started_jobs`, those placed on ``node``; where the backend has one node
    (``single``) and records none (one machine), every one."""
    return [j for j in started if placed_on(j.node, node) or (single and not j.node)]


def drain_cancels(ctx: Context, on_node: Sequence[Any], gpu: str | None = None) -> list[str]:
    """Of a node's started jobs, the ids a drain with ``cancel_running`` cancels: on one
    machine (its drain is of the GPUs) those holding a GPU there, with ``gpu`` those
    holding that one; on a cluster's node every one."""
    gpus_only = ctx.config.backend.kind == "local"
    return [
        j.id
        for j in on_node
        if (j.gpu_count or not gpus_only) and (gpu is None or gpu in (j.gpus or []))
    ]


def jobs_on(ctx: Context, node: str, gpu: str | None = None) -> list[str]:
    """:func:`drain_cancels` of ``node`` (or its GPU ``gpu``) as the database has them now."""
    with ctx.sessions() as db:
        started = started_jobs(db)
    return drain_cancels(ctx, placed(started, node, known_nodes(ctx) == [node]), gpu)


def drain(
    ctx: Context, caller: Caller, node: str, reason: str, gpu: str | None = None
) -> DrainRecord:
    """Record the drain of ``node``, or of its GPU ``gpu`` (admins); :func:`apply` hands
    it to the backend."""
    _admin_only(caller)
    reason = reason.strip()
    if len(reason) > MAX_REASON:
        raise Conflict(f"the reason is {len(reason)} characters; say it in {MAX_REASON} or fewer")
    nodes = known_nodes(ctx)
    if node not in nodes:
        raise NotFound(
            f"no node {node!r} with GPUs here; the nodes are: {', '.join(nodes) or 'none'}"
        )
    if gpu is not None:
        _check_gpu(ctx, node, gpu)
    key = drain_key(node, gpu)
    with ctx.sessions() as db:
        record = db.get(DrainRecord, key)
        if record is None:
            record = DrainRecord(node=key)
            db.add(record)
        record.drained_by, record.drained_at, record.reason = caller.name, utcnow(), reason
        db.commit()
        db.refresh(record)
        db.expunge(record)
    what = f"GPU {gpu} of node {node}" if gpu is not None else f"node {node}"
    ctx.log.info("%s drained by %s (%s)", what, caller.name, reason or "no reason given")
    return record


def undrain(ctx: Context, caller: Caller, node: str, gpu: str | None = None) -> None:
    """Take the drain of ``node`` (or of its GPU ``gpu``) off (admins); queued jobs may
    start there again (once :func:`apply` hands the change to the backend)."""
    _admin_only(caller)
    what = f"GPU {gpu} of node {node!r}" if gpu is not None else f"node {node!r}"
    with ctx.sessions() as db:
        record = db.get(DrainRecord, drain_key(node, gpu))
        if record is None:
            raise NotFound(f"{what} is not drained")
        db.delete(record)
        db.commit()
    ctx.log.info("%s undrained by %s", what, caller.name)


def _check_gpu(ctx: Context, node: str, gpu: str) -> None:
    ids = ctx.backend.gpu_ids(node)
    if ids is None:
        raise Conflict(
            f"node {node!r} is drained as a whole here (the cluster's scheduler picks the "
            "GPUs on a node, not nbjobs); drain the node instead"
        )
    if gpu not in ids:
        raise NotFound(f"no GPU {gpu!r} on node {node!r}; its GPUs are: {', '.join(ids)}")


def _admin_only(caller: Caller) -> None:
    if not caller.admin:
        raise Forbidden("only nbjobs admins drain and undrain nodes")

"""Node maintenance: admins drain a node (no new job starts there; running ones finish, or
are cancelled with a message when the admin asks) and undrain it. The drains are nbjobs'
own state, kept in the database and handed to the backend, which keeps new jobs off the
node: on Kubernetes through the node affinity of the Jobs it creates (the service needs no
write access to nodes); on one machine by starting no GPU job while it is drained.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import select

from nbjobs.models import JobState, placed_on

from .db import DrainRecord, JobRecord, utcnow
from .errors import Caller, Conflict, Forbidden, NotFound

if TYPE_CHECKING:
    from .context import Context

#: the longest reason an admin may give
MAX_REASON = 500
#: a job on these states holds its node
STARTED = (JobState.STARTING.value, JobState.RUNNING.value)


def drained_nodes(ctx: Context) -> set[str]:
    """The nodes drained in the database (a database thread's work)."""
    with ctx.sessions() as db:
        return set(db.scalars(select(DrainRecord.node)).all())


async def apply(ctx: Context) -> None:
    """Hand the drains to the backend (at start, after each change): read on a database
    thread, handed over on the event loop, where the backend's state lives."""
    ctx.backend.set_drained(await ctx.in_db(drained_nodes, ctx))


def known_nodes(ctx: Context) -> list[str]:
    """The nodes the backend sees (those with GPUs of the flavors' kinds)."""
    return sorted({n.node for n in ctx.backend.inventory()})


def jobs_on(ctx: Context, node: str, *, gpus_only: bool) -> list[str]:
    """Ids of the started jobs placed on ``node``; where the backend has one node and
    records none (one machine), every started job that holds a GPU there."""
    single = known_nodes(ctx) == [node]
    with ctx.sessions() as db:
        rows = db.execute(
            select(JobRecord.id, JobRecord.node, JobRecord.gpu_count).where(
                JobRecord.state.in_(STARTED)
            )
        ).all()
    return [
        job
        for job, placed, gpus in rows
        if (placed_on(placed, node) or (single and not placed)) and (gpus or not gpus_only)
    ]


def drain(ctx: Context, caller: Caller, node: str, reason: str) -> DrainRecord:
    """Record the drain (admins); :func:`apply` hands it to the backend."""
    _admin_only(caller)
    reason = reason.strip()
    if len(reason) > MAX_REASON:
        raise Conflict(f"the reason is {len(reason)} characters; say it in {MAX_REASON} or fewer")
    nodes = known_nodes(ctx)
    if node not in nodes:
        raise NotFound(
            f"no node {node!r} with GPUs here; the nodes are: {', '.join(nodes) or 'none'}"
        )
    with ctx.sessions() as db:
        record = db.get(DrainRecord, node)
        if record is None:
            record = DrainRecord(node=node)
            db.add(record)
        record.drained_by, record.drained_at, record.reason = caller.name, utcnow(), reason
        db.commit()
        db.refresh(record)
        db.expunge(record)
    ctx.log.info("node %s drained by %s (%s)", node, caller.name, reason or "no reason given")
    return record


def undrain(ctx: Context, caller: Caller, node: str) -> None:
    """Take the drain off (admins); queued jobs may start there again (once :func:`apply`
    hands the change to the backend)."""
    _admin_only(caller)
    with ctx.sessions() as db:
        record = db.get(DrainRecord, node)
        if record is None:
            raise NotFound(f"node {node!r} is not drained")
        db.delete(record)
        db.commit()
    ctx.log.info("node %s undrained by %s", node, caller.name)


def _admin_only(caller: Caller) -> None:
    if not caller.admin:
        raise Forbidden("only nbjobs admins drain and undrain nodes")

"""The admins' queue: every queued job in the order the dispatcher would start it, with
why it waits, and moves (to the front, up, down, to the back) made as priority changes
that record who made them.

Moves change a job's priority, the queue's first key (fair share orders jobs of equal
priority): up sets it one above the job ahead of it, down one below the job behind it,
front one above the highest queued, back one below the lowest, within -100..100.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal

from sqlalchemy import select

from nbjobs.models import JobState

from ..db import JobRecord, utcnow
from ..errors import Caller, Conflict, Forbidden, NotFound
from ..queue import work_out_positions
from .models import QueuedJob

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from ..context import Context

Move = Literal["front", "up", "down", "back"]
#: the priorities the API allows (nbjobs.models.UpdateRequest)
LOWEST, HIGHEST = -100, 100


def _queued(db: Session) -> list[JobRecord]:
    """Queued records in dispatch order (each with its place)."""
    places = work_out_positions(db)
    records = db.scalars(select(JobRecord).where(JobRecord.state == JobState.QUEUED.value)).all()
    return sorted(records, key=lambda r: places.get(r.id, len(places) + 1))


def _view(records: list[JobRecord], pending: Sequence[JobRecord] = ()) -> list[QueuedJob]:
    now = utcnow()
    places: list[int | None] = [*range(1, len(records) + 1), *[None] * len(pending)]
    return [
        QueuedJob(
            id=r.id,
            name=r.name,
            user=r.user,
            flavor=r.flavor,
            place=place,
            priority=r.priority,
            submitted_at=r.submitted_at,
            waited_seconds=(now - r.submitted_at).total_seconds(),
            reason=r.waiting_reason,
            moved_by=r.priority_set_by,
            moved_at=r.priority_set_at,
        )
        for place, r in zip(places, [*records, *pending], strict=True)
    ]


def queue_view(ctx: Context, caller: Caller) -> list[QueuedJob]:
    """Every queued job, first to start first (admins)."""
    _admin_only(caller)
    with ctx.sessions() as db:
        return _view(_queued(db), _pending(db))


def _pending(db: Session) -> list[JobRecord]:
    """Jobs waiting for approval, oldest first (after the queue: none of them may start)."""
    pending = select(JobRecord).where(JobRecord.state == JobState.PENDING_APPROVAL.value)
    return list(db.scalars(pending.order_by(JobRecord.seq)).all())


def move(
    ctx: Context, caller: Caller, job_id: str, to: Move, wake: Callable[[], None]
) -> list[QueuedJob]:
    """Move a queued job; the queue after the move."""
    _admin_only(caller)
    with ctx.sessions() as db:
        records = _queued(db)
        index = next((i for i, r in enumerate(records) if r.id == job_id), None)
        if index is None:
            found = db.get(JobRecord, job_id)
            if found is None:
                raise NotFound(f"no job {job_id!r}")
            if found.state == JobState.PENDING_APPROVAL.value:
                raise Conflict(f"job {job_id} waits for approval; approve it first, then move it")
            raise Conflict(f"job {job_id} is not queued; only a queued job can move")
        record = records[index]
        if to == "front":
            wanted = max(r.priority for r in records) + (1 if index > 0 else 0)
        elif to == "back":
            wanted = min(r.priority for r in records) - (1 if index < len(records) - 1 else 0)
        elif to == "up":
            wanted = records[index - 1].priority + 1 if index > 0 else record.priority
        else:
            last = index == len(records) - 1
            wanted = record.priority if last else records[index + 1].priority - 1
        if not LOWEST <= wanted <= HIGHEST:
            raise Conflict(
                f"job {job_id} cannot move {to}: it would need priority {wanted}, and "
                f"priorities go from {LOWEST} to {HIGHEST}; lower the others first"
            )
        if wanted != record.priority:
            record.priority = wanted
            record.priority_set_by, record.priority_set_at = caller.name, utcnow()
            db.commit()
            ctx.log.info(
                "job %s: moved %s in the queue by %s (priority %d)", job_id, to, caller.name, wanted
            )
            wake()
        return _view(_queued(db), _pending(db))


def _admin_only(caller: Caller) -> None:
    if not caller.admin:
        raise Forbidden("the queue of everyone's jobs is for nbjobs admins")

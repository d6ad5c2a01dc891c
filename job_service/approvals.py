"""Approvals: jobs on a flavor with ``approval`` in nbjobs.yaml wait as ``pending_approval``
until an nbjobs admin, or a teacher of a class the job's owner is in, approves them
(queued) or rejects them with a reason (cancelled, the reason recorded and shown to the
owner). A request nobody answers within the flavor's ``expires_after`` is cancelled,
saying so. Every decision is recorded in the job's message and the service's log.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING

from sqlalchemy import select, update

from nbjobs.config import Flavor
from nbjobs.models import Job, JobState

from .db import JobRecord, rowcount, utcnow
from .errors import Caller, Conflict, NotFound
from .periodic import InRounds, Periodic

if TYPE_CHECKING:
    from .classes import ClassRegistry
    from .context import Context
    from .jobview import JobView

PENDING = JobState.PENDING_APPROVAL.value
#: the longest reason a rejection may give
MAX_REASON = 500
#: how often requests are checked for expiry
EXPIRY_ROUND = 60.0


def needs_approval(flavor: Flavor, caller: Caller) -> bool:
    """Whether ``caller``'s job on ``flavor`` waits for approval (admins' never do)."""
    policy = flavor.approval
    if policy is None or caller.admin:
        return False
    return not policy.groups or bool(set(policy.groups) & set(caller.groups))


def waiting_for_approval(classes: ClassRegistry, caller: Caller, flavor: Flavor) -> str:
    """The sentence a pending job shows its owner."""
    teacher = any(c.teachers for c in classes.of_student(caller.name))
    who = "an admin or your teacher" if teacher else "an admin"
    hours = (flavor.approval.expires_after or 0) / 3600 if flavor.approval else 0
    within = f"{hours / 24:g} days" if hours >= 48 else f"{hours:g} h"
    return (
        f"waiting for approval: {who} must approve jobs on {flavor.label} (the request "
        f"expires in {within})"
    )


def may_decide(classes: ClassRegistry, caller: Caller, owner: str) -> bool:
    """Admins decide every request; a teacher those of their classes' students."""
    return caller.admin or classes.teaches(caller.name, owner)


class Decisions:
    """Approving and rejecting requests: the database work on the service's database
    threads (call these there), then the queue told (``changed``, ``wake``) and the job
    as it is now (``get``)."""

    def __init__(
        self,
        ctx: Context,
        view: JobView,
        changed: Callable[[], None],
        wake: Callable[[], None],
        get: Callable[[Caller, str], Job],
    ) -> None:
        self.ctx, self.view = ctx, view
        self._changed, self._wake, self._get = changed, wake, get

    def pending_for(self, caller: Caller) -> list[Job]:
        """The requests ``caller`` may decide, oldest first."""
        classes = self.ctx.classes
        with self.ctx.sessions() as db:
            records = db.scalars(
                select(JobRecord).where(JobRecord.state == PENDING).order_by(JobRecord.seq)
            ).all()
            return [self.view.model(db, r) for r in records if may_decide(classes, caller, r.user)]

    def approve(self, caller: Caller, job_id: str) -> Job:
        """Queue a pending job (it then waits its turn like any other)."""
        record = self._decided(caller, job_id)
        self._settle(job_id, state=JobState.QUEUED.value, message=f"approved by {caller.name}")
        self._changed()
        self.ctx.log.info("job %s of %s: approved by %s", job_id, record.user, caller.name)
        self._wake()
        return self._get(caller, job_id)

    def reject(self, caller: Caller, job_id: str, reason: str) -> Job:
        """Cancel a pending job with the reason (its owner sees it)."""
        reason = reason.strip()
        if not reason:
            raise Conflict("say why the job is rejected: its owner reads it")
        record = self._decided(caller, job_id)
        self._settle(
            job_id,
            state=JobState.CANCELLED.value,
            finished_at=utcnow(),
            message=f"rejected by {caller.name}: {reason}",
        )
        self.ctx.log.info(
            "job %s of %s: rejected by %s (%s)", job_id, record.user, caller.name, reason
        )
        return self._get(caller, job_id)

    def _decided(self, caller: Caller, job_id: str) -> JobRecord:
        classes = self.ctx.classes
        with self.ctx.sessions() as db:
            record = db.get(JobRecord, job_id)
            if record is None or not (
                may_decide(classes, caller, record.user) or record.user == caller.name
            ):
                raise NotFound(f"no job {job_id!r} you may approve")
            if not may_decide(classes, caller, record.user):
                raise NotFound(
                    f"you may not approve your own job {job_id}; an admin or your teacher does"
                )
            if record.state != PENDING:
                raise Conflict(f"job {job_id} is {record.state}, not waiting for approval")
            db.expunge(record)
            return record

    def _settle(self, job_id: str, **values: object) -> None:
        """Record a decision, if the job still waits for one (a second decision, or a
        cancel by its owner meanwhile, wins nothing)."""
        with self.ctx.sessions() as db:
            done = rowcount(
                db,
                update(JobRecord)
                .where(JobRecord.id == job_id, JobRecord.state == PENDING)
                .values(waiting_reason=None, **values),
            )
            db.commit()
        if not done:
            raise Conflict(f"job {job_id} was decided or cancelled meanwhile")


def expire(ctx: Context) -> int:
    """Cancel the requests older than their flavor's ``expires_after``; how many."""
    now = utcnow()
    expired = 0
    with ctx.sessions() as db:
        for flavor in ctx.config.flavors:
            if flavor.approval is None or flavor.approval.expires_after is None:
                continue
            after = flavor.approval.expires_after
            expired += rowcount(
                db,
                update(JobRecord)
                .where(
                    JobRecord.state == PENDING,
                    JobRecord.flavor == flavor.name,
                    JobRecord.submitted_at < now - timedelta(seconds=after),
                )
                .values(
                    state=JobState.CANCELLED.value,
                    waiting_reason=None,
                    finished_at=now,
                    message=(
                        f"nobody approved it within {_span(after)}; the request expired. "
                        "Submit it again, or ask an admin or your teacher first"
                    ),
                ),
            )
        db.commit()
    if expired:
        ctx.log.info("%d approval request(s) expired", expired)
    return expired


def _span(seconds: float) -> str:
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:g} days"
    if seconds >= 3600:
        return f"{seconds / 3600:g} h"
    return f"{seconds / 60:g} min"


class ApprovalExpiry(InRounds):
    """Checks pending requests for expiry every :data:`EXPIRY_ROUND` seconds."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._rounds = Periodic(
            lambda: ctx.in_db(expire, ctx),
            lambda: EXPIRY_ROUND,
            what="expiring approval requests",
            log=lambda: ctx.log,
        )

    def wanted(self) -> bool:
        return any(f.approval for f in self.ctx.config.flavors)

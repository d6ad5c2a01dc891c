"""Changing a job: cancel, re-run, forget (remove from the list), move in the queue.

A cancel always wins over a start in flight; a re-run of another person's job is
theirs only when an admin says so; a forgotten job's GPU time stays counted and its
credits charged.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import select, update

from nbjobs.models import Job, JobState, RerunChanges, SubmitRequest, UpdateRequest
from nbjobs.storage import remove_job_dir

from . import metering
from .db import ACTIVE_VALUES, JobRecord, rowcount, utcnow
from .errors import Caller, Conflict, Forbidden
from .reclaim import leave_stop_reason
from .telemetry import delete_samples

if TYPE_CHECKING:
    from .context import Context
    from .credits import Credits
    from .dispatch import Dispatcher
    from .jobview import JobView
    from .listing import Listing
    from .queue import QueuePositions
    from .submit import Submissions


class JobChanges:
    """What a job's owner (or a teacher or admin, as each may) changes after its submit."""

    def __init__(
        self,
        ctx: Context,
        *,
        listing: Listing,
        submissions: Submissions,
        view: JobView,
        positions: QueuePositions,
        dispatcher: Dispatcher,
        credits: Credits,
    ) -> None:
        self.ctx = ctx
        self.listing = listing
        self.submissions = submissions
        self.view = view
        self.positions = positions
        self.dispatcher = dispatcher
        self.credits = credits

    async def cancel(self, caller: Caller, job_id: str, why: str | None = None) -> Job:
        """Cancel a queued job at once; ask a running one to stop (it keeps its output).

        A cancel always wins: one that arrives while the backend is starting the job
        is seen when the start is recorded, and what was started is stopped then.
        """
        job, ref, job_dir = await self.ctx.in_db(self._ask_cancel, caller, job_id, why)
        if job is not None:
            self.dispatcher.wake()
            return job
        # the runner's banner and status then say who stopped it, not "SIGTERM"
        said = f"cancelled by {caller.name}" + (f": {why}" if why else "")
        try:
            await asyncio.to_thread(leave_stop_reason, job_dir, said)
        except OSError as exc:
            self.ctx.log.warning("job %s: the stop reason not left for its runner: %s", job_id, exc)
        launch = self.dispatcher.launches.get(job_id)
        if launch is not None:
            # being started: the dispatcher stops it as soon as the start is recorded
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.shield(launch)
        elif ref:
            await self.ctx.backend.cancel(ref)
        follower = self.dispatcher.follower.task_of(job_id)
        if follower is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(follower)
        return await self.ctx.in_db(self.listing.get, caller, job_id)

    def _ask_cancel(
        self, caller: Caller, job_id: str, why: str | None = None
    ) -> tuple[Job | None, str | None, str]:
        """Record the cancel: a queued job's at once (the job, returned); a started one's
        as asked (its backend handle, if it has one yet, and its folder)."""
        with self.ctx.sessions() as db:
            record = self.listing.visible(caller, db.get(JobRecord, job_id), job_id)
            state = JobState(record.state)
            if state.final:
                raise Conflict(f"job {job_id} already ended ({state.value}); nothing to cancel")
            # Each change only if the job is still as it was read: the dispatcher may
            # have claimed it meanwhile (then the cancel is asked of the started job).
            cancelled = rowcount(
                db,
                update(JobRecord)
                .where(
                    JobRecord.id == job_id,
                    JobRecord.state.in_([JobState.QUEUED.value, JobState.PENDING_APPROVAL.value]),
                )
                .values(
                    state=JobState.CANCELLED.value,
                    finished_at=utcnow(),
                    message=f"cancelled by {caller.name}{': ' + why if why else ''} before it "
                    "started",
                    waiting_reason=None,
                ),
            )
            if not cancelled:
                asked = rowcount(
                    db,
                    update(JobRecord)
                    .where(JobRecord.id == job_id, JobRecord.state.in_(ACTIVE_VALUES))
                    .values(
                        cancel_requested=1,
                        message=f"cancelled by {caller.name}{': ' + why if why else ''}; the "
                        "output keeps the cells that ran",
                    ),
                )
                if not asked:
                    db.rollback()
                    raise Conflict(f"job {job_id} ended meanwhile; nothing to cancel")
            ref = db.scalar(select(JobRecord.backend_ref).where(JobRecord.id == job_id))
            db.commit()
            if cancelled:
                self.positions.changed()
                db.expire_all()
                record = self.listing.visible(caller, db.get(JobRecord, job_id), job_id)
                return self.view.model(db, record), None, record.job_dir
            return None, ref, record.job_dir

    async def rerun(
        self,
        caller: Caller,
        job_id: str,
        *,
        as_owner: bool = False,
        changes: RerunChanges | None = None,
    ) -> Job:
        """Queue the same notebook (its current version), flavor and parameters again.

        Another user's job (an admin's re-run) is never re-run as its owner silently: the
        new job would be theirs (their folder, quota and GPU-hours), so the admin says so
        with ``as_owner``; without it the re-run is refused, saying how.
        """
        request, owner = await self.ctx.in_db(self._rerun_request, caller, job_id)
        if changes is not None:
            # checked like a new submission (the flavor the caller's, the parameters valid)
            request = request.model_copy(update=changes.model_dump(exclude_none=True))
        as_ = caller
        if owner.name != caller.name:
            if not as_owner:
                raise Conflict(
                    f"job {job_id} is {owner.name}'s: a re-run would be {owner.name}'s too (their "
                    "folder, quota and GPU-hours). To do that on their behalf, re-run it as its "
                    f"owner (POST jobs/{job_id}/rerun?as=owner; `nbjobs rerun {job_id} "
                    "--as-owner`); to run it yourself, copy the notebook to your folder"
                )
            as_ = owner
            self.ctx.log.info(
                "job %s: re-run by %s on behalf of %s", job_id, caller.name, owner.name
            )
        if not caller.may_submit:
            as_ = caller  # refused in submit, with the reason
        return await self.submissions.submit(as_, request, rerun_of=job_id)

    def _rerun_request(self, caller: Caller, job_id: str) -> tuple[SubmitRequest, Caller]:
        with self.ctx.sessions() as db:
            record = self.listing.visible(caller, db.get(JobRecord, job_id), job_id, own=True)
            if not JobState(record.state).final:
                raise Conflict(f"job {job_id} is still {record.state}; cancel it first or wait")
            request = SubmitRequest(
                path=record.path,
                flavor=record.flavor,
                parameters=record.parameters,
                priority=record.priority if caller.admin else None,
                name=record.name,
                kernel=record.kernel,
                command=record.command,
                outputs=(
                    "folder"
                    if Path(record.output_file).parent != Path(record.source_file).parent
                    else "beside"
                ),
                html=bool(record.html),
            )
            return request, Caller(record.user, frozenset(record.groups), admin=False)

    def forget(self, caller: Caller, job_id: str) -> None:
        """Remove a finished job from the list, with its folder (the copy of the notebook
        it ran, its status and log); its output notebook beside the source stays."""
        with self.ctx.sessions() as db:
            record = self.listing.visible(caller, db.get(JobRecord, job_id), job_id, own=True)
            if not JobState(record.state).final:
                raise Conflict(f"job {job_id} is still {record.state}; cancel it first")
            job_dir = Path(record.job_dir)
            delete_samples(db, job_id)
            self.credits.charge(db, record)  # before its record goes, if not yet
            metering.retire(db, record)  # its GPU time stays counted
            db.delete(record)
            db.commit()
        try:
            remove_job_dir(job_dir)  # walked without following a link the user left there
        except (OSError, ValueError) as exc:  # a record that names no job folder of ours
            self.ctx.log.warning("job %s: its folder %s was not removed: %s", job_id, job_dir, exc)

    def update(self, caller: Caller, job_id: str, request: UpdateRequest) -> Job:
        """Admins: change a queued job's priority (bump it up the queue)."""
        if not caller.admin:
            raise Forbidden("only admins may change a job's priority")
        with self.ctx.sessions() as db:
            record = self.listing.visible(caller, db.get(JobRecord, job_id), job_id)
            if record.state != JobState.QUEUED.value:
                raise Conflict(f"job {job_id} is {record.state}; only a queued job can move")
            record.priority = request.priority
            record.priority_set_by, record.priority_set_at = caller.name, utcnow()
            db.commit()
            self.ctx.log.info(
                "job %s: priority %d, set by %s", job_id, request.priority, caller.name
            )
            self.dispatcher.wake()
            return self.view.model(db, record)

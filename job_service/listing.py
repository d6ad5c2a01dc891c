"""Reading jobs: which a caller may see, one job, a page of the list, a log.

Whose jobs a caller sees and what a search matches are :mod:`.joblist`'s rules; this
module applies them to the database, leaves out a damaged record (logged) instead of
failing a whole list, and opens a log without following a link.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nbjobs.job_runner import rank_file
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from nbjobs.config import nodes_words
from nbjobs.models import Job, JobList, JobState
from nbjobs.storage import FilesChanged, open_file_at, opened_job_dir

from . import joblist
from .audit import note_reading
from .db import JobRecord
from .errors import Caller, Conflict, DamagedRecord, Forbidden, Invalid, NotFound

if TYPE_CHECKING:
    from .context import Context
    from .jobview import JobView
    from .queue import QueuePositions


class Listing:
    """Jobs as a caller may read them."""

    def __init__(self, ctx: Context, view: JobView, positions: QueuePositions) -> None:
        self.ctx = ctx
        self.view = view
        self.positions = positions

    def visible(
        self, caller: Caller, record: JobRecord | None, job_id: str, *, own: bool = False
    ) -> JobRecord:
        """The record if the caller may see it (``own``: only its owner or an admin; the
        owner's teacher, who sees it, is told so)."""
        if record is not None and joblist.may_see(caller, self.ctx.classes, record.user):
            if not own or record.user == caller.name or caller.admin:
                return record
            # the owner's teacher: sees it, is told what only its owner does
            raise Forbidden(
                f"job {job_id} belongs to {record.user}: only its owner (or an admin) does that"
            )
        raise NotFound(f"no job {job_id!r} of yours; `nbjobs list` shows your jobs")

    def get(self, caller: Caller, job_id: str) -> Job:
        """One job, with its live progress."""
        with self.ctx.sessions() as db:
            record = self.visible(caller, db.get(JobRecord, job_id), job_id)
            return self.view.model(db, record)

    def list_jobs(
        self,
        caller: Caller,
        *,
        state: str | None = None,
        flavor: str | None = None,
        user: str | None = None,
        class_name: str | None = None,
        q: str | None = None,
        scope: str | None = None,
        before: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> JobList:
        """The caller's jobs, newest first, one page.

        Whose jobs (``scope``, ``user``, ``class_name``), what ``q`` matches and where
        a page starts (``before``, a job id) are :mod:`.joblist`'s rules. ``total``
        counts every job the filters match, whichever the page; ``more`` says
        whether older ones follow this page.
        """
        states = [s for s in (state or "").split(",") if s]
        unknown = [s for s in states if s not in {j.value for j in JobState}]
        if unknown:
            raise Invalid(
                f"unknown state {unknown[0]!r}; states are: {', '.join(j.value for j in JobState)}"
            )
        if not 1 <= limit <= 500:
            raise Invalid("limit must be between 1 and 500")
        if offset < 0:
            raise Invalid("offset must be 0 or more")
        query = select(JobRecord)
        owners = joblist.owner_condition(
            caller, self.ctx.classes, scope=scope, user=user, class_name=class_name
        )
        for condition in (owners, joblist.search_condition(q)):
            if condition is not None:
                query = query.where(condition)
        if flavor:
            query = query.where(JobRecord.flavor == flavor)
        with self.ctx.sessions() as db:
            if states:
                if {JobState.STARTING.value, JobState.RUNNING.value} & set(states):
                    self._note_running(db)
                query = query.where(self._state_filter(db, set(states)))
            total = db.scalar(select(func.count()).select_from(query.subquery())) or 0
            if before is not None:
                query = query.where(joblist.before_condition(db, caller, self.ctx.classes, before))
            newest_first = query.order_by(JobRecord.seq.desc())
            # The page and one job past it, which says that more follow: a query less
            # per page (a list during a burst of submits waits for each one's turn).
            page = newest_first.limit(limit + 1).offset(offset)
            records = self.readable_records(db, page, "a job list")
            more = len(records) > limit
            if more:
                del records[limit:]
            else:  # a short page, or one a damaged record left out shortened
                beyond = newest_first.with_only_columns(JobRecord.id).offset(offset + limit)
                more = db.scalars(beyond.limit(1)).first() is not None
            # placing the queue costs a query: only when this page shows a queued job
            queued_here = any(r.state == JobState.QUEUED.value for r in records)
            positions: dict[str, int] = {}
            if queued_here:
                try:
                    positions = self.positions.get(db)
                except (ValueError, TypeError) as exc:  # a damaged queued record
                    self.ctx.log.warning("queue positions left out of a job list: %s", exc)
            jobs = []
            for record in records:
                try:
                    jobs.append(self.view.model(db, record, positions))
                except DamagedRecord as exc:
                    self.ctx.log.warning("%s; left out of a job list", exc.message)
        # A damaged record still counts in ``total``: it is there, only not shown.
        return JobList(jobs=jobs, total=total, limit=limit, offset=offset, more=more)

    def readable_records(self, db: Session, query: Any, where: str) -> list[JobRecord]:
        """The records ``query`` selects, less any the database cannot give back (logged).

        One record whose stored JSON or time cannot be read fails the whole query; then
        the records are read one by one and only the damaged ones are left out.
        """
        try:
            return list(db.scalars(query).all())
        except (ValueError, TypeError):
            db.expunge_all()  # what it loaded before the damaged record may be half-made
        records = []
        for job_id in db.scalars(query.with_only_columns(JobRecord.id)).all():
            one = select(JobRecord).where(JobRecord.id == job_id)
            try:
                records.append(db.scalars(one.execution_options(populate_existing=True)).one())
            except (ValueError, TypeError) as exc:
                message = DamagedRecord(job_id, str(exc)).message
                self.ctx.log.warning("%s; left out of %s", message, where)
        return records

    def _state_filter(self, db: Session, states: set[str]) -> Any:
        """The SQL condition for "the job is shown in one of ``states``".

        A job handed to a cluster that has not placed it yet is recorded
        ``starting`` but shown ``queued`` (with the cluster's reason): the filter
        follows what the user sees, so ``state=queued`` lists it and
        ``state=starting`` does not.
        """
        condition = JobRecord.state.in_(states)
        queued, starting = JobState.QUEUED.value, JobState.STARTING.value
        if (queued in states) == (starting in states):
            return condition
        started = db.execute(
            select(JobRecord.id, JobRecord.backend_ref).where(
                JobRecord.state == starting, JobRecord.backend_ref.is_not(None)
            )
        ).all()
        held = [
            job_id
            for job_id, ref in started
            if ref and (seen := self.ctx.backend.seen(ref)) is not None and seen.waiting
        ]
        if not held:
            return condition
        if queued in states:
            return condition | JobRecord.id.in_(held)
        return condition & JobRecord.id.not_in(held)

    def _note_running(self, db: Session) -> None:
        """Record as ``running`` the started jobs whose runner says so (its status file).

        A job is shown running from its status file; recording it too lets a list
        filtered by state (``starting`` or ``running``) match what it shows.
        """
        starting = db.execute(
            select(JobRecord.id, JobRecord.job_dir).where(
                JobRecord.state == JobState.STARTING.value
            )
        ).all()
        running = []
        for job_id, job_dir in starting:
            live = self.ctx.runners.latest(job_id, job_dir)
            if live is not None and live.state == JobState.RUNNING.value:
                running.append(job_id)
        if running:
            # only if still starting: a job that ended meanwhile keeps its final state
            db.execute(
                update(JobRecord)
                .where(JobRecord.id.in_(running), JobRecord.state == JobState.STARTING.value)
                .values(state=JobState.RUNNING.value)
            )
            db.commit()

    def open_log(self, caller: Caller, job_id: str, note: bool = True, rank: int = 0) -> int | None:
        """The job's log, opened for reading (the caller closes it); None while there
        is none yet (a queued job). ``rank``: the log of that rank of a multi-node job
        (rank 0's is the job's log).

        Nothing is followed through a link: when the job's folder, a folder above it or
        the log itself has become a link (or a pipe, a file where a folder was), this is
        a :class:`Conflict` that says so, never the linked file's content.

        ``note``: record a reading of another person's log on the audit list (a log
        being followed is opened again every quarter second: only its first opening is).
        """
        with self.ctx.sessions() as db:
            record = self.visible(caller, db.get(JobRecord, job_id), job_id)
            job_dir = Path(record.job_dir)
            nodes = record.nodes or 1
            if rank >= nodes:
                raise Invalid(
                    f"job {job_id} runs on {nodes_words(nodes)}: its ranks are 0"
                    + (f" to {nodes - 1}" if nodes > 1 else "")
                    + f", not {rank}"
                )
            if note:
                # a teacher's or an admin's reading of someone's log is on the audit list
                note_reading(db, caller.name, record.user, job_id, "log")
                db.commit()
        name = rank_file(Path("log.txt"), rank).name
        try:
            with opened_job_dir(job_dir) as folder:
                return open_file_at(folder, name, os.O_RDONLY)
        except FileNotFoundError:
            return None
        except FilesChanged as exc:
            kind = "file" if exc.filename == name else "folder"
            what = exc.strerror or ""
            if "link" in what:
                what = f"a link, not a {kind}"
            raise Conflict(
                f"the files of job {job_id} were changed: {exc.filename} is {what}; nbjobs "
                "reads no log through a link. Remove the link; re-run the job for a new log"
            ) from None

    def is_final(self, job_id: str) -> bool:
        with self.ctx.sessions() as db:
            record = db.get(JobRecord, job_id)
            return record is None or JobState(record.state).final

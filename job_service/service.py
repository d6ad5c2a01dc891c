"""The job service's core: who may run what, when; the queue; what happened.

Transport-free: the tornado handlers (and the server extension, in
single-user mode) call these methods with a :class:`Caller`. Errors a caller
can fix are :class:`ServiceError` with an HTTP status and a sentence.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import heapq
import json
import logging
import os
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nbjobs.job_runner import (
    STATE_FOR_EXIT_CODE,
    BadInput,
    ExitCode,
    RunStatus,
    StatusFileError,
    parse_notebook,
    parse_status,
)
from pydantic import ValidationError
from sqlalchemy import Text, cast, event, func, select, update
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.orm import Session, sessionmaker

from nbjobs.config import Flavor, NbjobsConfig, Quota
from nbjobs.models import (
    ACTIVE_STATES,
    FlavorInfo,
    Job,
    JobError,
    JobList,
    JobState,
    Progress,
    SubmitRequest,
    UpdateRequest,
    Usage,
    UsageRow,
)
from nbjobs.storage import (
    FilesChanged,
    NotebookTooLarge,
    PathRefused,
    job_folder,
    make_job_dir,
    open_file_at,
    opened_job_dir,
    output_path_for,
    read_file_at,
    read_notebook,
    relative_to_user,
    remove_job_dir,
    user_folder,
)

from .backends import Backend, LaunchSpec, Outcome
from .db import JobRecord
from .lease import DispatcherLease

if TYPE_CHECKING:
    from .classes import ClassRegistry

PERIODS = {"day": timedelta(days=1), "week": timedelta(weeks=1), "month": timedelta(days=30)}


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


@dataclass(frozen=True)
class Caller:
    """Who is asking: a user name, their groups, whether they administer nbjobs."""

    name: str
    groups: frozenset[str] = field(default_factory=frozenset)
    admin: bool = False
    #: False when the hub requires custom:nbjobs:submit and this caller lacks it
    may_submit: bool = True
    #: may provision classes (custom:nbjobs:teach, or nbjobs.yaml's teachers)
    teacher: bool = False


class ServiceError(Exception):
    """A request the service refuses; ``status`` is the HTTP status, the text says what to do."""

    status = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Invalid(ServiceError):
    status = 400


class Forbidden(ServiceError):
    status = 403


class NotFound(ServiceError):
    status = 404


class Conflict(ServiceError):
    status = 409


class TooLarge(ServiceError):
    status = 413


class OverQuota(ServiceError):
    status = 429


class InsufficientStorage(ServiceError):
    status = 507


class StorageFailed(ServiceError):
    """Writing in the user's folder failed for a reason the user cannot fix (EIO)."""

    status = 500


#: a status file bigger than this is not the runner's (it writes a few KiB)
STATUS_FILE_LIMIT = 8 * 1024**2


class JobService:
    """Queue, quotas and records over one backend."""

    def __init__(
        self,
        config: NbjobsConfig,
        backend: Backend,
        sessions: sessionmaker[Session],
        log: logging.Logger | None = None,
        folder_for: Callable[[str], Path] | None = None,
        classes: ClassRegistry | None = None,
        time_limit_grace: float = 60.0,
        lease: DispatcherLease | None = None,
    ) -> None:
        from .classes import ClassRegistry

        self.config = config
        #: classes from nbjobs.yaml and, in a hub, teachers' groups
        self.classes = classes or ClassRegistry(config, log=log)
        #: a user's folder; by default from nbjobs.yaml's storage (single-user: the server's root)
        self.folder_for = folder_for or (lambda name: user_folder(self.config.storage, name))
        self.backend = backend
        self.sessions = sessions
        self.log = log or logging.getLogger("nbjobs.job_service")
        #: seconds past a job's time limit before the service stops a runner that did not
        #: stop itself (the backstop; a backend that enforces limits itself needs none)
        self.time_limit_grace = time_limit_grace
        self._wake = asyncio.Event()
        #: bumped by every flush that can move the queue (see _note_queue_changes), so
        #: the queue positions are worked out once per change, not once per page view
        self._queue_version = 0
        self._positions_cache: tuple[int, dict[str, int]] | None = None
        event.listen(sessions, "after_flush", self._note_queue_changes)
        self._followers: dict[str, asyncio.Task[None]] = {}
        self._loop_task: asyncio.Task[None] | None = None
        self._seq = 0
        self._stopping = False
        #: one dispatcher per database: taken at start, given back at stop
        self.lease = lease or DispatcherLease(sessions, log=self.log)
        #: called when another service took the lease over (the app stops then)
        self.on_lease_lost: Callable[[], None] | None = None

    # -- life ------------------------------------------------------------------

    async def start(self, *, standby: bool = True) -> None:
        """Take the database's dispatcher lease, recover jobs a previous run left, then
        start scheduling.

        While another service holds the lease this waits as a standby (``standby``)
        or raises :class:`~.lease.LeaseHeld` saying who holds it.
        """
        await self.lease.take(wait=standby)
        self.lease.keep(self._lease_lost)
        with self.sessions() as db:
            self._seq = db.scalar(select(func.max(JobRecord.seq))) or 0
        await self._recover()
        self._loop_task = asyncio.ensure_future(self._schedule_loop())

    async def stop(self) -> None:
        """Stop scheduling; running jobs go on (a restart adopts them)."""
        self._stopping = True
        tasks = [t for t in [self._loop_task, *self._followers.values()] if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.backend.shutdown()
        await self.lease.aclose()

    def _lease_lost(self) -> None:
        """Another service dispatches from this database now: stop scheduling at once."""
        self._stopping = True
        if self._loop_task is not None:
            self._loop_task.cancel()
        if self.on_lease_lost is not None:
            self.on_lease_lost()

    async def _recover(self) -> None:
        with self.sessions() as db:
            wanted = db.scalars(
                select(JobRecord.id).where(
                    JobRecord.state.in_([JobState.QUEUED.value, *(s.value for s in ACTIVE_STATES)])
                )
            ).all()
        # The backend catches up with what runs (and stops what no job wants) first.
        await self.backend.reconcile(set(wanted))
        with self.sessions() as db:
            active = db.scalars(
                select(JobRecord).where(JobRecord.state.in_([s.value for s in ACTIVE_STATES]))
            ).all()
            for record in active:
                flavor = self.config.flavor(record.flavor)
                if (
                    record.backend_ref
                    and flavor is not None
                    and self.backend.adopt(record.backend_ref, record.gpus, flavor)
                ):
                    self.log.info("job %s: adopted after restart", record.id)
                    self._follow(record.id, record.backend_ref)
                    continue
                # Gone while we were away: the status file says how it ended, if it did.
                self._finish(db, record, exit_code=None, note=None, lost=True)
            db.commit()

    # -- what a caller may use ---------------------------------------------------

    def may_use(self, caller: Caller, flavor: Flavor) -> bool:
        """Whether the caller may run this flavor (its groups, a class, or admin).

        A student of classes that name flavors gets those flavors, and no other
        open flavor (the teacher chose what the class uses); flavors granted to
        one of the caller's groups stay theirs. Teachers get their classes' flavors.
        """
        if caller.admin:
            return True
        if caller.groups & set(flavor.groups):
            return True
        if any(flavor.name in c.flavors for c in self.classes.taught_by(caller.name)):
            return True
        restricting = [c for c in self.classes.of_student(caller.name) if c.flavors]
        if restricting:
            return any(flavor.name in c.flavors for c in restricting)
        return not flavor.groups

    def quota_for(self, caller: Caller) -> Quota:
        """The caller's quota: their own entry, else the most generous of their groups.

        With several groups in ``quotas.groups``, each limit is the most generous
        any of them grants (no limit beats every number): ``max_running_gpus`` and
        ``max_queued_jobs`` each on their own, while the GPU-hours budget is taken
        whole, hours and period together, from the group whose budget allows the
        most hours per day (10 a day beats 30 a month); a tie goes to the longer
        period, then to the group first by name. A class's GPU-hours replace the
        budget; a user's own entry replaces all of it.
        """
        quotas = self.config.quotas
        if caller.name in quotas.users:
            return quotas.users[caller.name]
        mine = [quotas.groups[g] for g in sorted(caller.groups) if g in quotas.groups]
        budgets = [c for c in self.classes.of_student(caller.name) if c.gpu_hours is not None]
        if budgets:
            # A class's GPU-hours replace the usual budget; its other limits stay.
            best = max(budgets, key=lambda c: c.gpu_hours or 0.0)
            mine = [
                q.model_copy(update={"gpu_hours": best.gpu_hours, "period": best.period})
                for q in (mine or [quotas.default])
            ]
        if not mine:
            return quotas.default

        def most(values: list[Any]) -> Any:
            return None if any(v is None for v in values) else max(values)

        def per_day(q: Quota) -> tuple[float, timedelta]:
            rate = float("inf") if q.gpu_hours is None else q.gpu_hours / PERIODS[q.period].days
            return rate, PERIODS[q.period]

        budget = max(mine, key=per_day)  # max keeps the first of equals: first by name
        return Quota(
            max_running_gpus=most([q.max_running_gpus for q in mine]),
            max_queued_jobs=most([q.max_queued_jobs for q in mine]),
            gpu_hours=budget.gpu_hours,
            period=budget.period,
        )

    def flavors_for(self, caller: Caller) -> list[FlavorInfo]:
        """Flavors the caller may use, with free capacity and queue length now."""
        with self.sessions() as db:
            queued = Counter(
                db.scalars(
                    select(JobRecord.flavor).where(JobRecord.state == JobState.QUEUED.value)
                ).all()
            )
        infos = []
        for f in self.config.flavors:
            if not self.may_use(caller, f):
                continue
            gpus = self.backend.free_gpus(f)
            infos.append(
                FlavorInfo(
                    name=f.name,
                    display_name=f.label,
                    description=f.description,
                    gpus=f.gpus,
                    gpu_type=f.gpu_type,
                    shared=f.shared,
                    cpu=f.cpu,
                    memory=f.memory,
                    time_limit=f.time_limit,
                    available=self.backend.free_for(f),
                    queued=queued.get(f.name, 0),
                    unavailable=self.backend.can_ever_fit(f),
                    free_gpus=gpus[0] if gpus else None,
                    total_gpus=gpus[1] if gpus else None,
                )
            )
        return infos

    # -- submit ------------------------------------------------------------------

    async def submit(
        self, caller: Caller, request: SubmitRequest, rerun_of: str | None = None
    ) -> Job:
        """Check, snapshot and queue a notebook; return the queued job."""
        if not caller.may_submit:
            raise Forbidden(
                "you may not submit jobs here (your hub account lacks the custom:nbjobs:submit "
                "scope); ask your admin"
            )
        flavor = self.config.flavor(request.flavor)
        if flavor is None or not self.may_use(caller, flavor):
            names = ", ".join(f.name for f in self.config.flavors if self.may_use(caller, f))
            raise Forbidden(
                f"you may not use flavor {request.flavor!r}; your flavors are: {names or 'none'}"
            )
        why_not = self.backend.can_ever_fit(flavor) or self.backend.cannot_run_for(caller.name)
        if why_not:
            raise Conflict(why_not)
        if request.priority not in (None, 0) and not caller.admin:
            raise Forbidden("only admins may set a job's priority; submit without it")
        if request.time_limit and flavor.time_limit and request.time_limit > flavor.time_limit:
            raise Invalid(
                f"time_limit {request.time_limit:g} s is longer than flavor {flavor.name!r} allows "
                f"({flavor.time_limit:g} s); ask for less or pick another flavor"
            )

        # The cheap checks first: a refused submit costs no read of the notebook.
        with self.sessions() as db:
            self._check_quota_at_submit(db, caller, flavor)
        folder = self.folder_for(caller.name)
        job_id = uuid.uuid4().hex[:12]
        jobdir = job_folder(folder, job_id)
        # Reading, checking and copying a notebook of up to limits.notebook takes a
        # while: off the event loop, so that other callers are answered meanwhile.
        source = await asyncio.to_thread(self._snapshot, folder, request.path, jobdir)
        try:
            self._record_submit(caller, request, flavor, folder, source, jobdir, job_id, rerun_of)
        except BaseException:
            remove_job_dir(jobdir)  # no job folder without its job
            raise
        self._wake.set()
        with self.sessions() as db:
            record = db.get(JobRecord, job_id)
            assert record is not None
            return self._to_model(db, record)

    def _snapshot(self, folder: Path, path: str, jobdir: Path) -> Path:
        """Read the notebook ``path`` once, check those bytes and make the job's folder
        with exactly those bytes as its snapshot; return where the notebook really is.

        The read does not follow links out of the user's folder and checks the very
        descriptor it reads (see :func:`~nbjobs.storage.read_notebook`): a link
        swapped meanwhile cannot make the snapshot someone else's notebook.
        """
        limit = self.config.limits.notebook
        try:
            notebook = read_notebook(folder, path, limit=limit)
        except NotebookTooLarge as exc:
            raise TooLarge(
                f"the notebook {path!r} is {_size(exc.size)}, more than the {_size(limit)} "
                "this service takes; clear its outputs (Edit > Clear Outputs of All Cells) "
                "and save it, or ask your admin to raise limits.notebook"
            ) from None
        except PathRefused as exc:
            raise Invalid(str(exc)) from None
        try:
            # read as the runner reads it: what Jupyter's tools run (defects they
            # tolerate are repaired there, and said), only what cannot be read refused
            parse_notebook(notebook.data.decode("utf-8"), "it")
        except (BadInput, UnicodeDecodeError) as exc:
            reason = str(exc) if isinstance(exc, BadInput) else "it is not UTF-8 text"
            raise Invalid(
                f"{path!r} is not a valid notebook ({reason[:240]}); "
                "open it in JupyterLab, fix it and save"
            ) from None
        try:
            make_job_dir(jobdir, {"input.ipynb": notebook.data})
        except FilesChanged as exc:
            raise Conflict(
                f"{exc.filename} in your folder is {exc.strerror}; nbjobs keeps its job files "
                f"there and follows no links: remove the link ({exc.filename}) and submit again"
                if "link" in (exc.strerror or "")
                else f"{exc.filename} in your folder is {exc.strerror}; nbjobs keeps its job "
                f"files there: move it away and submit again"
            ) from None
        except OSError as exc:
            self.log.warning("the snapshot of %s in %s failed: %s", path, folder, exc)
            raise snapshot_failed(exc, path) from None
        return notebook.path

    def _record_submit(
        self,
        caller: Caller,
        request: SubmitRequest,
        flavor: Flavor,
        folder: Path,
        source: Path,
        jobdir: Path,
        job_id: str,
        rerun_of: str | None,
    ) -> None:
        """Queue the job in the database: its quota checked again, now in the same
        transaction (other submits of the caller's may have been queued meanwhile)."""
        with self.sessions() as db:
            self._check_quota_at_submit(db, caller, flavor)
            now = utcnow()
            snapshot = jobdir / "input.ipynb"
            output = output_path_for(source, job_id, now)
            self._seq += 1
            record = JobRecord(
                id=job_id,
                seq=self._seq,
                user=caller.name,
                groups=sorted(caller.groups),
                name=(request.name or "").strip() or source.stem,
                flavor=flavor.name,
                state=JobState.QUEUED.value,
                priority=request.priority or 0,
                path=relative_to_user(folder, source),
                output_path=relative_to_user(folder, output),
                source_file=str(source),
                snapshot_file=str(snapshot),
                output_file=str(output),
                job_dir=str(jobdir),
                parameters=request.parameters,
                time_limit=request.time_limit or flavor.time_limit,
                gpu_count=flavor.gpus,
                gpus=[],
                submitted_at=now,
                rerun_of=rerun_of,
            )
            db.add(record)
            db.commit()
            self.log.info(
                "job %s: queued by %s (%s, %s)", job_id, caller.name, record.path, flavor.name
            )

    def _check_quota_at_submit(self, db: Session, caller: Caller, flavor: Flavor) -> None:
        quota = self.quota_for(caller)
        if quota.max_running_gpus is not None and flavor.gpus > quota.max_running_gpus:
            # It could never start: refuse now rather than let it wait forever.
            raise Forbidden(_too_big_for_quota(flavor, quota))
        if quota.max_queued_jobs is not None:
            queued = db.scalar(
                select(func.count())
                .select_from(JobRecord)
                .where(JobRecord.user == caller.name, JobRecord.state == JobState.QUEUED.value)
            )
            if (queued or 0) >= quota.max_queued_jobs:
                raise OverQuota(
                    f"you have {queued} jobs waiting, the most you may have queued; "
                    "wait for some to start or cancel some"
                )
        if flavor.gpus and quota.gpu_hours is not None:
            used = self._gpu_hours(db, caller.name, quota.period)
            if used >= quota.gpu_hours:
                raise OverQuota(
                    f"you have used {used:.1f} of your {quota.gpu_hours:g} GPU-hours this "
                    f"{quota.period}; use a CPU flavor or ask your admin for more"
                )

    def _gpu_hours(self, db: Session, user: str, period: str) -> float:
        now = utcnow()
        since = now - PERIODS[period]
        records = db.scalars(
            select(JobRecord).where(
                JobRecord.user == user,
                JobRecord.gpu_count > 0,
                JobRecord.started_at.is_not(None),
                (JobRecord.finished_at.is_(None)) | (JobRecord.finished_at >= since),
            )
        ).all()
        seconds = 0.0
        for r in records:
            assert r.started_at is not None
            start = max(r.started_at, since)
            end = r.finished_at or now
            seconds += max(0.0, (end - start).total_seconds()) * r.gpu_count
        return seconds / 3600

    # -- read --------------------------------------------------------------------

    def _visible(
        self, caller: Caller, record: JobRecord | None, job_id: str, *, own: bool = False
    ) -> JobRecord:
        """The record if the caller may see it (``own``: only its owner or an admin)."""
        allowed = record is not None and (
            record.user == caller.name
            or caller.admin
            or (not own and self.classes.teaches(caller.name, record.user))
        )
        if record is None or not allowed:
            raise NotFound(f"no job {job_id!r} of yours; `nbjobs list` shows your jobs")
        return record

    def get(self, caller: Caller, job_id: str) -> Job:
        """One job, with its live progress."""
        with self.sessions() as db:
            record = self._visible(caller, db.get(JobRecord, job_id), job_id)
            return self._to_model(db, record)

    def list_jobs(
        self,
        caller: Caller,
        *,
        state: str | None = None,
        flavor: str | None = None,
        user: str | None = None,
        class_name: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> JobList:
        """The caller's jobs, newest first.

        An admin sees everyone's (or one user's); a teacher may ask for one of
        their students (``user``) or a whole class of theirs (``class_name``).
        """
        if (
            user is not None
            and user != caller.name
            and not caller.admin
            and not self.classes.teaches(caller.name, user)
        ):
            raise Forbidden("only admins and the user's teachers may list another user's jobs")
        members: list[str] | None = None
        if class_name is not None:
            cls = self.classes.get(class_name)
            if cls is None or not (caller.admin or caller.name in cls.teachers):
                raise NotFound(
                    f"no class {class_name!r} of yours; `nbjobs class list` shows your classes"
                )
            members = cls.students
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
        who = user if user is not None else (None if caller.admin else caller.name)
        if members is not None:
            query = query.where(JobRecord.user.in_(members))
            who = user
        if who is not None:
            query = query.where(JobRecord.user == who)
        if flavor:
            query = query.where(JobRecord.flavor == flavor)
        with self.sessions() as db:
            if states:
                if {JobState.STARTING.value, JobState.RUNNING.value} & set(states):
                    self._note_running(db)
                query = query.where(self._state_filter(db, set(states)))
            total = db.scalar(select(func.count()).select_from(query.subquery())) or 0
            page = query.order_by(JobRecord.seq.desc()).limit(limit).offset(offset)
            records = self._readable_records(db, page, "a job list")
            # placing the queue costs a query: only when this page shows a queued job
            queued_here = any(r.state == JobState.QUEUED.value for r in records)
            positions: dict[str, int] = {}
            if queued_here:
                try:
                    positions = self._queue_positions(db)
                except (ValueError, TypeError) as exc:  # a damaged queued record
                    self.log.warning("queue positions left out of a job list: %s", exc)
            jobs = []
            for record in records:
                try:
                    jobs.append(self._to_model(db, record, positions))
                except DamagedRecord as exc:
                    self.log.warning("%s; left out of a job list", exc.message)
        # A damaged record still counts in ``total``: it is there, only not shown.
        return JobList(jobs=jobs, total=total, limit=limit, offset=offset)

    def _readable_records(self, db: Session, query: Any, where: str) -> list[JobRecord]:
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
                self.log.warning("%s; left out of %s", message, where)
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
            if ref and (seen := self.backend.seen(ref)) is not None and seen.waiting
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
            live = self._read_status(job_dir)
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

    def _read_status(self, job_dir: str) -> RunStatus | None:
        """The runner's status file in ``job_dir``; None when there is none or it cannot
        be read. Read without following links: a status file (or a folder on the way)
        that the user replaced with a link to someone else's file is not read."""
        try:
            with opened_job_dir(Path(job_dir)) as folder:
                data = read_file_at(folder, "status.json", limit=STATUS_FILE_LIMIT)
            return parse_status(data) if data is not None else None
        except FilesChanged as exc:
            self.log.warning("status file of %s not read: %s", job_dir, exc)
        except (StatusFileError, OSError, ValueError):
            pass
        return None

    def open_log(self, caller: Caller, job_id: str) -> int | None:
        """The job's log, opened for reading (the caller closes it); None while there
        is none yet (a queued job).

        Nothing is followed through a link: when the job's folder, a folder above it or
        the log itself has become a link (or a pipe, a file where a folder was), this is
        a :class:`Conflict` that says so, never the linked file's content.
        """
        with self.sessions() as db:
            record = self._visible(caller, db.get(JobRecord, job_id), job_id)
            job_dir = Path(record.job_dir)
        try:
            with opened_job_dir(job_dir) as folder:
                return open_file_at(folder, "log.txt", os.O_RDONLY)
        except FileNotFoundError:
            return None
        except FilesChanged as exc:
            kind = "file" if exc.filename == "log.txt" else "folder"
            what = exc.strerror or ""
            if "link" in what:
                what = f"a link, not a {kind}"
            raise Conflict(
                f"the files of job {job_id} were changed: {exc.filename} is {what}; nbjobs "
                "reads no log through a link. Remove the link; re-run the job for a new log"
            ) from None

    def is_final(self, job_id: str) -> bool:
        with self.sessions() as db:
            record = db.get(JobRecord, job_id)
            return record is None or JobState(record.state).final

    def usage(self, caller: Caller) -> Usage:
        """Jobs and GPU-hours per user and group this period (admins: all; teachers: theirs)."""
        period = self.config.quotas.default.period
        now = utcnow()
        since = now - PERIODS[period]
        with self.sessions() as db:
            query = select(JobRecord).where(
                (JobRecord.finished_at.is_(None)) | (JobRecord.finished_at >= since)
            )
            if not caller.admin:
                # a teacher also sees their students
                students = {s for c in self.classes.taught_by(caller.name) for s in c.students}
                query = query.where(JobRecord.user.in_({caller.name, *students}))
            records = self._readable_records(db, query, "the usage")
        users: dict[str, UsageRow] = {}
        groups: dict[str, UsageRow] = {}
        for r in records:
            problem = _usage_problem(r)
            if problem is not None:
                self.log.warning("%s; left out of the usage", DamagedRecord(r.id, problem).message)
                continue
            start = max(r.started_at, since) if r.started_at else None
            hours = 0.0
            if start is not None and r.gpu_count:
                hours = (
                    max(0.0, ((r.finished_at or now) - start).total_seconds()) * r.gpu_count / 3600
                )
            for name, table in [(r.user, users)] + [(g, groups) for g in r.groups]:
                row = table.setdefault(
                    name, UsageRow(name=name, jobs=0, running=0, queued=0, gpu_hours=0)
                )
                row.jobs += 1
                row.running += r.state in {s.value for s in ACTIVE_STATES}
                row.queued += r.state == JobState.QUEUED.value
                row.gpu_hours = round(row.gpu_hours + hours, 4)
        order = lambda rows: sorted(rows.values(), key=lambda u: (-u.gpu_hours, u.name))  # noqa: E731
        return Usage(since=since, period=period, users=order(users), groups=order(groups))

    # -- change ------------------------------------------------------------------

    async def cancel(self, caller: Caller, job_id: str) -> Job:
        """Cancel a queued job at once; ask a running one to stop (it keeps its output)."""
        with self.sessions() as db:
            record = self._visible(caller, db.get(JobRecord, job_id), job_id)
            state = JobState(record.state)
            if state.final:
                raise Conflict(f"job {job_id} already ended ({state.value}); nothing to cancel")
            if state is JobState.QUEUED:
                record.state = JobState.CANCELLED.value
                record.finished_at = utcnow()
                record.message = f"cancelled by {caller.name} before it started"
                record.waiting_reason = None
                db.commit()
                self._wake.set()
                return self._to_model(db, record)
            record.cancel_requested = 1
            record.message = f"cancelled by {caller.name}; the output keeps the cells that ran"
            ref = record.backend_ref
            db.commit()
        if ref:
            await self.backend.cancel(ref)
            follower = self._followers.get(job_id)
            if follower is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.shield(follower)
        return self.get(caller, job_id)

    async def rerun(self, caller: Caller, job_id: str) -> Job:
        """Queue the same notebook (its current version), flavor and parameters again."""
        with self.sessions() as db:
            record = self._visible(caller, db.get(JobRecord, job_id), job_id, own=True)
            if not JobState(record.state).final:
                raise Conflict(f"job {job_id} is still {record.state}; cancel it first or wait")
            request = SubmitRequest(
                path=record.path,
                flavor=record.flavor,
                parameters=record.parameters,
                priority=record.priority if caller.admin else None,
                name=record.name,
            )
            owner = Caller(record.user, frozenset(record.groups), admin=False)
        # An admin re-running someone's job runs it as its owner, with the owner's limits.
        as_ = caller if owner.name == caller.name else owner
        if not caller.may_submit:
            as_ = caller  # refused in submit, with the reason
        return await self.submit(as_, request, rerun_of=job_id)

    def forget(self, caller: Caller, job_id: str) -> None:
        """Remove a finished job from the list; its output notebook and files stay."""
        with self.sessions() as db:
            record = self._visible(caller, db.get(JobRecord, job_id), job_id, own=True)
            if not JobState(record.state).final:
                raise Conflict(f"job {job_id} is still {record.state}; cancel it first")
            db.delete(record)
            db.commit()

    def update(self, caller: Caller, job_id: str, request: UpdateRequest) -> Job:
        """Admins: change a queued job's priority (bump it up the queue)."""
        if not caller.admin:
            raise Forbidden("only admins may change a job's priority")
        with self.sessions() as db:
            record = self._visible(caller, db.get(JobRecord, job_id), job_id)
            if record.state != JobState.QUEUED.value:
                raise Conflict(f"job {job_id} is {record.state}; only a queued job can move")
            record.priority = request.priority
            db.commit()
            self._wake.set()
            return self._to_model(db, record)

    # -- the queue ---------------------------------------------------------------

    async def _schedule_loop(self) -> None:
        while not self._stopping:
            try:
                await self.schedule()
            except Exception:
                self.log.exception("scheduling failed; trying again")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=2.0)
            self._wake.clear()

    async def schedule(self) -> None:
        """Start every queued job that capacity and quotas allow, best first.

        Order: priority, then fair share (users running fewer jobs first, then
        round-robin: the user who started a job least recently), then
        submission. A job that does not fit now is passed over, with the
        reason recorded, and the rest may start.

        A pass costs little even with thousands queued: the queue is read as
        plain rows, users' queues are merged through a heap (one user's jobs
        keep their order; only the user who just started a job moves), a
        waiting reason is worked out once per user, groups and flavor until
        something starts, and only reasons that changed are written.

        A pass starts nothing unless this service still holds the dispatcher lease
        (renewed here when it is getting old), so two services never both start jobs.
        """
        if self._stopping or not self.lease.fresh():
            return
        with self.sessions() as db:
            queued = db.execute(
                select(
                    JobRecord.id,
                    JobRecord.user,
                    # as the stored text: decoded once per distinct value, not per job
                    cast(JobRecord.groups, Text).label("groups"),
                    JobRecord.flavor,
                    JobRecord.priority,
                    JobRecord.seq,
                    JobRecord.waiting_reason,
                ).where(JobRecord.state == JobState.QUEUED.value)
            ).all()
            if not queued:
                return
            running_jobs, running_gpus, last_start = self._fair_share(db, {r.user for r in queued})
            verdicts: dict[tuple[str, str, str], str | None] = {}
            hours_cache: dict[tuple[str, str], float] = {}
            reasons: dict[str, str] = {}
            to_start: list[JobRecord] = []
            for row in in_queue_order(queued, running_jobs, last_start):
                verdict_key = (row.user, row.groups or "[]", row.flavor)
                if verdict_key not in verdicts:
                    groups = json.loads(row.groups) if row.groups else []
                    verdicts[verdict_key] = self._why_waiting(
                        db, row.user, groups or [], row.flavor, running_gpus, hours_cache
                    )
                reason = verdicts[verdict_key]
                if reason is not None:
                    reasons[row.id] = reason
                elif (record := await self._start_queued(db, row.id)) is not None:
                    to_start.append(record)
                    if record.state == JobState.STARTING.value:
                        running_jobs[row.user] += 1
                        last_start[row.user] = utcnow().timestamp()
                        running_gpus[row.user] += record.gpu_count
                    verdicts.clear()  # capacity and this user's share changed
            changed: dict[str, list[str]] = {}
            for row in queued:
                reason = reasons.get(row.id)
                if reason is not None and reason != row.waiting_reason:
                    changed.setdefault(reason, []).append(row.id)
            for reason, ids in changed.items():
                for i in range(0, len(ids), 500):
                    db.execute(
                        update(JobRecord)
                        .where(
                            JobRecord.id.in_(ids[i : i + 500]),
                            JobRecord.state == JobState.QUEUED.value,
                        )
                        .values(waiting_reason=reason)
                    )
            db.commit()
            for record in to_start:
                if record.backend_ref and record.state == JobState.STARTING.value:
                    self._follow(record.id, record.backend_ref)

    async def _start_queued(self, db: Session, job_id: str) -> JobRecord | None:
        """Hand one queued job to the backend; a job it cannot start is failed, with why."""
        record = db.get(JobRecord, job_id)
        if record is None or record.state != JobState.QUEUED.value:
            return None  # cancelled while this pass ran
        record.state = JobState.STARTING.value
        record.waiting_reason = None
        try:
            await self._launch(record)
        except Exception as exc:
            self.log.exception("job %s: could not start", record.id)
            record.state = JobState.FAILED.value
            record.finished_at = utcnow()
            record.message = f"the backend could not start the job: {exc}"
        return record

    def _fair_share(
        self, db: Session, users: set[str] | None = None
    ) -> tuple[Counter[str], Counter[str], dict[str, float]]:
        """Per user (all, or ``users``): jobs running, GPUs held, when they last started one."""
        active_query = select(JobRecord.user, JobRecord.gpu_count).where(
            JobRecord.state.in_([s.value for s in ACTIVE_STATES])
        )
        last_query = select(JobRecord.user, func.max(JobRecord.started_at)).group_by(JobRecord.user)
        if users is not None:
            active_query = active_query.where(JobRecord.user.in_(users))
            last_query = last_query.where(JobRecord.user.in_(users))
        running_jobs: Counter[str] = Counter()
        running_gpus: Counter[str] = Counter()
        for user, gpu_count in db.execute(active_query).all():
            running_jobs[user] += 1
            running_gpus[user] += gpu_count
        # Round-robin between users: whoever started a job least recently goes first.
        last_start = {user: when.timestamp() for user, when in db.execute(last_query).all() if when}
        return running_jobs, running_gpus, last_start

    def _why_waiting(
        self,
        db: Session,
        user: str,
        groups: list[str],
        flavor_name: str,
        running_gpus: Counter[str],
        hours_cache: dict[tuple[str, str], float],
    ) -> str | None:
        """Why a job of ``user`` (in ``groups``) on ``flavor_name`` cannot start now, or None."""
        flavor = self.config.flavor(flavor_name)
        if flavor is None:
            return f"flavor {flavor_name!r} no longer exists; cancel and resubmit"
        caller = Caller(user, frozenset(groups))
        quota = self.quota_for(caller)
        if quota.max_running_gpus is not None and flavor.gpus > quota.max_running_gpus:
            # queued before the quota shrank: it waits, and says it never fits
            return _too_big_for_quota(flavor, quota) + "; cancel it"
        if (
            flavor.gpus
            and quota.max_running_gpus is not None
            and running_gpus[user] + flavor.gpus > quota.max_running_gpus
        ):
            return (
                f"waiting for your other jobs: you may use {quota.max_running_gpus} GPU(s) at "
                f"once and are using {running_gpus[user]}"
            )
        if flavor.gpus and quota.gpu_hours is not None:
            key = (user, quota.period)
            if key not in hours_cache:
                hours_cache[key] = self._gpu_hours(db, user, quota.period)
            if hours_cache[key] >= quota.gpu_hours:
                return (
                    f"your {quota.gpu_hours:g} GPU-hours for this {quota.period} are used up; "
                    "it starts when the period rolls over, or cancel it"
                )
        if not self.backend.queues_jobs_itself and self.backend.free_for(flavor) < 1:
            return f"waiting for a free {'GPU' if flavor.gpus else 'slot'} for {flavor.label}"
        return None

    async def _launch(self, record: JobRecord) -> None:
        flavor = self.config.flavor(record.flavor)
        assert flavor is not None
        jobdir = Path(record.job_dir)
        spec = LaunchSpec(
            job_id=record.id,
            user=record.user,
            flavor=flavor,
            snapshot_file=Path(record.snapshot_file),
            output_file=Path(record.output_file),
            status_file=jobdir / "status.json",
            log_file=jobdir / "log.txt",
            cwd=Path(record.source_file).parent,
            parameters=record.parameters,
            time_limit=record.time_limit,
            attempt=record.requeues or 0,
        )
        launched = await self.backend.start(spec)
        record.backend_ref = launched.ref
        record.gpus = launched.gpus
        record.started_at = utcnow()

    def _follow(self, job_id: str, ref: str) -> None:
        self._followers[job_id] = asyncio.ensure_future(self._follow_job(job_id, ref))

    async def _follow_job(self, job_id: str, ref: str) -> None:
        try:
            with self.sessions() as db:
                record = db.get(JobRecord, job_id)
                limit = record.time_limit if record else None
            note = None
            try:
                # The runner enforces the limit itself; this is the backstop.
                grace = self.time_limit_grace
                backstop = limit + grace if limit and not self.backend.enforces_time_limit else None
                outcome = await asyncio.wait_for(self.backend.wait(ref), timeout=backstop)
            except asyncio.TimeoutError:
                await self.backend.cancel(ref)
                outcome = await self.backend.wait(ref)
                note = "timed_out"
            with self.sessions() as db:
                record = db.get(JobRecord, job_id)
                if record is not None and self._may_requeue(record, outcome, note):
                    self._requeue(record, outcome)
                    db.commit()
                elif record is not None:
                    self._finish(
                        db,
                        record,
                        outcome.exit_code,
                        outcome.message,
                        forced=note,
                        backend_state=outcome.state,
                        started_at=outcome.started_at,
                        finished_at=outcome.finished_at,
                    )
                    db.commit()
        finally:
            self.backend.release(ref)
            self._followers.pop(job_id, None)
            self._wake.set()

    def _may_requeue(self, record: JobRecord, outcome: Outcome, forced: str | None) -> bool:
        """A job the cluster disrupted goes back to the queue if its flavor allows more."""
        flavor = self.config.flavor(record.flavor)
        return (
            outcome.disrupted
            and forced is None
            and not record.cancel_requested
            and flavor is not None
            and (record.requeues or 0) < flavor.requeue_on_eviction
        )

    def _requeue(self, record: JobRecord, outcome: Outcome) -> None:
        """Put a disrupted job back in the queue, in its old place; it runs from the top.

        What the disrupted attempt left (its status, its log) is kept beside the job's
        files as ``status.attempt-N.json`` and ``log.attempt-N.txt``; the GPU time it
        held is not charged (the cluster, not the user, cut it short).
        """
        attempt = (record.requeues or 0) + 1
        flavor = self.config.flavor(record.flavor)
        allowed = flavor.requeue_on_eviction if flavor is not None else attempt
        try:
            with opened_job_dir(Path(record.job_dir)) as folder:
                for name, kept in [("status.json", "status"), ("log.txt", "log")]:
                    suffix = Path(name).suffix
                    with contextlib.suppress(FileNotFoundError):
                        # renamed in the job's folder itself: a link there is moved, not
                        # followed
                        os.replace(
                            name,
                            f"{kept}.attempt-{attempt}{suffix}",
                            src_dir_fd=folder,
                            dst_dir_fd=folder,
                        )
        except OSError as exc:  # the folder is gone or was changed: keep nothing
            self.log.warning("job %s: the last attempt's files not kept: %s", record.id, exc)
        why = (outcome.message or "the cluster stopped it").removesuffix("; re-run it")
        record.requeues = attempt
        record.state = JobState.QUEUED.value
        record.backend_ref = None
        record.gpus = []
        record.started_at = None
        record.cells_done = record.cells_total = 0
        record.current_cell = None
        record.exit_code = None
        record.message = (
            f"re-queued ({attempt} of {allowed} allowed) after {why}; it runs again from "
            f"the top (the log so far is kept as log.attempt-{attempt}.txt)"
        )
        self.log.warning("job %s: %s", record.id, record.message)

    def _finish(
        self,
        db: Session,
        record: JobRecord,
        exit_code: int | None,
        note: str | None,
        *,
        lost: bool = False,
        forced: str | None = None,
        backend_state: str | None = None,
        started_at: datetime | None = None,
        finished_at: datetime | None = None,
    ) -> None:
        """Record how a job ended, from the runner's status file and the exit code.

        ``backend_state`` (with ``note`` saying why) is the backend's word on a job the
        cluster ended (its deadline, out of memory, eviction): it wins over the runner's.
        """
        if record.backend_ref:
            seen = self.backend.seen(record.backend_ref)
            if seen is not None and seen.node:
                record.node = seen.node
        # who asked for the cancel (set by cancel()); the runner only knows the signal
        cancelled_by = record.message if record.cancel_requested else None
        status = self._read_status(record.job_dir)
        final_status = status is not None and status.exit_code is not None
        if status is not None:
            record.cells_done, record.cells_total = status.cells_done, status.cells_total
            record.current_cell = status.current_cell
        if final_status:
            assert status is not None
            record.exit_code = status.exit_code
            state = status.state
            record.message = status.message
            if status.error is not None:
                record.error = {
                    "cell_index": status.error.cell_index,
                    "ename": status.error.ename,
                    "evalue": status.error.evalue,
                }
        elif exit_code is not None and exit_code >= 0 and exit_code in {e.value for e in ExitCode}:
            record.exit_code = exit_code
            state = STATE_FOR_EXIT_CODE[ExitCode(exit_code)]
            record.message = note
        else:
            record.exit_code = exit_code
            state = JobState.FAILED.value
            if lost:
                record.message = (
                    "the job's process was gone when the job service restarted; re-run it"
                )
            else:
                record.message = note or "the runner ended without reporting; see the log"
        if record.cancel_requested and state in (JobState.CANCELLED.value, JobState.FAILED.value):
            state = JobState.CANCELLED.value
            record.message = cancelled_by or record.message or "cancelled"
        if forced == "timed_out":
            state = JobState.TIMED_OUT.value
            record.message = (
                f"stopped by the job service after its time limit ({record.time_limit:g} s)"
            )
        elif backend_state is not None:
            # The backend knows better than the runner (the cluster's deadline, out of memory).
            state = backend_state
            record.message = note or record.message
        record.state = state
        # The backend's own record of the times (a cluster's) wins over when this service
        # noticed: GPU-hours are charged for what ran, not for a restart's downtime.
        if started_at is not None and (finished_at is None or started_at <= finished_at):
            record.started_at = started_at
        record.finished_at = finished_at or utcnow()
        self.log.info(
            "job %s: %s%s", record.id, state, f" ({record.message})" if record.message else ""
        )

    # -- views -------------------------------------------------------------------

    def _note_queue_changes(self, session: Session, _context: Any) -> None:
        """After a flush: did it add or remove a job, or change what orders the queue?

        The positions depend on the queued jobs (user, priority, order) and on each
        user's running jobs and latest start, so a new or deleted job, or a change of
        state, priority or start time, moves them. (Bulk UPDATEs bypass this hook:
        the service's only ones set waiting reasons and starting -> running, which
        move nothing.)
        """
        for obj in (*session.new, *session.deleted):
            if isinstance(obj, JobRecord):
                self._queue_version += 1
                return
        for obj in session.dirty:
            if isinstance(obj, JobRecord):
                attrs = sa_inspect(obj).attrs
                if any(attrs[name].history.has_changes() for name in _QUEUE_FIELDS):
                    self._queue_version += 1
                    return

    def _queue_positions(self, db: Session) -> dict[str, int]:
        """Each queued job's place: the order :meth:`schedule` would start them in.

        The same :func:`queue_order` as the scheduler, replayed as if each job
        started in turn (its user then runs one more job and started last), so
        bob's one job behind ada's fifty shows the place it really has: next
        but one. Quotas and capacity, which may pass a job over, are not foreseen.
        Worked out once for each change of the queue (a list of 10,000 queued
        jobs costs tens of milliseconds), then served from memory.
        """
        cached = self._positions_cache
        if cached is not None and cached[0] == self._queue_version:
            return cached[1]
        version = self._queue_version
        positions = self._work_out_positions(db)
        self._positions_cache = (version, positions)
        return positions

    def _work_out_positions(self, db: Session) -> dict[str, int]:
        queued = db.execute(
            select(JobRecord.id, JobRecord.user, JobRecord.priority, JobRecord.seq).where(
                JobRecord.state == JobState.QUEUED.value
            )
        ).all()
        if not queued:
            return {}
        running_jobs, _, last_start = self._fair_share(db, {r.user for r in queued})
        clock = max([utcnow().timestamp(), *last_start.values()])
        positions: dict[str, int] = {}
        for row in in_queue_order(queued, running_jobs, last_start):
            positions[row.id] = len(positions) + 1
            running_jobs[row.user] += 1
            clock += 1.0
            last_start[row.user] = clock
        return positions

    def _to_model(
        self, db: Session, record: JobRecord, positions: dict[str, int] | None = None
    ) -> Job:
        """The API's view of a record; :class:`DamagedRecord` when the record cannot be one."""
        try:
            state = JobState(record.state)
        except ValueError:
            raise DamagedRecord(record.id, f"state {record.state!r} is not a job state") from None
        try:
            progress = Progress(
                cells_done=record.cells_done,
                cells_total=record.cells_total,
                current_cell=record.current_cell,
            )
        except ValidationError as exc:
            raise DamagedRecord(record.id, _first_problem(exc)) from None
        if state in ACTIVE_STATES:
            with contextlib.suppress(StatusFileError, OSError):
                live = self._read_status(record.job_dir)
                if live is not None:
                    progress = Progress(
                        cells_done=live.cells_done,
                        cells_total=live.cells_total,
                        current_cell=live.current_cell,
                    )
                    if live.state == "running":
                        state = JobState.RUNNING
        waiting = record.waiting_reason
        seen = None
        if state in ACTIVE_STATES and record.backend_ref:
            seen = self.backend.seen(record.backend_ref)
        if seen is not None and seen.waiting:
            # Handed to the cluster, which has not placed it yet: queued there, and why.
            state, waiting = JobState.QUEUED, seen.waiting
        position = None
        if state is JobState.QUEUED:
            positions = positions if positions is not None else self._queue_positions(db)
            position = positions.get(record.id)
        if record.error is not None and not isinstance(record.error, dict):
            raise DamagedRecord(record.id, f"error {record.error!r} is not an object")
        try:
            return Job(
                id=record.id,
                user=record.user,
                name=record.name,
                path=record.path,
                output_path=record.output_path,
                flavor=record.flavor,
                state=state,
                queue_position=position,
                waiting_reason=waiting if state is JobState.QUEUED else None,
                progress=progress,
                parameters=record.parameters or {},
                priority=record.priority,
                gpus=record.gpus or [],
                submitted_at=record.submitted_at,
                started_at=record.started_at,
                finished_at=record.finished_at,
                exit_code=record.exit_code,
                message=record.message,
                error=JobError(**record.error) if record.error else None,
                node=(seen.node if seen is not None and seen.node else None) or record.node,
                rerun_of=record.rerun_of,
                time_limit=record.time_limit,
                requeues=record.requeues or 0,
            )
        except (ValidationError, TypeError) as exc:
            raise DamagedRecord(record.id, _first_problem(exc)) from None


#: what a job's place in the queue depends on, besides jobs coming and going
_QUEUE_FIELDS = ("state", "priority", "started_at", "user")


def in_queue_order(
    rows: Sequence[Any], running_jobs: Counter[str], last_start: dict[str, float]
) -> Iterator[Any]:
    """Queued rows (with ``user``, ``priority``, ``seq``), best first by :func:`queue_order`.

    Users' queues are merged through a heap: one user's jobs keep their order
    among themselves, so only heads compete. A caller that counts a start for
    the user of the row just yielded (in ``running_jobs`` and ``last_start``)
    before asking for the next one moves that user's next job to its new place.
    """
    by_user: dict[str, list[Any]] = {}
    for row in rows:
        by_user.setdefault(row.user, []).append(row)

    def key(row: Any) -> tuple[int, int, float, int]:
        return queue_order(row.priority, row.seq, row.user, running_jobs, last_start)

    for queue in by_user.values():
        queue.sort(key=lambda r: (r.priority, -r.seq))  # the user's best last, to pop
    heads = [(key(queue[-1]), user) for user, queue in by_user.items()]
    heapq.heapify(heads)
    while heads:
        _, user = heapq.heappop(heads)
        queue = by_user[user]
        yield queue.pop()
        if queue:  # keyed now: the caller may have counted a start for this user
            heapq.heappush(heads, (key(queue[-1]), user))


def queue_order(
    priority: int,
    seq: int,
    user: str,
    running_jobs: Counter[str],
    last_start: dict[str, float],
) -> tuple[int, int, float, int]:
    """The queue's sort key, best first; the scheduler and the queue positions share it.

    Priority first (admins may raise it), then fair share: users running fewer
    jobs first, then round-robin (the user who started a job least recently),
    then submission order.
    """
    return (-priority, running_jobs[user], last_start.get(user, 0.0), seq)


def snapshot_failed(exc: OSError, path: str) -> ServiceError:
    """The refusal for a submit whose job folder or snapshot could not be written.

    A full disk or quota is a 507 (Insufficient Storage), a folder the service may
    not write a 403; anything else a 500 that still says what failed. Every one is
    a sentence: the user learns whether to free space or to ask an admin.
    """
    where = exc.filename or "your folder"
    reason = (exc.strerror or str(exc)).lower()
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return InsufficientStorage(
            f"your folder has no room for the job's copy of {path!r} ({reason}); free some "
            "space (old outputs, .nbjobs/jobs of old jobs) and submit again"
        )
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return Forbidden(
            f"the job service may not write in your folder ({where}: {reason}); ask your "
            "admin to check the storage"
        )
    return StorageFailed(
        f"the job service could not write the job's files in your folder ({where}: {reason}); "
        "try again, or ask your admin"
    )


def _size(size: int) -> str:
    """A size in MiB for people: ``2.4 MiB``, ``1 MiB``, ``0.1 MiB``."""
    mib = f"{size / 1024**2:.1f}".removesuffix(".0")
    return f"{mib} MiB"


class DamagedRecord(ServiceError):
    """A job's database record the service cannot make sense of: the service's fault (500).

    A job list and the usage leave such a record out (and log it); asking for the
    job itself gets this sentence.
    """

    status = 500

    def __init__(self, job_id: str, reason: str) -> None:
        super().__init__(
            f"job {job_id}'s record in the job database is damaged ({reason}); an admin can "
            "repair or delete that row"
        )
        self.job_id = job_id


def _first_problem(exc: Exception) -> str:
    """What is wrong with a record, from the error its model raised: one short clause."""
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return f"{where}: {first['msg']}" if where else str(first["msg"])
    return str(exc)


def _usage_problem(record: JobRecord) -> str | None:
    """Why a record cannot count in the usage (None: it can)."""
    if record.state not in {s.value for s in JobState}:
        return f"state {record.state!r} is not a job state"
    if not isinstance(record.user, str):
        return "it has no user"
    if not isinstance(record.groups, list) or not all(isinstance(g, str) for g in record.groups):
        return f"groups {record.groups!r} is not a list of names"
    if record.gpu_count is not None and not isinstance(record.gpu_count, int):
        return f"gpu_count {record.gpu_count!r} is not a number"
    for name in ("started_at", "finished_at"):
        value = getattr(record, name)
        if value is not None and not isinstance(value, datetime):
            return f"{name} {value!r} is not a time"
    return None


def _too_big_for_quota(flavor: Flavor, quota: Quota) -> str:
    """Why a flavor can never start under a quota's running-GPU limit, and what to do."""
    return (
        f"flavor {flavor.name!r} needs {flavor.gpus} GPU(s) at once and your quota "
        f"(max_running_gpus) allows {quota.max_running_gpus}; pick a flavor with fewer GPUs "
        "or ask your admin to raise your quota"
    )

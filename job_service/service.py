"""The job service's core: who may run what, when; the queue; what happened.

Transport-free: the tornado handlers (and the server extension, in
single-user mode) call these methods with a :class:`Caller`. Errors a caller
can fix are :class:`ServiceError` with an HTTP status and a sentence.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import logging
import os
import threading
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from nbjobs.job_runner import rank_file
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from nbjobs.config import PERIODS, Flavor, NbjobsConfig, Quota, nodes_words
from nbjobs.models import (
    ClassInfo,
    FlavorInfo,
    Job,
    JobList,
    JobState,
    RerunChanges,
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
    open_notebook,
    opened_job_dir,
    output_path_for,
    relative_to_user,
    remove_job_dir,
    user_folder,
)

from . import drains, joblist, metering, usage
from .approvals import ApprovalExpiry, Decisions, needs_approval, waiting_for_approval
from .audit import Audit, note_reading
from .backends import Backend
from .budgets import Budgets
from .classes import ClassRegistry
from .context import Context
from .counters import ServiceMetrics
from .credits import Credits
from .db import ACTIVE_VALUES, JobRecord, ReadsFirst, engine_of, rowcount, utcnow
from .deleted_users import BY as DEPARTURES_BY
from .deleted_users import Departures
from .dispatch import Dispatcher
from .errors import (
    Caller,
    Conflict,
    DamagedRecord,
    Forbidden,
    InsufficientStorage,
    Invalid,
    NotFound,
    OverQuota,
    ServiceError,
    StorageFailed,
    TooLarge,
)
from .events import ChangeFeed
from .invitations import Invitations
from .jobview import JobView
from .kernels import check_chosen_kernel, check_notebook_kernel
from .lease import DispatcherLease
from .live import RunnerStatuses
from .notebooks import NotebookChecks
from .notifications.outbox import Outbox
from .notifications.settings import NotifySettingsStore
from .periodic import Loop
from .queue import QueuePositions, in_queue_order, queue_order
from .quotas import Quotas, gpu_hours_held
from .reclaim import IdleReclaimer, leave_stop_reason
from .retention import Retention
from .schedules.definitions import Definitions
from .schedules.ticker import Ticker
from .scripts import job_kind, read_script, snapshot_name
from .telemetry import TelemetryCollector, delete_samples
from .usage import UsageRoller

__all__ = [  # what other modules import from here (the errors live in .errors)
    "Caller",
    "Conflict",
    "DamagedRecord",
    "Forbidden",
    "InsufficientStorage",
    "Invalid",
    "JobService",
    "NotFound",
    "OverQuota",
    "ServiceError",
    "StorageFailed",
    "TooLarge",
    "in_queue_order",
    "queue_order",
]

T = TypeVar("T")
#: seconds a stopping service waits for its database calls still running to end
STOP_WAIT = 5.0


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
        lease: DispatcherLease | None = None,
        concurrent_starts: int = 8,
        database_threads: int = 1,
        read_threads: int = 2,
    ) -> None:
        self.config = config
        #: where submitted notebooks are checked, within limits.cells / check_memory
        self.notebooks = NotebookChecks(config.limits)
        #: classes from nbjobs.yaml and, in a hub, teachers' groups
        self.classes = classes or ClassRegistry(config, log=log)
        #: a user's folder; by default from nbjobs.yaml's storage (single-user: the server's root)
        self.folder_for = folder_for or (lambda name: user_folder(self.config.storage, name))
        self.backend = backend
        self.sessions = sessions
        self.log = log or logging.getLogger("nbjobs.job_service")
        #: each queued job's place, worked out again after each change of the queue
        self.positions = QueuePositions(sessions)
        #: a record as the API shows it, with the runner's and the backend's latest word
        #: each started job's status file, read once however many ask (see live.py)
        self.runners = RunnerStatuses(self.log)
        self.view = JobView(backend, self.positions, self.runners.latest)
        #: database work runs here, never on the event loop (which keeps answering)
        self._db_threads = ThreadPoolExecutor(
            max_workers=max(1, database_threads), thread_name_prefix="nbjobs-db"
        )
        #: what a caller asks to see runs on threads of its own: a list or a job's details
        #: never waits behind a burst of submits and the dispatcher's rounds
        self._read_threads = ThreadPoolExecutor(
            max_workers=max(1, read_threads), thread_name_prefix="nbjobs-db-read"
        )
        #: and go first: the database threads' next piece of work waits for them a moment
        self._reads_first = ReadsFirst()
        self._seq = 0
        self._seq_lock = threading.Lock()
        self.stopping = False
        #: what Prometheus scrapes beside the database (see metrics.py)
        self.metrics = ServiceMetrics()
        #: what the collaborators share (they get this, not the service)
        self.ctx = Context(
            config,
            sessions,
            self.in_db,
            self.log,
            backend,
            self.classes,
            self.metrics,
            self.runners,
        )
        #: teachers' extra GPU-hours for their students, and every quota rule with them
        self.budgets = Budgets(self.ctx)
        self.quotas = Quotas(self.ctx, self.budgets)
        #: one dispatcher per database: taken at start, given back at stop
        self.lease = lease or DispatcherLease(sessions, log=self.log)
        self.dispatcher = Dispatcher(
            self.ctx,
            lease=self.lease,
            positions=self.positions,
            quotas=self.quotas,
            concurrent_starts=concurrent_starts,
        )
        self.follower = self.dispatcher.follower
        #: the started jobs' GPU telemetry, kept as series (see telemetry.py)
        self.telemetry = TelemetryCollector(self.ctx, self._visible)
        self.audit = Audit(self.ctx, self._visible, self.folder_for)
        #: warns about (and stops) jobs that leave their GPUs idle (see reclaim.py)
        self.reclaimer = IdleReclaimer(self.ctx, self.telemetry)
        self.approvals = ApprovalExpiry(self.ctx)
        #: approving and rejecting requests
        self.decisions = Decisions(
            self.ctx, self.view, self.positions.changed, self.dispatcher.wake, self.get
        )
        self.definitions = Definitions(self.ctx, self.check_request)
        self.ticker = Ticker(self.ctx, self.definitions, self.submit)
        self.notify_settings = NotifySettingsStore(self.ctx)
        #: invitations the hub makes for the names rosters and admins add (invitations.py)
        self.invitations = Invitations(self.ctx, self.classes.hub)
        self.classes.invite_new = self.invitations.for_new_users
        self.outbox = Outbox(self.ctx)
        #: what changed, pushed to the open ``api/events`` streams (see events.py); it
        #: watches while one is open, whether or not this service dispatches
        self.feed = ChangeFeed(self.ctx, self.positions)
        #: the inputs of long-ended jobs removed, users' job files measured and capped
        self.retention = Retention(self.ctx, self.folder_for)
        #: ended jobs' GPU time summed per day, for usage reports over months
        self.usage_sums = UsageRoller(self.ctx)
        #: accounts that pay for jobs on priced flavors: holds, charges, grants
        self.credits = Credits(self.ctx)
        #: a user deleted in the hub, or made again under the same name, retired: the next
        #: person of the name finds nothing of the earlier one's
        self.departures = Departures(
            self.ctx,
            folder_for=self.folder_for,
            cancel=lambda job_id, why: self.cancel(Caller(DEPARTURES_BY, admin=True), job_id, why),
            charge=self.credits.charge,
            after=self.budgets.load,
        )
        #: what works in the background while this service holds the lease, in the order
        #: it starts (and halts); it stops in the reverse order
        self.loops: list[Loop] = [
            self.dispatcher,
            self.telemetry,
            self.reclaimer,
            self.approvals,
            self.outbox,
            self.retention,
            self.usage_sums,
            self.credits,
            self.departures,
            self.ticker,
        ]
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
        self._seq = await self.in_db(self._last_seq)
        await drains.apply(self.ctx)  # before the first job is placed
        await self.in_db(self.budgets.load)
        await self.dispatcher.recover()
        for loop in self.loops:
            loop.run()

    def _last_seq(self) -> int:
        with self.sessions() as db:
            return db.scalar(select(func.max(JobRecord.seq))) or 0

    async def stop(self) -> None:
        """Stop scheduling; running jobs go on (a restart adopts them).

        Takes seconds whatever the backend is doing: starts in flight get a few
        seconds to be recorded (one that is not is queued again at the next start),
        the followers are dropped, and no database call is waited on for longer.
        """
        self.stopping = True
        self.dispatcher.halt()  # starts nothing more from now on (its loop stops below)
        await self.feed.close()
        for loop in reversed(self.loops):  # what starts runs stops first (the ticker)
            await loop.stop()
        self.outbox.close()
        await self.follower.stop()
        await self.backend.shutdown()
        await self.lease.aclose()
        self._db_threads.shutdown(wait=False, cancel_futures=True)
        self._read_threads.shutdown(wait=False, cancel_futures=True)
        # Its connections go with it (a PostgreSQL server counts them against its
        # max_connections; a service started again opens its own): once the calls still
        # running have handed theirs back, a few seconds at most.
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.to_thread(self._threads_done), STOP_WAIT)
        engine_of(self.sessions).dispose()

    def _threads_done(self) -> None:
        self._db_threads.shutdown(wait=True)
        self._read_threads.shutdown(wait=True)

    def _lease_lost(self) -> None:
        """Another service dispatches from this database now: stop scheduling at once."""
        self.stopping = True
        for loop in self.loops:
            loop.halt()
        if self.on_lease_lost is not None:
            self.on_lease_lost()

    async def in_db(self, func: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run ``func`` (database work) on the service's database threads and return
        what it returns: the event loop meanwhile answers other requests."""
        loop = asyncio.get_running_loop()
        work = functools.partial(self._reads_first.after_reads, func, *args, **kwargs)
        return await loop.run_in_executor(self._db_threads, work)

    async def read_db(self, func: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """As :meth:`in_db`, on the threads kept for what callers ask to see (the API's
        GETs): 200 submits queued on the database threads made a list wait 200 ms
        behind them (bench/dispatch_bench.py)."""
        loop = asyncio.get_running_loop()
        work = functools.partial(self._reads_first.read, func, *args, **kwargs)
        return await loop.run_in_executor(self._read_threads, work)

    async def schedule(self) -> None:
        """One pass of the dispatcher over the queue (see :class:`~.dispatch.Dispatcher`)."""
        await self.dispatcher.schedule()

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
        """The caller's quota (:meth:`.quotas.Quotas.of`)."""
        return self.quotas.of(caller)

    async def flavors(self, caller: Caller) -> list[FlavorInfo]:
        """Flavors the caller may use, with free capacity and queue length now (the
        queue counted on the database threads, the capacity read on the event loop,
        which keeps the backend's view)."""
        return self.flavors_for(caller, await self.in_db(self._queued_per_flavor))

    def _queued_per_flavor(self) -> Counter[str]:
        with self.sessions() as db:
            return Counter(
                db.scalars(
                    select(JobRecord.flavor).where(JobRecord.state == JobState.QUEUED.value)
                ).all()
            )

    def flavors_for(self, caller: Caller, queued: Counter[str] | None = None) -> list[FlavorInfo]:
        """Flavors the caller may use, with free capacity and queue length now."""
        if queued is None:
            queued = self._queued_per_flavor()
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
                    nodes=f.nodes,
                    gpu_type=f.gpu_type,
                    shared=f.shares_a_gpu,
                    cpu=f.cpu,
                    memory=f.memory,
                    time_limit=f.time_limit,
                    available=self.backend.free_for(f),
                    queued=queued.get(f.name, 0),
                    unavailable=self.backend.can_ever_fit(f),
                    free_gpus=gpus[0] if gpus else None,
                    total_gpus=gpus[1] if gpus else None,
                    fraction=f.fraction,
                    credits_per_hour=round(f.gpu_equivalents * f.cost_per_gpu_hour, 4)
                    if self.credits.enabled and f.cost_per_gpu_hour and f.gpus
                    else None,
                    maintenance=self.backend.maintenance(f),
                    simulated=bool(f.gpus) and self.backend.simulates_gpus,
                    kernels=self.backend.kernels(f),
                    placement=self.backend.placement(
                        f, self.classes.queue_for(caller.name, f.name)
                    ),
                )
            )
        return infos

    # -- submit ------------------------------------------------------------------

    async def submit(
        self,
        caller: Caller,
        request: SubmitRequest,
        rerun_of: str | None = None,
        *,
        definition: tuple[str, str] | None = None,
    ) -> Job:
        """Check, snapshot and queue a notebook; return the queued job."""
        if not caller.may_submit:
            raise Forbidden(
                "you may not submit jobs here (your hub account lacks the custom:nbjobs:submit "
                "scope); ask your admin"
            )
        flavor, kernels = self.check_request(caller, request, placeable=True)
        kind = job_kind(request)

        # The cheap checks first: a refused submit costs no read of the notebook.
        await self.in_db(self._check_quota, caller, flavor)
        folder = self.folder_for(caller.name)
        await self.retention.check_room(caller.name, folder)
        job_id = uuid.uuid4().hex[:12]
        jobdir = job_folder(folder, job_id)
        if kind == "notebook":
            source = await self._snapshot(
                caller.name,
                folder,
                request.path,
                jobdir,
                None if request.kernel else (kernels, flavor),
            )
        else:
            source = await asyncio.to_thread(self._snapshot_script, folder, request, jobdir)
        try:
            job = await self.in_db(
                self._record_submit,
                caller,
                request,
                flavor,
                folder,
                source,
                jobdir,
                job_id,
                rerun_of,
                definition,
            )
        except BaseException:
            remove_job_dir(jobdir)  # no job folder without its job
            raise
        self.dispatcher.wake()
        return job

    def check_request(
        self, caller: Caller, request: SubmitRequest, *, placeable: bool
    ) -> tuple[Flavor, list[str] | None]:
        """What a submission is refused for before anything is read: a flavor not the
        caller's (or, with ``placeable``, one that can never run here for them), a
        priority from a non-admin, a time limit over the flavor's, a kernel the flavor
        lacks. Returns the flavor and its kernels (None: not known, or no notebook).
        A submit checks this; so does saving a job definition."""
        flavor = self.config.flavor(request.flavor)
        if flavor is None or not self.may_use(caller, flavor):
            names = ", ".join(f.name for f in self.config.flavors if self.may_use(caller, f))
            raise Forbidden(
                f"you may not use flavor {request.flavor!r}; your flavors are: {names or 'none'}"
            )
        if request.nodes is not None and request.nodes != flavor.nodes:
            spanning = ", ".join(
                f.name
                for f in self.config.flavors
                if f.nodes == request.nodes and self.may_use(caller, f)
            )
            raise Invalid(
                f"flavor {flavor.name!r} runs a job on {nodes_words(flavor.nodes)}, not "
                f"{request.nodes}; "
                + (
                    f"your flavors on {nodes_words(request.nodes)}: {spanning}"
                    if spanning
                    else f"none of your flavors runs on {nodes_words(request.nodes)}"
                )
            )
        if placeable:
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
        kernels = self.backend.kernels(flavor) if job_kind(request) == "notebook" else None
        check_chosen_kernel(request.kernel, kernels, flavor)
        return flavor, kernels

    def _check_quota(self, caller: Caller, flavor: Flavor) -> None:
        with self.sessions() as db:
            self.quotas.check_submit(db, caller, flavor)

    async def _snapshot(
        self,
        user: str,
        folder: Path,
        path: str,
        jobdir: Path,
        kernel_check: tuple[list[str] | None, Flavor] | None = None,
    ) -> Path:
        """Read the notebook ``path`` once, check those bytes and make the job's folder
        with exactly those bytes as its snapshot; return where the notebook really is.

        With ``kernel_check`` (the kernels a flavor's jobs have, and the flavor), a
        notebook whose own kernel is not among them is refused here, not by a job that
        would fail on its first line.

        The read does not follow links out of the user's folder and checks the very
        descriptor it reads (see :func:`~nbjobs.storage.open_notebook`): a link
        swapped meanwhile cannot make the snapshot someone else's notebook. The check
        takes its turn (:class:`~.notebooks.NotebookChecks`): a big notebook is read
        only once there is room for it, and parsed outside the service.
        """
        limit = self.config.limits.notebook
        try:
            opened = await asyncio.to_thread(open_notebook, folder, path, limit=limit)
        except NotebookTooLarge as exc:
            raise _too_large(path, exc.size, limit) from None
        except PathRefused as exc:
            raise Invalid(str(exc)) from None
        with opened:
            async with self.notebooks.turn(user, opened.size) as turn:
                try:
                    notebook = await asyncio.to_thread(opened.read)
                except NotebookTooLarge as exc:
                    raise _too_large(path, exc.size, limit) from None
                opened.close()
                found = await turn.check(notebook.data, path)
                if kernel_check is not None:
                    check_notebook_kernel(found.kernel, path, *kernel_check)
                await asyncio.to_thread(
                    self._make_job_dir,
                    folder,
                    path,
                    jobdir,
                    {snapshot_name("notebook", notebook.path): notebook.data},
                )
                source = notebook.path
                del notebook  # its bytes go before the next notebook is let in
        return source

    def _snapshot_script(self, folder: Path, request: SubmitRequest, jobdir: Path) -> Path:
        """The job's folder for a script or a command (:mod:`.scripts`); where it is."""
        source, files = read_script(folder, request, self.config.limits.notebook)
        self._make_job_dir(folder, request.path, jobdir, files)
        return source

    def _make_job_dir(self, folder: Path, path: str, jobdir: Path, files: dict[str, bytes]) -> None:
        """The job's folder with ``files`` in it, or a refusal that says what to do."""
        try:
            make_job_dir(jobdir, files)
            self.retention.note_written(folder, sum(len(data) for data in files.values()))
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
        definition: tuple[str, str] | None = None,
    ) -> Job:
        """Queue the job in the database: its quota checked again, now in the same
        transaction (other submits of the caller's may have been queued meanwhile)."""
        pending = needs_approval(flavor, caller)
        with self.sessions() as db:
            self.quotas.check_submit(db, caller, flavor)
            time_limit = request.time_limit or flavor.time_limit
            # its worst case held on its account, under the account's lock until the
            # commit below: submissions at once never overdraw it
            held = self.credits.hold(db, caller, flavor, time_limit)
            now = utcnow()
            kind = job_kind(request)
            snapshot = jobdir / snapshot_name(kind, source)
            outputs = self.config.outputs
            in_folder = (request.outputs or outputs.location) == "folder"
            output = output_path_for(
                source,
                job_id,
                now,
                outputs.folder if in_folder else None,
                suffix=".ipynb" if kind == "notebook" else ".log",
            )
            with self._seq_lock:  # submits are recorded on several threads at once
                self._seq += 1
                seq = self._seq
            record = JobRecord(
                id=job_id,
                seq=seq,
                user=caller.name,
                groups=sorted(caller.groups),
                name=(request.name or "").strip()
                or (_first_words(request.command) if request.command else source.stem),
                flavor=flavor.name,
                state=(JobState.PENDING_APPROVAL if pending else JobState.QUEUED).value,
                waiting_reason=waiting_for_approval(self.classes, caller, flavor)
                if pending
                else None,
                priority=request.priority or 0,
                # a command's path is the folder it runs in, as the user gave it
                path=relative_to_user(folder, source.parent if request.command else source),
                output_path=relative_to_user(folder, output),
                source_file=str(source),
                snapshot_file=str(snapshot),
                output_file=str(output),
                job_dir=str(jobdir),
                parameters=request.parameters,
                time_limit=time_limit,
                credit_account=held[0] if held else None,
                credit_hold=held[1] if held else None,
                credit_price=held[2] if held else None,
                gpu_count=flavor.gpu_count,
                nodes=flavor.nodes if flavor.nodes > 1 else None,
                gpu_equivalents=flavor.gpu_equivalents,
                gpus=[],
                submitted_at=now,
                rerun_of=rerun_of,
                definition_id=definition[0] if definition else None,
                definition_run=definition[1] if definition else None,
                kernel=request.kernel,
                html=int(outputs.html if request.html is None else request.html)
                if kind == "notebook"
                else 0,
                kind=None if kind == "notebook" else kind,
                command=request.command,
            )
            db.add(record)
            db.commit()
            self.log.info(
                "job %s: %s by %s (%s, %s)",
                job_id,
                "waiting for approval, submitted" if pending else "queued",
                caller.name,
                record.path,
                flavor.name,
            )
            return self.view.model(db, record)

    # -- read --------------------------------------------------------------------

    def _visible(
        self, caller: Caller, record: JobRecord | None, job_id: str, *, own: bool = False
    ) -> JobRecord:
        """The record if the caller may see it (``own``: only its owner or an admin; the
        owner's teacher, who sees it, is told so)."""
        if record is not None and joblist.may_see(caller, self.classes, record.user):
            if not own or record.user == caller.name or caller.admin:
                return record
            # the owner's teacher: sees it, is told what only its owner does
            raise Forbidden(
                f"job {job_id} belongs to {record.user}: only its owner (or an admin) does that"
            )
        raise NotFound(f"no job {job_id!r} of yours; `nbjobs list` shows your jobs")

    def get(self, caller: Caller, job_id: str) -> Job:
        """One job, with its live progress."""
        with self.sessions() as db:
            record = self._visible(caller, db.get(JobRecord, job_id), job_id)
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
            caller, self.classes, scope=scope, user=user, class_name=class_name
        )
        for condition in (owners, joblist.search_condition(q)):
            if condition is not None:
                query = query.where(condition)
        if flavor:
            query = query.where(JobRecord.flavor == flavor)
        with self.sessions() as db:
            if states:
                if {JobState.STARTING.value, JobState.RUNNING.value} & set(states):
                    self._note_running(db)
                query = query.where(self._state_filter(db, set(states)))
            total = db.scalar(select(func.count()).select_from(query.subquery())) or 0
            if before is not None:
                query = query.where(joblist.before_condition(db, caller, self.classes, before))
            newest_first = query.order_by(JobRecord.seq.desc())
            # The page and one job past it, which says that more follow: a query less
            # per page (a list during a burst of submits waits for each one's turn).
            page = newest_first.limit(limit + 1).offset(offset)
            records = self._readable_records(db, page, "a job list")
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
                    self.log.warning("queue positions left out of a job list: %s", exc)
            jobs = []
            for record in records:
                try:
                    jobs.append(self.view.model(db, record, positions))
                except DamagedRecord as exc:
                    self.log.warning("%s; left out of a job list", exc.message)
        # A damaged record still counts in ``total``: it is there, only not shown.
        return JobList(jobs=jobs, total=total, limit=limit, offset=offset, more=more)

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
            live = self.runners.latest(job_id, job_dir)
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
        with self.sessions() as db:
            record = self._visible(caller, db.get(JobRecord, job_id), job_id)
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
        with self.sessions() as db:
            record = db.get(JobRecord, job_id)
            return record is None or JobState(record.state).final

    def usage(
        self,
        caller: Caller,
        *,
        since: str | None = None,
        until: str | None = None,
        by: str = "user",
    ) -> Usage:
        """Jobs and GPU-hours per user and group this period, and GPU-hours allocated
        and busy per day over the days ``since`` to ``until`` broken down ``by`` user,
        group, class, flavor or node (see :mod:`.metering`). Admins see every job,
        teachers their students' and their own, everyone else their own."""
        period = self.config.quotas.default.period
        now = utcnow()
        visible: set[str] | None = None
        if not caller.admin:
            # a teacher also sees their students
            students = {s for c in self.classes.taught_by(caller.name) for s in c.students}
            visible = {caller.name, *students}
        classes = self.classes.all() if caller.admin else self._classes_seen_by(caller)
        period_since = now - PERIODS[period]
        with self.sessions() as db:
            try:
                report = usage.report(
                    db,
                    config=self.config,
                    classes=classes,
                    users=visible,
                    since=since,
                    until=until,
                    by=by,
                    now=now,
                    default_days=PERIODS[period].days,
                )
            except metering.BadRange as exc:
                raise Invalid(str(exc)) from None
            query = select(JobRecord).where(
                (JobRecord.finished_at.is_(None)) | (JobRecord.finished_at >= period_since)
            )
            if visible is not None:
                query = query.where(JobRecord.user.in_(visible))
            records = self._readable_records(db, query, "the usage")
        users: dict[str, UsageRow] = {}
        groups: dict[str, UsageRow] = {}
        for r in records:
            problem = _usage_problem(r)
            if problem is not None:
                self.log.warning("%s; left out of the usage", DamagedRecord(r.id, problem).message)
                continue
            held = gpu_hours_held(r.started_at, r.finished_at, r.charged_gpus, period_since, now)
            hours = held if r.gpu_count else 0.0
            for name, table in [(r.user, users)] + [(g, groups) for g in r.groups]:
                row = table.setdefault(
                    name, UsageRow(name=name, jobs=0, running=0, queued=0, gpu_hours=0)
                )
                row.jobs += 1
                row.running += r.state in ACTIVE_VALUES
                row.queued += r.state == JobState.QUEUED.value
                row.gpu_hours = round(row.gpu_hours + hours, 4)
        user_groups = {r.user: frozenset(r.groups or []) for r in records}
        for row in users.values():
            quota = self.quota_for(Caller(row.name, user_groups.get(row.name, frozenset())))
            if quota.gpu_hours is not None and quota.period == period:
                row.gpu_hours_limit = quota.gpu_hours
        order = lambda rows: sorted(rows.values(), key=lambda u: (-u.gpu_hours, u.name))  # noqa: E731
        return Usage(
            since=period_since,
            period=period,
            users=order(users),
            groups=order(groups),
            **report,
        )

    def _classes_seen_by(self, caller: Caller) -> list[ClassInfo]:
        """The classes whose usage a caller may see: those they teach or are in."""
        seen = {c.name: c for c in self.classes.taught_by(caller.name)}
        for c in self.classes.of_student(caller.name):
            seen.setdefault(c.name, c)
        return list(seen.values())

    # -- change ------------------------------------------------------------------

    async def cancel(self, caller: Caller, job_id: str, why: str | None = None) -> Job:
        """Cancel a queued job at once; ask a running one to stop (it keeps its output).

        A cancel always wins: one that arrives while the backend is starting the job
        is seen when the start is recorded, and what was started is stopped then.
        """
        job, ref, job_dir = await self.in_db(self._ask_cancel, caller, job_id, why)
        if job is not None:
            self.dispatcher.wake()
            return job
        # the runner's banner and status then say who stopped it, not "SIGTERM"
        said = f"cancelled by {caller.name}" + (f": {why}" if why else "")
        try:
            await asyncio.to_thread(leave_stop_reason, job_dir, said)
        except OSError as exc:
            self.log.warning("job %s: the stop reason not left for its runner: %s", job_id, exc)
        launch = self.dispatcher.launches.get(job_id)
        if launch is not None:
            # being started: the dispatcher stops it as soon as the start is recorded
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.shield(launch)
        elif ref:
            await self.backend.cancel(ref)
        follower = self.follower.task_of(job_id)
        if follower is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(follower)
        return await self.in_db(self.get, caller, job_id)

    def _ask_cancel(
        self, caller: Caller, job_id: str, why: str | None = None
    ) -> tuple[Job | None, str | None, str]:
        """Record the cancel: a queued job's at once (the job, returned); a started one's
        as asked (its backend handle, if it has one yet, and its folder)."""
        with self.sessions() as db:
            record = self._visible(caller, db.get(JobRecord, job_id), job_id)
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
                record = self._visible(caller, db.get(JobRecord, job_id), job_id)
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
        request, owner = await self.in_db(self._rerun_request, caller, job_id)
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
            self.log.info("job %s: re-run by %s on behalf of %s", job_id, caller.name, owner.name)
        if not caller.may_submit:
            as_ = caller  # refused in submit, with the reason
        return await self.submit(as_, request, rerun_of=job_id)

    def _rerun_request(self, caller: Caller, job_id: str) -> tuple[SubmitRequest, Caller]:
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
        with self.sessions() as db:
            record = self._visible(caller, db.get(JobRecord, job_id), job_id, own=True)
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
            self.log.warning("job %s: its folder %s was not removed: %s", job_id, job_dir, exc)

    def update(self, caller: Caller, job_id: str, request: UpdateRequest) -> Job:
        """Admins: change a queued job's priority (bump it up the queue)."""
        if not caller.admin:
            raise Forbidden("only admins may change a job's priority")
        with self.sessions() as db:
            record = self._visible(caller, db.get(JobRecord, job_id), job_id)
            if record.state != JobState.QUEUED.value:
                raise Conflict(f"job {job_id} is {record.state}; only a queued job can move")
            record.priority = request.priority
            record.priority_set_by, record.priority_set_at = caller.name, utcnow()
            db.commit()
            self.log.info("job %s: priority %d, set by %s", job_id, request.priority, caller.name)
            self.dispatcher.wake()
            return self.view.model(db, record)

    # -- views -------------------------------------------------------------------


def _first_words(command: str, width: int = 40) -> str:
    """A command's name in the Jobs list: its first line, shortened."""
    line = command.strip().splitlines()[0] if command.strip() else "command"
    return line if len(line) <= width else line[: width - 1] + "…"


def _too_large(path: str, size: int, limit: int) -> TooLarge:
    return TooLarge(
        f"the notebook {path!r} is {_size(size)}, more than the {_size(limit)} "
        "this service takes; clear its outputs (Edit > Clear Outputs of All Cells) "
        "and save it, or ask your admin to raise limits.notebook"
    )


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

"""What nbjobs keeps in users' folders, and for how long.

Each job has a folder in its owner's ``.nbjobs/jobs/<id>/``: the input it ran (a copy of
the notebook or script), its status, log and telemetry. Nothing used to remove those, so
30 submit-and-cancel pairs of a 5 MiB notebook grew a folder by 150 MiB. Now:

- an ended job's input goes ``storage.retention`` after it ended (one that never started,
  at once): a round here every few minutes, in the service that holds the lease. The
  log, status and output stay while the job is listed; a re-run reads the notebook anew;
- a deleted job's folder goes with it (:meth:`~.service.JobService.forget`);
- a submit is refused (507) while the user's ``.nbjobs`` holds more than
  ``storage.max_job_files``, saying how much and what to do;
- a job is handed the room left under that cap as it starts (:class:`StartRooms`):
  its runner stops it where its log, or what it writes there itself, would pass the cap
  ("no room left in your folder", see ``job_runner/folder_room.py``);
- ``GET api/storage`` (``nbjobs storage``, the dashboard's Storage view) says how much
  each user's ``.nbjobs`` holds: users their own, admins everyone's.

Files are removed and measured without following links (:mod:`nbjobs.storage`), and no
transaction is open while they are.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from nbjobs.job_runner.folder_room import WATCH_INTERVAL
from sqlalchemy import func, select, update

from nbjobs.models import FINAL_STATES, StorageReport, UserStorage
from nbjobs.storage import (
    JOBS_DIR,
    free_space,
    job_files_size,
    remove_from_job_dir,
    shown_folder,
)
from nbjobs.units import format_size

from .backends.base import JobFilesRoom
from .db import ACTIVE_VALUES, JobRecord, utcnow
from .errors import Caller, Forbidden, InsufficientStorage
from .periodic import InRounds, Periodic

if TYPE_CHECKING:
    from .context import Context

#: seconds between two rounds of removing old inputs
ROUND = 300.0
#: inputs removed per round, at most (the next round takes the rest)
PER_ROUND = 500
#: how long an admin's report of every user's space is reused
REPORT_FRESH = 60.0
#: seconds a user's measured job files (plus what submits wrote since) stand for them at
#: submit while under the cap and none of their jobs ended since; over the cap, they are
#: measured again before a refusal. What goes away meanwhile only makes the figure high.
ROOM_FRESH = 5.0
#: the same while a job of theirs runs: its log grows (within the room its runner keeps
#: to itself), so the figure stands a second (measured again at every submit instead, a
#: burst of 200 submits walked a growing folder 200 times). A job that ended since the
#: figure was measured makes it stale at once (its last writes are done).
RUNNING_FRESH = 1.0


class Retention(InRounds):
    """Removes the inputs of jobs that ended long enough ago; measures users' space."""

    def __init__(
        self,
        ctx: Context,
        folder_for: Callable[[str], Path],
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.ctx = ctx
        self._folder_for = folder_for
        self.clock = clock
        self._rounds = Periodic(
            self.sweep, lambda: ROUND, what="removing old job inputs", log=lambda: ctx.log
        )
        self._report: tuple[float, list[UserStorage]] | None = None
        #: each user folder's job files as last measured: (when, bytes, when a job of
        #: theirs had last ended), plus what
        #: submits wrote since. A burst of 200 submits walked a user's .nbjobs 200 times.
        self._held: dict[str, tuple[float, int, datetime | None]] = {}

    # -- removing ------------------------------------------------------------------------

    async def sweep(self) -> int:
        """One round: remove the inputs that are due; how many were."""
        due = await self.ctx.in_db(self._due)
        freed = 0
        for _job_id, job_dir, snapshot in due:
            freed += await asyncio.to_thread(
                remove_from_job_dir, Path(job_dir), Path(snapshot).name
            )
        if due:
            await self.ctx.in_db(self._mark, [job_id for job_id, _, _ in due])
            self.ctx.log.info(
                "removed the inputs of %d ended jobs (%.1f MiB)", len(due), freed / 1024**2
            )
        return len(due)

    def _due(self) -> list[tuple[str, str, str]]:
        now = self.clock()
        keep = timedelta(seconds=float(self.ctx.config.storage.retention or 0))
        with self.ctx.sessions() as db:
            rows = db.execute(
                select(JobRecord.id, JobRecord.job_dir, JobRecord.snapshot_file)
                .where(
                    JobRecord.state.in_([state.value for state in FINAL_STATES]),
                    JobRecord.finished_at.is_not(None),
                    JobRecord.input_removed_at.is_(None),
                    (JobRecord.finished_at <= now - keep) | JobRecord.started_at.is_(None),
                )
                .order_by(JobRecord.finished_at)
                .limit(PER_ROUND)
            ).all()
        return [(r.id, r.job_dir, r.snapshot_file) for r in rows]

    def _mark(self, ids: list[str]) -> None:
        with self.ctx.sessions() as db:
            db.execute(
                update(JobRecord)
                .where(JobRecord.id.in_(ids))
                .values(input_removed_at=self.clock())
                .execution_options(synchronize_session=False)
            )
            db.commit()

    # -- measuring -----------------------------------------------------------------------

    async def check_room(self, user: str, folder: Path) -> None:
        """Refuse a submit while ``user``'s job files are over ``storage.max_job_files``.
        A figure measured a moment ago (:data:`ROOM_FRESH`; :data:`RUNNING_FRESH` while a
        job of theirs runs) stands unless one of their jobs ended since."""
        limit = self.ctx.config.storage.max_job_files
        if limit is None:
            return
        known = self._held.get(str(folder))
        latest_end, running = await self.ctx.in_db(self._activity, user)
        if known is not None and known[1] < limit and known[2] == latest_end:
            age = time.monotonic() - known[0]
            if age < (RUNNING_FRESH if running else ROOM_FRESH):
                return  # measured a moment ago (with what submits wrote since) and under
        measured_at = time.monotonic()
        held = await asyncio.to_thread(job_files_size, folder)
        self._held[str(folder)] = (measured_at, held, latest_end)
        if held >= limit:
            raise InsufficientStorage(
                f"your job files (.nbjobs in your folder: inputs, logs) take {format_size(held)}, "
                f"the most each user may keep here is {format_size(limit)}; delete jobs you no "
                "longer need (the Jobs panel's Delete, or `nbjobs delete ID`) and submit "
                "again, or ask your admin to raise storage.max_job_files"
            )

    def _activity(self, user: str) -> tuple[datetime | None, bool]:
        """When a job of ``user`` last ended, and whether one runs now: their job files
        may have grown (its log, what it wrote) since they were measured."""
        with self.ctx.sessions() as db:
            latest_end = db.scalar(
                select(func.max(JobRecord.finished_at)).where(JobRecord.user == user)
            )
            running = db.scalar(
                select(JobRecord.id)
                .where(JobRecord.user == user, JobRecord.state.in_(ACTIVE_VALUES))
                .limit(1)
            )
        return latest_end, running is not None

    def note_written(self, folder: Path, size: int) -> None:
        """A submit wrote ``size`` bytes of job files under ``folder``: the running total
        check_room goes by until it measures again."""
        known = self._held.get(str(folder))
        if known is not None:
            self._held[str(folder)] = (known[0], known[1] + size, known[2])

    async def place(self, user: str) -> tuple[str, int | None]:
        """Where ``user``'s results are written, as people know it, and the bytes free
        there (read off the event loop: on NFS it is a round trip)."""
        return await asyncio.to_thread(self._place, user, self._folder_for(user))

    def _place(self, user: str, folder: Path) -> tuple[str, int | None]:
        return shown_folder(self.ctx.config.storage, user, folder), free_space(folder)

    async def report(self, caller: Caller, user: str | None = None) -> StorageReport:
        """The space users' job files take: the caller's own, or (admins) everyone's
        with jobs, or one user's."""
        if user is not None and user != caller.name and not caller.admin:
            raise Forbidden("only admins see another user's space; leave out user to see yours")
        if not caller.admin or user is not None:
            name = user or caller.name
            users = [await asyncio.to_thread(self._measure, name, await self._count(name))]
        else:
            users = await self._everyone()
        return StorageReport(
            retention_seconds=self.ctx.config.storage.retention,
            max_job_files=self.ctx.config.storage.max_job_files,
            users=users,
        )

    async def _count(self, user: str) -> int:
        def count() -> int:
            with self.ctx.sessions() as db:
                query = select(func.count()).select_from(JobRecord).where(JobRecord.user == user)
                return int(db.scalar(query) or 0)

        return int(await self.ctx.in_db(count))

    async def _everyone(self) -> list[UserStorage]:
        fresh = self._report
        if fresh is not None and time.monotonic() - fresh[0] < REPORT_FRESH:
            return fresh[1]

        def counts() -> list[tuple[str, int]]:
            with self.ctx.sessions() as db:
                rows = db.execute(
                    select(JobRecord.user, func.count()).group_by(JobRecord.user)
                ).all()
            return [(r[0], int(r[1])) for r in rows]

        users = [
            await asyncio.to_thread(self._measure, name, jobs)
            for name, jobs in await self.ctx.in_db(counts)
        ]
        users.sort(key=lambda u: (-u.job_files, u.user))
        self._report = (time.monotonic(), users)
        return users

    def _measure(self, user: str, jobs: int) -> UserStorage:
        folder = self._folder_for(user)
        where, free = self._place(user, folder)
        return UserStorage(
            user=user, jobs=jobs, job_files=job_files_size(folder), folder=where, free_bytes=free
        )


class StartRooms:
    """The room left for a starting job's owner's job files (``storage.max_job_files``
    less what their ``.nbjobs`` holds), their folder walked at most once every ``fresh``
    seconds however many of their jobs start meanwhile.

    The walk's cost grows with the jobs the owner keeps: 200 jobs started in a burst
    walked 200 growing folders each, a second of the service's CPU. A figure up to
    ``fresh`` old is as good as the runner's own: each runner measures the folder again
    every WATCH_INTERVAL seconds (job_runner/folder_room.py) and stops its job there."""

    def __init__(self, fresh: float = WATCH_INTERVAL) -> None:
        self.fresh = fresh
        self._known: dict[Path, tuple[float, int]] = {}

    def measure(self, limit: int | None, job_dir: Path) -> JobFilesRoom | None:
        """The room for the owner of the job whose folder is ``job_dir``
        (``<their folder>/.nbjobs/jobs/<id>``); None when there is no
        ``storage.max_job_files``. Call it off the event loop: it may walk their
        ``.nbjobs``."""
        if limit is None:
            return None
        folder = job_dir.parents[len(JOBS_DIR.parts)]
        now = time.monotonic()
        known = self._known.get(folder)
        if known is None or now - known[0] >= self.fresh:
            known = self._known[folder] = (now, job_files_size(folder))
            if len(self._known) > 1000:  # the owners of the last moments are enough
                for stale in [f for f, (at, _) in self._known.items() if now - at >= self.fresh]:
                    del self._known[stale]
        return JobFilesRoom(limit, known[1], folder / JOBS_DIR.parts[0])

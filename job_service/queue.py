"""The queue's order, and each queued job's place in it.

The dispatcher (:mod:`.dispatch`) starts jobs in this order and the job views show
the same order as places: one key, :func:`queue_order`, serves both. Reading what
the order depends on (:func:`fair_share`) is one query; placing thousands of
queued jobs costs tens of milliseconds and is done once per change of the queue
(:class:`QueuePositions`), not once per page view, by one thread while the others
that need it wait for its answer: in a burst of submits the queue changes with each
one, and every submit's answer and every page shows places.
"""

from __future__ import annotations

import heapq
import threading
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import case, event, func, select
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.orm import Session, sessionmaker

from nbjobs.models import JobState

from .db import ACTIVE_VALUES, CHARGED_GPUS, JobRecord

#: what a job's place in the queue depends on, besides jobs coming and going
QUEUE_FIELDS = ("state", "priority", "started_at", "user")


def queue_order(
    priority: int,
    seq: int,
    user: str,
    running_jobs: Counter[str],
    last_start: dict[str, float],
) -> tuple[int, int, float, int]:
    """The queue's sort key, best first; the dispatcher and the queue positions share it.

    Priority first (admins may raise it), then fair share: users running fewer
    jobs first, then round-robin (the user who started a job least recently),
    then submission order.
    """
    return (-priority, running_jobs[user], last_start.get(user, 0.0), seq)


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


def fair_share(
    db: Session, users: set[str] | None = None
) -> tuple[Counter[str], defaultdict[str, float], dict[str, float]]:
    """Per user (all, or ``users``): jobs running, GPUs held (fractions as what they
    are), when they last started one; one query."""
    query = _SHARES if users is None else _SHARES.where(JobRecord.user.in_(users))
    running_jobs: Counter[str] = Counter()
    running_gpus: defaultdict[str, float] = defaultdict(float)
    last_start: dict[str, float] = {}
    for user, running, gpus, last in db.execute(query):
        if running:
            running_jobs[user] = int(running)
            running_gpus[user] = float(gpus or 0)
        # Round-robin between users: whoever started a job least recently goes first.
        if last is not None:
            last_start[user] = last.timestamp()
    return running_jobs, running_gpus, last_start


class QueuePositions:
    """Each queued job's place, worked out once per change of the queue.

    A commit that added or removed a job, or changed what orders the queue (a
    state, a priority, a start), bumps :attr:`version`; the places are worked out
    again on the next read after that. Sessions run on several threads (the
    service's database pool): the version is bumped under a lock, after the
    commit, so a reader never keeps places that miss a committed change.
    """

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self.version = 0
        self._lock = threading.Lock()
        #: held while one thread works the places out; the others needing them wait
        self._working = threading.Lock()
        self._cache: tuple[int, dict[str, int]] | None = None
        event.listen(sessions, "after_flush", self._note_flush)
        event.listen(sessions, "after_commit", self._note_commit)

    def changed(self) -> None:
        """The queue moved in a way the session hooks do not see (a bulk UPDATE)."""
        with self._lock:
            self.version += 1

    def _note_flush(self, session: Session, _context: Any) -> None:
        # Bulk UPDATEs bypass this hook: the dispatcher's own (claims) call changed().
        if _moves_queue(session):
            session.info["nbjobs_queue_moved"] = True

    def _note_commit(self, session: Session) -> None:
        if session.info.pop("nbjobs_queue_moved", False):
            self.changed()

    def get(self, db: Session) -> dict[str, int]:
        """Each queued job's place: the order the dispatcher would start them in.

        The same :func:`queue_order` as the dispatcher, replayed as if each job
        started in turn (its user then runs one more job and started last), so
        bob's one job behind ada's fifty shows the place it really has: next but
        one. Quotas and capacity, which may pass a job over, are not foreseen.

        One thread at a time works them out; one that waited for it takes its answer
        when no change came meanwhile. (Four submits committed at once on the
        database threads each worked out the same places: the burst's largest cost.)
        """
        cached = self._cache
        if cached is not None and cached[0] == self.version:
            return cached[1]
        with self._working:
            cached = self._cache
            version = self.version  # read before the query: a later change is not missed
            if cached is not None and cached[0] == version:
                return cached[1]
            positions = work_out_positions(db)
            self._cache = (version, positions)
            return positions


def _moves_queue(session: Session) -> bool:
    for obj in (*session.new, *session.deleted):
        if isinstance(obj, JobRecord):
            return True
    for obj in session.dirty:
        if isinstance(obj, JobRecord):
            attrs = sa_inspect(obj).attrs
            if any(attrs[name].history.has_changes() for name in QUEUE_FIELDS):
                return True
    return False


def work_out_positions(db: Session) -> dict[str, int]:
    """The queued jobs' places, from the database now (see :meth:`QueuePositions.get`):
    two queries (the queued jobs, their owners' shares) and the replay."""
    queued = db.execute(_QUEUED).all()
    if not queued:
        return {}
    running_jobs, _, last_start = fair_share(db, {r.user for r in queued})
    clock = max([datetime.now(timezone.utc).timestamp(), *last_start.values()])
    positions: dict[str, int] = {}
    for row in in_queue_order(queued, running_jobs, last_start):
        positions[row.id] = len(positions) + 1
        running_jobs[row.user] += 1
        clock += 1.0
        last_start[row.user] = clock
    return positions


# The statements the places and the shares are read with, built once rather than at
# every change of the queue.
_QUEUED = select(JobRecord.id, JobRecord.user, JobRecord.priority, JobRecord.seq).where(
    JobRecord.state == JobState.QUEUED.value
)
_ACTIVE = JobRecord.state.in_(ACTIVE_VALUES)
_SHARES = select(
    JobRecord.user,
    func.sum(case((_ACTIVE, 1), else_=0)),
    func.sum(case((_ACTIVE, CHARGED_GPUS), else_=0)),
    func.max(JobRecord.started_at),
).group_by(JobRecord.user)

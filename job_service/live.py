"""What the runners last said: each started job's status file, read once for everyone.

A runner rewrites its job's ``status.json`` as cells run (the contract is the runner's,
``job_runner/status.py``). The job list, one job's details, the approvals view, the
metrics and the dispatcher's note of running jobs all want its latest word; reading the
file for each of them made every request cost one file read (on NFS, a round trip) per
active job, so a hundred open panels read each file a hundred times a poll.

:class:`RunnerStatuses` keeps the latest parsed status per job. The telemetry
collector puts what it reads on every pass; whoever asks gets that, and only a reading
older than ``max_age`` (default 1 s, so the panels' per-cell progress stays current when
the collector's interval is longer or it is off) is read again, once, however many ask.
A job's end removes its entry: the follower reads the final status itself.

Every read goes through :func:`read_status_bytes`: without following links, bounded.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from nbjobs.job_runner import RunStatus, StatusFileError, parse_status, rank_file

from nbjobs.storage import FilesChanged, opened_job_dir, read_file_at

#: a job's status file in its folder (the runner's ``--status-file``)
STATUS_FILE = "status.json"

#: a status file bigger than this is not the runner's (it writes a few KiB)
STATUS_FILE_LIMIT = 8 * 1024**2
#: seconds a reading serves before the file is read again
MAX_AGE = 1.0


def read_status_bytes(job_dir: str, log: logging.Logger, rank: int = 0) -> bytes | None:
    """The bytes of the status file in ``job_dir`` (of ``rank``, for a multi-node job's
    other ranks); None when there is none or it cannot be read. Read without following
    links: a status file (or a folder on the way) that the user replaced with a link to
    someone else's file is not read."""
    try:
        with opened_job_dir(Path(job_dir)) as folder:
            name = rank_file(Path(STATUS_FILE), rank).name
            return read_file_at(folder, name, limit=STATUS_FILE_LIMIT)
    except FilesChanged as exc:
        log.warning("status file of %s not read: %s", job_dir, exc)
    except (OSError, ValueError):
        pass
    return None


def parsed(data: bytes | None) -> RunStatus | None:
    """A status file's bytes as the runner's status; None when they are not one."""
    if data is None:
        return None
    try:
        return parse_status(data)
    except (StatusFileError, ValueError):
        return None


def read_status(job_dir: str, log: logging.Logger) -> RunStatus | None:
    """The runner's status file in ``job_dir``, read now; None when there is none or it
    is not a status."""
    return parsed(read_status_bytes(job_dir, log))


def read_rank_statuses(job_dir: str, nodes: int, log: logging.Logger) -> list[RunStatus | None]:
    """The status files of a multi-node job's ranks 1 to ``nodes`` - 1, read now (empty
    for a job on one node)."""
    return [parsed(read_status_bytes(job_dir, log, rank)) for rank in range(1, nodes)]


@dataclass(frozen=True)
class _Seen:
    status: RunStatus | None
    at: float


class RunnerStatuses:
    """The latest status of each started job (see the module)."""

    def __init__(
        self,
        log: logging.Logger,
        *,
        max_age: float = MAX_AGE,
        clock: Callable[[], float] = time.monotonic,
        read: Callable[[str, logging.Logger], RunStatus | None] = read_status,
    ) -> None:
        self.log = log
        self.max_age = max_age
        self.clock = clock
        self._read = read
        self._seen: dict[str, _Seen] = {}
        #: one reader per job at a time: the others wait for its reading
        self._reading: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        #: status files read (the collector's and on demand), for tests and benchmarks
        self.reads = 0

    def latest(self, job_id: str, job_dir: str) -> RunStatus | None:
        """The job's status, read again only when the kept one is older than max_age.

        Called from the database threads; several asking at once for a stale job read
        it once.
        """
        seen = self._seen.get(job_id)
        if seen is not None and self.clock() - seen.at < self.max_age:
            return seen.status
        with self._lock:
            reading = self._reading.setdefault(job_id, threading.Lock())
        with reading:
            seen = self._seen.get(job_id)  # another thread may have read it meanwhile
            if seen is not None and self.clock() - seen.at < self.max_age:
                return seen.status
            status = self._read(job_dir, self.log)
            self.reads += 1
            self._seen[job_id] = _Seen(status, self.clock())
        return status

    def put(self, job_id: str, status: RunStatus | None) -> None:
        """What was just read of the job's status file (the collector's pass)."""
        self.reads += 1
        self._seen[job_id] = _Seen(status, self.clock())

    def forget(self, job_id: str) -> None:
        """The job ended: its entry goes."""
        self._seen.pop(job_id, None)
        with self._lock:
            self._reading.pop(job_id, None)

    def keep_only(self, job_ids: Iterable[str]) -> None:
        """Drop the entries of every job not among ``job_ids`` (the started ones)."""
        keep = set(job_ids)
        for job_id in [j for j in self._seen if j not in keep]:
            self.forget(job_id)

    def states(self) -> dict[str, str]:
        """Each job's state as its runner last said (``running``), where it said one."""
        return {
            job_id: seen.status.state
            for job_id, seen in list(self._seen.items())
            if seen.status is not None and seen.status.state
        }

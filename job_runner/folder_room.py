"""``--folder-limit``: a job stops when its owner's folder has no room left for job files.

A user's job files (their ``.nbjobs``: each job's input, status and log) may take at most
what the admin allows (``storage.max_job_files``). The job service refuses a submit past
it; a check at submit alone let one job write a 50 MB log and 250 MiB of files past a
200 MiB cap. So the service also hands each job the limit, what the files took when it
started and where they are (``--folder-limit``, ``--folder-used``, ``--folder``), and
the runner:

- charges what it writes to the job's log (the cell output it copies there, its own
  lines, a script's output) before writing it: what does not fit is left out, with one
  line saying so, and the job stops: failed, "no room left in your folder (N MiB of M)";
- measures the folder every :data:`WATCH_INTERVAL` seconds, or less often when walking it
  takes long (:data:`WATCH_SHARE`), and stops the job the same way when the folder is
  past the limit: what the job's own code writes there, or a process writing to the log
  directly, is seen then.

The output notebook (or a script's output file) is still written at the end, with what
ran and where it stopped, so the result opens; ``--max-output`` bounds it. Files the
job writes elsewhere are not counted here; nor does anything here bound how fast the
job writes between two measures.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

from .log_file import WrappedStream, standing_in

#: seconds between two measures of the folder while the job runs, at least
WATCH_INTERVAL = 2.0
#: the measure waits this many times as long as it took, if that is longer
WATCH_SHARE = 50
#: how deep the measure goes below the folder (``jobs/<id>/<files>``, and a little more)
DEPTH = 4
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class FolderRoom:
    """What the job's owner may still write into their job files, and what is used."""

    def __init__(self, limit: int, used: int, folder: Path | None = None) -> None:
        self.limit = limit
        #: the folder's bytes when last known (the service's figure at start, then the
        #: runner's own measures), less what was charged before that measure began
        self._base = used
        #: bytes the runner charged (the log it wrote)
        self.charged = 0
        self.folder = folder
        self._lock = threading.Lock()
        self._full = False
        self._on_full: Callable[[], None] | None = None
        self._stopping = threading.Event()
        self._watcher: threading.Thread | None = None

    @property
    def used(self) -> int:
        """The folder's bytes as far as the runner knows now."""
        return self._base + self.charged

    @property
    def full(self) -> bool:
        """Whether the job reached the limit (its log stopped, the job is being stopped)."""
        return self._full

    def message(self) -> str:
        """Why the job stopped, for its owner: the job's error."""
        return (
            f"no room left in your folder ({_mib(self.used)} of {_mib(self.limit)} for job "
            "files); delete jobs you no longer need (the Jobs panel's Delete, or `nbjobs "
            "delete ID`) and run it again, or ask your admin to raise storage.max_job_files"
        )

    def when_full(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once (from any thread) when the limit is reached; at once if
        it was already."""
        with self._lock:
            self._on_full = callback
            already = self._full
        if already:
            callback()

    def take(self, size: int) -> int:
        """Charge up to ``size`` bytes about to be written; how many of them fit. Fewer
        than ``size``: the limit is reached (see :meth:`when_full`)."""
        with self._lock:
            if self._full:
                return 0
            fits = max(0, min(size, self.limit - self.used))
            self.charged += fits
            reached = fits < size
        if reached:
            self._reach()
        return fits

    def charge(self, size: int) -> None:
        """Count ``size`` bytes written whatever the room (the one line saying the log
        stops here)."""
        with self._lock:
            self.charged += size

    # -- measuring the folder while the job runs -----------------------------------------

    def start_watching(self, interval: float = WATCH_INTERVAL) -> None:
        """Measure the folder every ``interval`` seconds in a thread of its own, until
        :meth:`stop_watching`; nothing when no folder was given."""
        if self.folder is None or self._watcher is not None:
            return
        self._watcher = threading.Thread(
            target=self._watch, args=(interval,), name="nbjobs-room", daemon=True
        )
        self._watcher.start()

    def stop_watching(self) -> None:
        """Stop measuring (the job is ending)."""
        self._stopping.set()

    def measure(self) -> None:
        """Measure the folder now; past the limit, the job stops."""
        if self.folder is None:
            return
        with self._lock:
            charged_before = self.charged
        size = folder_size(self.folder)
        if size is None:
            return  # gone or unreadable: the figure the job has stands
        with self._lock:
            # what is charged while it measured may be counted twice: a little early
            self._base = size - charged_before
            reached = not self._full and self.used > self.limit
        if reached:
            self._reach()

    def _watch(self, interval: float) -> None:
        wait = interval
        while not self._stopping.wait(wait):
            started = time.monotonic()
            self.measure()
            if self._full:
                return
            # a folder of thousands of jobs takes a while to walk (90 ms for 1000 on a
            # busy 2-core machine): the job's own work keeps at least 98 % of a core
            wait = max(interval, (time.monotonic() - started) * WATCH_SHARE)

    def _reach(self) -> None:
        with self._lock:
            if self._full:
                return
            self._full = True
            callback = self._on_full
        if callback is not None:
            callback()


class RoomStream(WrappedStream):
    """A text stream that writes to ``stream`` while ``room`` allows: the job's log (the
    runner's stdout or stderr). Past it, one line says the log stops here."""

    def __init__(self, stream: TextIO, room: FolderRoom) -> None:
        super().__init__(stream)
        self.room = room

    def write(self, text: str) -> int:
        if not text:
            return 0
        data = text.encode("utf-8", errors="replace")
        if self.room.full:
            return len(text)  # counted by nobody: the job is being stopped for this
        fits = self.room.take(len(data))
        if fits == len(data):
            self.stream.write(text)
            return len(text)
        kept = data[:fits].decode("utf-8", errors="ignore")
        note = f"\n[nbjobs] {self.room.message()}; the log stops here\n"
        self.room.charge(len(note.encode()))
        self.stream.write(kept + note)
        with contextlib.suppress(OSError, ValueError):
            self.stream.flush()
        return len(text)

    def write_bytes(self, data: bytes) -> None:
        """Write bytes (a script's output line) within the room, as :meth:`write` does."""
        if not data or self.room.full:
            return
        fits = self.room.take(len(data))
        buffer = self.stream.buffer
        if fits == len(data):
            buffer.write(data)
        else:
            note = f"\n[nbjobs] {self.room.message()}; the log stops here\n".encode()
            self.room.charge(len(note))
            buffer.write(data[:fits] + note)
        self.stream.flush()


@contextlib.contextmanager
def room_for_log(room: FolderRoom | None) -> Iterator[None]:
    """While the block runs, ``sys.stdout`` and ``sys.stderr`` (the job's log) write only
    within ``room`` (nothing changes when it is None)."""
    if room is None:
        yield
        return
    try:
        with standing_in(lambda stream: RoomStream(stream, room)):
            yield
    finally:
        room.stop_watching()


def write_within(stream: TextIO, data: bytes) -> None:
    """Write ``data`` (bytes of a script's output) to ``stream``: within the folder's room
    when ``stream`` is a :class:`RoomStream`, else as it is."""
    if isinstance(stream, RoomStream):
        stream.write_bytes(data)
    else:
        stream.buffer.write(data)
        stream.flush()


def folder_size(folder: Path) -> int | None:
    """The bytes of the plain files in ``folder`` and :data:`DEPTH` levels below, walked
    without following a link; None when it cannot be opened."""
    try:
        fd = os.open(folder, _DIR_FLAGS)
    except OSError:
        return None
    return size_beneath(fd, DEPTH)


def size_beneath(fd: int, depth: int) -> int:
    """The bytes of the plain files in the open folder ``fd`` and ``depth`` levels below,
    walked without following a link (a file gone meanwhile is not counted); closes ``fd``.
    The job service measures a user's job files with it too (:mod:`nbjobs.storage`)."""
    total = 0
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                    if stat.S_ISREG(info.st_mode):
                        total += info.st_size
                    elif stat.S_ISDIR(info.st_mode) and depth > 0:
                        child = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
                        total += size_beneath(child, depth - 1)
                except OSError:
                    continue  # gone meanwhile, or swapped for a link: not counted
    finally:
        os.close(fd)
    return total


def _mib(size: int) -> str:
    return f"{size / 1024**2:.1f} MiB"

"""``--log-file``: the runner keeps its own copy of the job's log, in the job's folder.

In a Kubernetes pod the runner's stdout and stderr are the pod's log, which lives only
as long as the pod (a finished Job is deleted at its TTL, whoever is watching). With
``--log-file`` everything the runner prints (its own lines, the cell output it echoes,
warnings and tracebacks of its own process) also goes to a file on the shared storage,
where the job service serves it from, whether or not the service was running then.

The file is opened without following a link (``O_NOFOLLOW``), only if it is a regular
file, and appended to; a new one gets exactly ``mode``. It is made visible to readers
on other machines (an NFS server's other clients) within :data:`SYNC_INTERVAL`: a
thread fsyncs it when new text waits. It holds at most ``limit`` bytes, then a line
saying the rest is left out. A file that cannot be opened or written costs the copy,
never the job: the runner says so once on stderr and goes on.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import stat
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TextIO

#: seconds a line of the log waits, at most, before it reaches the storage server
SYNC_INTERVAL = 0.5


class LogFile:
    """An append-only copy of the runner's log in one file. Build it with :meth:`open`."""

    def __init__(self, path: Path, fd: int | None, limit: int, warn: TextIO) -> None:
        self.path = path
        self.limit = limit
        #: bytes written to the file, and left out of it past ``limit``
        self.written = 0
        self.dropped = 0
        self._fd = fd
        self._failed = fd is None
        self._warn = warn
        self._lock = threading.Lock()
        self._dirty = False
        self._stop = threading.Event()
        self._syncer: threading.Thread | None = None
        if fd is not None:
            self._syncer = threading.Thread(target=self._sync_loop, name="nbjobs-log", daemon=True)
            self._syncer.start()

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, mode: int, limit: int, warn: TextIO) -> LogFile:
        """Open (or make) the log file; one that cannot be opened is said on ``warn``,
        and the result then writes nothing."""
        target = Path(path).absolute()
        try:
            fd = _open_appending(target, mode)
        except OSError as exc:
            _say(warn, f"the log file {target} cannot be opened ({_reason(exc)}); {_GOES_ON}")
            return cls(target, None, limit, warn)
        return cls(target, fd, limit, warn)

    @property
    def usable(self) -> bool:
        """Whether text still reaches the file (it opened, and no write failed)."""
        return not self._failed

    def write(self, text: str) -> None:
        """Append ``text``; never raises."""
        if self._failed or not text:
            return
        data = text.encode("utf-8", errors="replace")
        with self._lock:
            if self._failed or self._fd is None:
                return
            room = self.limit - self.written
            if len(data) > room:
                self.dropped += len(data) - max(0, room)
                if room <= 0:
                    return
                note = (
                    f"\n[nbjobs] the log file reached its limit ({self.limit:,} bytes); the "
                    "rest of the log is left out of it (the output notebook keeps the start "
                    "and end of each cell's output)\n"
                )
                data = data[:room] + note.encode()
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(self._fd, view) :]
            except OSError as exc:
                self._fail(exc)
                return
            self.written += len(data)
            self._dirty = True

    def close(self) -> None:
        """Flush what waits to the storage and close the file."""
        self._stop.set()
        if self._syncer is not None:
            self._syncer.join(timeout=30)
            if self._syncer.is_alive():
                return  # an fsync hangs (an NFS server gone): the process's exit closes it
        with self._lock:
            fd, self._fd = self._fd, None
            if fd is None:
                return
            try:
                if self._dirty and not self._failed:
                    os.fsync(fd)
            except OSError as exc:
                self._fail(exc)
            finally:
                with contextlib.suppress(OSError):
                    os.close(fd)

    # -- inside --------------------------------------------------------------------

    def _sync_loop(self) -> None:
        # A write lands in this machine's page cache; on NFS another machine (the job
        # service following the log) sees it once it is written back, which can take
        # half a minute. An fsync when there is something new keeps that under a second.
        while not self._stop.wait(SYNC_INTERVAL):
            with self._lock:
                fd = self._fd if self._dirty and not self._failed else None
                self._dirty = False
            if fd is None:
                continue
            try:
                os.fsync(fd)  # the descriptor is closed only after this thread ends
            except OSError as exc:
                with self._lock:
                    self._fail(exc)

    def _fail(self, exc: OSError) -> None:
        """A write or sync failed: say it once, write no more (lock held)."""
        if not self._failed:
            self._failed = True
            _say(
                self._warn,
                f"the log file {self.path} could not be written ({_reason(exc)}); {_GOES_ON}",
            )


class WrappedStream(io.TextIOBase):
    """A text stream standing in for ``stream`` (``sys.stdout`` or ``sys.stderr``): a
    subclass says what :meth:`write` does; all else is the stream's."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self.stream = stream

    def writelines(self, lines: Iterable[str]) -> None:  # type: ignore[override]
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self.stream.flush()

    def fileno(self) -> int:
        return self.stream.fileno()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.stream.encoding

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return self.stream.errors

    def __getattr__(self, name: str) -> object:
        # anything else a library asks of sys.stdout (``buffer``, ``mode``): the stream's
        return getattr(self.stream, name)


@contextlib.contextmanager
def standing_in(wrap: Callable[[TextIO], WrappedStream]) -> Iterator[None]:
    """While the block runs, ``sys.stdout`` and ``sys.stderr`` are ``wrap`` of each;
    after, they are flushed (as far as they still can be) and put back."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = wrap(out), wrap(err)
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
            sys.stderr.flush()
        sys.stdout, sys.stderr = out, err


class TeeStream(WrappedStream):
    """A text stream that writes to ``stream`` and copies what it writes to ``log``."""

    def __init__(self, stream: TextIO, log: LogFile) -> None:
        super().__init__(stream)
        self.log = log

    def write(self, text: str) -> int:
        written = self.stream.write(text)
        self.log.write(text)
        return written


@contextlib.contextmanager
def teed_to(
    path: str | os.PathLike[str] | None, *, mode: int = 0o600, limit: int
) -> Iterator[LogFile | None]:
    """While the block runs, ``sys.stdout`` and ``sys.stderr`` also write to ``path``
    (nothing changes when it is None)."""
    if path is None:
        yield None
        return
    log = LogFile.open(path, mode=mode, limit=limit, warn=sys.stderr)
    if not log.usable:
        yield log
        return
    try:
        with standing_in(lambda stream: TeeStream(stream, log)):
            yield log
    finally:
        log.close()


_GOES_ON = "the job goes on, its log only on the runner's own output (kubectl logs)"


def _open_appending(path: Path, mode: int) -> int:
    """Open ``path`` for appending, never through a link and never a pipe or a device;
    a file made here gets exactly ``mode``."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    created = True
    try:
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, mode)
        except FileExistsError:
            created = False
            fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "it is a link, and links are not followed") from None
        if exc.errno == errno.ENXIO:  # a pipe nobody reads
            raise OSError(errno.ENXIO, "it is not a regular file") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "it is not a regular file")
        os.set_blocking(fd, True)
        if created:
            os.fchmod(fd, mode)  # exactly this, whatever the umask
    except BaseException:
        os.close(fd)
        raise
    return fd


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _say(stream: TextIO, text: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        print(f"[nbjobs] warning: {text}", file=stream, flush=True)

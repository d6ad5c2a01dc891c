"""The status file: how a running job tells the world where it stands.

The runner rewrites this JSON file atomically (temp file + rename) when it
starts, after every cell (a burst of quick cells is coalesced: the file is
never more than 25 ms behind) and when it ends, so a reader (the job service, a
``watch cat``) never sees half a file. The final status is fsync'ed before its
rename, like the output notebook; progress writes are not (each is superseded
within moments, and on NFS an fsync is a round trip). This module is the one
definition of the format; readers go through :func:`read_status`.

``telemetry`` (the latest sample of the job's GPUs, CPU and memory) and
``telemetry_summary`` (every sample so far) are None while the runner samples
nothing (``--telemetry-interval 0``, or before the first sample); their shape is
in :mod:`.telemetry`. A progress write comes with each sample, so they are fresh
during a long cell too.

Cell indices (``current_cell``, ``error.cell_index``) count the cells of the
notebook being executed, including the injected-parameters cell; in a final
status with an error they count the cells of the output notebook, which is
what a person opens.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

STATUS_VERSION = 1

#: beside the status file: why the job service stopped the job, left there before it
#: signals the runner (read on SIGTERM, for the status message and the output's banner)
STOP_REASON_FILE = "stop-reason.txt"

#: States a job can be in while the runner owns it. The job service adds
#: ``queued`` before the runner starts.
RUNNER_STATES = ("starting", "running", "succeeded", "failed", "timed_out", "cancelled")
FINAL_STATES = ("succeeded", "failed", "timed_out", "cancelled")


def read_stop_reason(status_path: str | os.PathLike[str] | None) -> str | None:
    """The reason the job service left beside the status file before it signalled the
    runner (its GPUs were idle, say); None when it left none. Read through no link, and
    only from a plain file, 1 KiB at most, on one line."""
    if not status_path:
        return None
    path = Path(status_path).parent / STOP_REASON_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        text = os.read(fd, 1024).decode("utf-8", "replace").strip()
    except OSError:
        return None
    finally:
        os.close(fd)
    return " ".join(text.split()) or None


class StatusFileError(ValueError):
    """The status file exists but cannot be read as a runner status."""


@dataclass
class CellError:
    """The exception that stopped the run."""

    cell_index: int
    ename: str
    evalue: str
    traceback: list[str] = field(default_factory=list)


@dataclass
class RunStatus:
    """One snapshot of a run, as written to the status file."""

    state: str
    cells_total: int = 0
    cells_done: int = 0
    current_cell: int | None = None
    started_at: str | None = None
    updated_at: str | None = None
    finished_at: str | None = None
    input_path: str = ""
    output_path: str = ""
    pid: int = 0
    host: str = ""
    exit_code: int | None = None
    message: str | None = None
    error: CellError | None = None
    #: the latest telemetry sample (see .telemetry), None when not sampling
    telemetry: dict[str, Any] | None = None
    #: the aggregate of every sample of the run so far; final in the final status
    telemetry_summary: dict[str, Any] | None = None
    version: int = STATUS_VERSION

    @property
    def finished(self) -> bool:
        """Whether the run has ended (in any way)."""
        return self.state in FINAL_STATES

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form written to the file."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.error is not None:
            data["error"] = asdict(self.error)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunStatus:
        """Build from the file's JSON; unknown keys (from newer runners) are ignored."""
        if not isinstance(data, dict):
            raise StatusFileError(f"not a runner status: a JSON {type(data).__name__}")
        if data.get("state") not in RUNNER_STATES:
            raise StatusFileError(f"not a runner status: state={data.get('state')!r}")
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        error = values.get("error")
        if error is not None:
            error_known = {f.name for f in fields(CellError)}
            values["error"] = CellError(**{k: v for k, v in error.items() if k in error_known})
        return cls(**values)


def utc_now() -> str:
    """The current time as an ISO 8601 UTC string, as the status file stores times."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def write_status(
    path: str | os.PathLike[str],
    status: RunStatus,
    *,
    durable: bool = False,
    last_resort: bool = False,
) -> None:
    """Atomically replace the status file with ``status``.

    With ``durable`` the new content is on stable storage when this returns
    (see :func:`atomic_write_text`): the runner asks for it for the final status
    only, since every progress write is superseded within moments.

    With ``last_resort``, when the atomic write fails for want of space (a full disk
    or quota: a new file no longer fits), the existing file is overwritten in place,
    in the room it already has (the error's traceback left out if that is what does
    not fit): a reader may see it half-written for an instant, but the job's last
    word gets through. Raises :class:`OSError` when even that fails.
    """
    text = status_text(status)
    try:
        atomic_write_text(Path(path), text, durable=durable)
    except OSError as exc:
        if not last_resort or exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        try:
            _overwrite_in_place(Path(path), text)
        except OSError:
            if status.error is None or not status.error.traceback:
                raise exc from None
            compact = status.to_dict()
            compact["error"]["traceback"] = []
            _overwrite_in_place(Path(path), json.dumps(compact) + "\n")


def status_text(status: RunStatus) -> str:
    """What the status file holds for ``status``, stamped now (``updated_at``)."""
    status.updated_at = utc_now()
    # One line, by the C encoder (indent would force the slow pure-Python one).
    return json.dumps(status.to_dict()) + "\n"


def _overwrite_in_place(path: Path, text: str) -> None:
    """Write ``text`` over an existing file's content, reusing its blocks, then cut the
    rest off; never follows a link, never makes a new file."""
    fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    try:
        data = text.encode("utf-8")
        offset = 0
        while offset < len(data):
            offset += os.pwrite(fd, data[offset:], offset)
        os.ftruncate(fd, len(data))
        os.fsync(fd)
    finally:
        os.close(fd)


def read_status(path: str | os.PathLike[str]) -> RunStatus | None:
    """Read a status file; ``None`` when the runner has not written one yet.

    Raises :class:`StatusFileError` when the file exists but is not a status.
    """
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StatusFileError(f"cannot read status file {path}: {exc.strerror}") from exc
    try:
        return parse_status(data)
    except StatusFileError as exc:
        raise StatusFileError(f"status file {path}: {exc}") from exc


def parse_status(data: bytes) -> RunStatus:
    """A status from the bytes of a status file (for readers that open the file
    themselves, as the job service does, without following links).

    Raises :class:`StatusFileError` when they are not a status.
    """
    try:
        status = RunStatus.from_dict(json.loads(data))
    except StatusFileError:
        raise
    except (ValueError, TypeError, AttributeError) as exc:  # not UTF-8 or JSON; odd fields
        raise StatusFileError(f"not a runner status: {exc}") from None
    counts = [status.cells_total, status.cells_done]
    optional = [status.current_cell, status.exit_code]
    if not all(_whole(n) and n >= 0 for n in counts) or not all(
        n is None or _whole(n) for n in optional
    ):
        raise StatusFileError("not a runner status: its counts are not whole numbers")
    if not isinstance(status.message, str | None):
        raise StatusFileError("not a runner status: its message is not text")
    # telemetry is a bonus: a malformed one is dropped, never the status with it
    if not isinstance(status.telemetry, dict):
        status.telemetry = None
    if not isinstance(status.telemetry_summary, dict):
        status.telemetry_summary = None
    return status


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def atomic_write_text(path: Path, text: str, *, durable: bool = False) -> None:
    """Write ``text`` to ``path`` through a temp file in the same folder and a rename.

    Readers see the old content or the new one, never a mix; a crash leaves at
    most a hidden temp file, never a truncated target. The file gets the usual
    permissions for a new file (0666 less the umask). The temp name is fixed per
    process (one writer per file), which keeps a write cheap enough to do after
    every cell; O_EXCL still refuses to follow anything planted at that name.

    With ``durable``, the temp file is fsync'ed before the rename and the folder
    after it, so that a node or NFS server crash right after the job cannot
    leave an empty or missing file where the rename said the data was.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    data = text.encode("utf-8")
    # O_EXCL: never opens what is there, a link planted at the name included (and
    # O_NOFOLLOW says so twice); the rename below replaces a link at ``path``, never
    # writes through it.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(tmp, flags, 0o666)
    except FileExistsError:  # left by a crashed write of this same process, or planted
        os.unlink(tmp)
        fd = os.open(tmp, flags, 0o666)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        _fsync_folder(path.parent)


def _fsync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable; a no-op where folders cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):  # some filesystems refuse fsync on a folder
            os.fsync(fd)
    finally:
        os.close(fd)

"""Exit codes and the errors that map to them."""

from __future__ import annotations

import errno
import os
from enum import IntEnum


class ExitCode(IntEnum):
    """How ``python -m nbjobs.job_runner`` exits; the job service maps these to job states."""

    #: every cell ran (cells tagged ``raises-exception`` may have raised)
    SUCCEEDED = 0
    #: a cell raised, or the kernel died; the output holds everything up to that cell
    FAILED = 1
    #: the input, output, parameters, kernel or options were unusable; nothing was run or written
    BAD_INPUT = 2
    #: the whole-job or per-cell time limit was reached; partial output was written
    TIMED_OUT = 3
    #: SIGTERM or SIGINT arrived (cancel, or Kubernetes' deadline); partial output was written
    CANCELLED = 4


#: The job state each exit code stands for.
STATE_FOR_EXIT_CODE = {
    ExitCode.SUCCEEDED: "succeeded",
    ExitCode.FAILED: "failed",
    ExitCode.BAD_INPUT: "failed",
    ExitCode.TIMED_OUT: "timed_out",
    ExitCode.CANCELLED: "cancelled",
}


class BadInput(ValueError):
    """Something the caller gave cannot be used; the message is one line for a person."""


#: what to do about a file the job could not write, by errno; ``{folder}`` is its folder
_WRITE_ADVICE = {
    errno.ENOSPC: "free space in your folder and re-run",
    errno.EDQUOT: "free space in your folder (or ask your admin for a larger quota) and re-run",
    errno.EACCES: "make {folder} writable again (or move the notebook to a folder that is) "
    "and re-run",
    errno.EPERM: "make {folder} writable again (or move the notebook to a folder that is) "
    "and re-run",
    errno.EROFS: "{folder} is on a read-only file system now; move the notebook to a "
    "writable folder (or ask your admin) and re-run",
    errno.ENOENT: "{folder} was removed or moved while the job ran; re-run it",
}


def could_not_write(what: str, path: str | os.PathLike[str], exc: OSError) -> str:
    """One sentence for a file of the job that could not be written: which, why, what to do.

    ``could_not_write("the output notebook", path, exc)`` reads like "could not write
    the output notebook /home/ada/a.2026-01-01T0930.0123abcd.ipynb: no space left on
    device (ENOSPC); free space in your folder and re-run".
    """
    code = exc.errno or 0
    reason = (exc.strerror or str(exc) or type(exc).__name__).lower()
    name = errno.errorcode.get(code)
    if name:
        reason += f" ({name})"
    folder = os.path.dirname(os.fspath(path)) or "."
    advice = _WRITE_ADVICE.get(code, "check the storage (or ask your admin) and re-run")
    return f"could not write {what} {os.fspath(path)}: {reason}; {advice.format(folder=folder)}"


def positive_seconds(value: float | None, what: str) -> float | None:
    """A time limit from the command line: None (no limit) or more than 0 seconds;
    :class:`BadInput` that says so otherwise."""
    if value is None:
        return None
    if value <= 0:
        raise BadInput(f"{what} must be a positive number of seconds, not {value}")
    return float(value)

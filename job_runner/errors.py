"""Exit codes and the errors that map to them."""

from __future__ import annotations

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

"""nbjobs.job_runner: execute one notebook as a job.

The program inside every nbjobs job, on a GPU node or as a local process::

    python -m nbjobs.job_runner INPUT OUTPUT [--parameters JSON|FILE] [-p NAME VALUE ...]
        [--kernel NAME] [--timeout S] [--cell-timeout S] [--status-file FILE] [--cwd DIR]
        [--max-cell-output SIZE] [--max-output SIZE] [--max-log-output SIZE]
        [--log-file FILE [--log-file-mode OCTAL]] [--telemetry-interval SECONDS]

It needs only nbclient and nbformat (and a kernel), so any GPU image can carry
it with ``pip install nbjobs``; it imports nothing else of nbjobs.

Public API: :func:`run_notebook`, :class:`RunResult`, :class:`ExitCode`,
:class:`BadInput`, and the status file's :class:`RunStatus`, :func:`read_status`,
:func:`parse_status` (from bytes a reader opened itself) and :class:`StatusFileError`;
:func:`parse_notebook` reads a notebook the way the runner does (nbformat 4.5, repairs
said), for the job service's check at submit; :func:`rank_file`, :func:`rendezvous_env`
and :data:`RANK_ENV` say what a rank of a multi-node job reads and writes (:mod:`.ranks`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import STATE_FOR_EXIT_CODE, BadInput, ExitCode
from .ranks import RANK_ENV, RANK_VARIABLES, rank_file, rendezvous_env
from .status import (
    FINAL_STATES,
    CellError,
    RunStatus,
    StatusFileError,
    parse_status,
    read_status,
)

if TYPE_CHECKING:
    from .execute import RunResult, run_notebook
    from .reading import parse_notebook


def __getattr__(name: str) -> Any:
    # The executor (nbclient, nbformat, jupyter_client) loads on first use: the job
    # service reads status files through this package and needs none of it.
    if name in ("RunResult", "run_notebook"):
        from . import execute

        return getattr(execute, name)
    if name == "parse_notebook":  # nbformat only: what the job service checks at submit
        from .reading import parse_notebook

        return parse_notebook
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "FINAL_STATES",
    "RANK_ENV",
    "RANK_VARIABLES",
    "STATE_FOR_EXIT_CODE",
    "BadInput",
    "CellError",
    "ExitCode",
    "RunResult",
    "RunStatus",
    "StatusFileError",
    "parse_notebook",
    "parse_status",
    "rank_file",
    "read_status",
    "rendezvous_env",
    "run_notebook",
]

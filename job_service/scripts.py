"""Scripts and commands as jobs: what a submission of ``train.py``, ``prepare.sh`` or a
shell command runs, and where its output (its log) goes.

A script is read once, safely (as a notebook is: no link out of the user's folder), and
its bytes become the job's snapshot (``input.py``, ``input.sh``). A command is written
into the job's folder as ``command.sh`` and run by bash in the folder the submission
names, so it never appears on a command line (``ps`` shows command lines to every local
user). Either way the runner runs it with ``--script``; its output goes to a ``.log``
next to the script (or the folder), named like a notebook's result.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Literal

from nbjobs.models import SubmitRequest
from nbjobs.storage import (
    JOB_SUFFIXES,
    NotebookTooLarge,
    PathRefused,
    read_notebook,
    resolve_folder,
)

from .errors import Invalid, TooLarge

Kind = Literal["notebook", "script", "command"]
#: a command's snapshot in the job's folder
COMMAND_FILE = "command.sh"


def snapshot_name(kind: Kind, source: Path) -> str:
    """The snapshot's name in the job's folder: ``input.ipynb``, ``input.py``,
    ``input.sh`` (after the source), or :data:`COMMAND_FILE`."""
    return COMMAND_FILE if kind == "command" else f"input{source.suffix}"


def job_kind(request: SubmitRequest) -> Kind:
    """What the submission runs: a command, a script (by its suffix), or a notebook."""
    if request.command is not None:
        return "command"
    # anything but a notebook is read as a script, which says what may run
    return "notebook" if PurePosixPath(request.path).suffix == ".ipynb" else "script"


def read_script(folder: Path, request: SubmitRequest, limit: int) -> tuple[Path, dict[str, bytes]]:
    """Where the script (or the command's folder) is, and the files of the job's folder."""
    try:
        if request.command is not None:
            where = resolve_folder(folder, request.path)
            text = f"# the command submitted with nbjobs\n{request.command}\n"
            # the "source" a command's log is named after: <folder>/command.<when>.<id>.log
            return where / "command", {snapshot_name("command", where): text.encode("utf-8")}
        script = read_notebook(folder, request.path, limit=limit, suffixes=JOB_SUFFIXES)
    except NotebookTooLarge as exc:
        raise TooLarge(
            f"the script {request.path!r} is {exc.size} bytes, more than the {limit} this "
            "service takes (limits.notebook in nbjobs.yaml)"
        ) from None
    except PathRefused as exc:
        raise Invalid(str(exc)) from None
    return script.path, {snapshot_name("script", script.path): script.data}

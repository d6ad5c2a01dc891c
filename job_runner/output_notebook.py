"""What the runner writes into the output notebook beyond the cells' own outputs: the
banner that says how the run ended (papermill-style, with an anchor above the cell
where it stopped), the note left in that cell, the error as the status file gives it,
and the HTML copy; and what an earlier run added, taken out before a re-run."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import nbformat
from nbformat import NotebookNode

from .errors import could_not_write
from .status import CellError, atomic_write_text

#: the tag of the cells the runner adds (the banner, the anchor)
BANNER_TAG = "nbjobs-banner"
#: the banner's link goes to this anchor, above the cell where the run stopped
FAILED_CELL_ANCHOR = "nbjobs-failed-cell"
#: a terminal's colours in a traceback
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

HEADLINES = {
    "failed": "Execution failed",
    "timed_out": "Execution timed out",
    "cancelled": "Execution was cancelled",
    "stopped": "The notebook stopped itself",
    "simulated": "It ran on a simulated GPU",
}


def add_banner(
    nb: NotebookNode,
    state: str,
    message: str,
    error: CellError | None,
    *,
    simulated_gpus: bool,
    stopped_at: int | None = None,
) -> CellError | None:
    """Put a banner on top and an anchor above the failing cell.

    ``state`` ``stopped`` is the notebook's own clean stop (``sys.exit(0)``): an
    informational banner, with the anchor at ``stopped_at``. Returns the error with
    ``cell_index`` pointing into the output notebook.
    """
    text = f"**nbjobs: {HEADLINES[state]}.** {message}".rstrip()
    if simulated_gpus:
        text += (
            "  \nIts GPUs were simulated (nbjobs tried out on a machine without a GPU): "
            "nothing in it computed on a GPU."
        )
    failed_index = error.cell_index if error is not None else stopped_at
    if failed_index is not None:
        text += f"  \n[Go to the cell where it stopped](#{FAILED_CELL_ANCHOR})."
        anchor = nbformat.v4.new_markdown_cell(f'<span id="{FAILED_CELL_ANCHOR}"></span>')
        anchor.metadata["tags"] = [BANNER_TAG]
        nb.cells.insert(failed_index, anchor)
    style = "alert-info" if state in ("stopped", "simulated") else "alert-danger"
    banner = nbformat.v4.new_markdown_cell(f'<div class="alert {style}">\n\n{text}\n\n</div>')
    banner.metadata["tags"] = [BANNER_TAG]
    nb.cells.insert(0, banner)
    if error is not None and failed_index is not None:
        error.cell_index = failed_index + 2  # after the banner and the anchor
    return error


def mark_result(
    nb: NotebookNode,
    state: str,
    message: str | None,
    error: CellError | None,
    *,
    failed: bool,
    stopped_at: int | None,
    simulated_gpus: bool,
    durations: dict[int, float],
) -> CellError | None:
    """Each cell's duration in its metadata, and the banner that says how the run ended
    (when it ``failed``, stopped itself at ``stopped_at`` or ran on simulated GPUs);
    the error as the banner placed it."""
    for index, seconds in durations.items():
        nb.cells[index].metadata.setdefault("nbjobs", {})["duration_seconds"] = round(seconds, 6)
    if failed:
        return add_banner(nb, state, message or state, error, simulated_gpus=simulated_gpus)
    if stopped_at is not None:
        add_banner(
            nb,
            "stopped",
            message or state,
            None,
            simulated_gpus=simulated_gpus,
            stopped_at=stopped_at,
        )
    elif simulated_gpus:
        add_banner(nb, "simulated", "", None, simulated_gpus=True)
    return error


def cell_error(nb: NotebookNode, index: int | None, ename: str, evalue: str) -> CellError:
    """The error of the cell at ``index`` as its error output says it (its traceback
    without colours), else as given."""
    traceback: list[str] = []
    if index is not None:
        for out in nb.cells[index].get("outputs", []):
            if out.get("output_type") == "error":
                ename, evalue = out.get("ename", ename), out.get("evalue", evalue)
                traceback = [ANSI.sub("", line) for line in out.get("traceback", [])]
    return CellError(index if index is not None else 0, ename, evalue, traceback)


def mark_cell(nb: NotebookNode, index: int | None, message: str) -> None:
    """Leave a visible note in the cell where the run stopped."""
    if index is None:
        return
    note = nbformat.v4.new_output("stream", name="stderr", text=f"[nbjobs] {message}\n")
    nb.cells[index].setdefault("outputs", []).append(note)


def error_dict(error: CellError) -> dict[str, Any]:
    """The error as the output notebook's metadata keeps it."""
    return {
        "cell_index": error.cell_index,
        "ename": error.ename,
        "evalue": error.evalue,
        "traceback": error.traceback,
    }


def write_html(nb: NotebookNode, path: Path) -> str | None:
    """Write the notebook as HTML to ``path``; None when written, else why not (a copy
    that cannot be made is a warning, never the job's failure)."""
    try:
        from nbconvert import HTMLExporter
    except ImportError:
        return "nbconvert is not installed where jobs run (ask your admin to add it)"
    try:
        body, _ = HTMLExporter().from_notebook_node(nb)
        atomic_write_text(path, body, durable=True)
    except OSError as exc:
        return could_not_write("the HTML copy", path, exc)
    except Exception as exc:  # nbconvert's templates and filters raise anything
        return f"nbconvert failed: {type(exc).__name__}: {exc}"
    return None


def strip_previous_run(nb: NotebookNode) -> None:
    """Drop what an earlier run added, so re-running an output starts clean."""
    nb.cells = [c for c in nb.cells if BANNER_TAG not in c.get("metadata", {}).get("tags", [])]
    nb.metadata.pop("nbjobs", None)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
            cell.metadata.pop("nbjobs", None)
            cell.metadata.pop("execution", None)

"""Reading notebooks as people have them: any nbformat 4.x, repaired where Jupyter would run it.

One rule for the version: every notebook is run and written as nbformat 4.5, with an
``id`` on every cell, as JupyterLab does when it saves an older notebook. The output
then validates whatever minor version the input declared (4.0 to 4.4 have no cell
ids, and a 4.4 file with ids in it does not validate).

Repairs: defects that JupyterLab, nbclient and papermill tolerate (they warn and run)
are fixed, and each fix is described in a sentence; the runner logs them and keeps
them in the output's ``metadata.nbjobs.repairs``. Only what cannot be read is refused
(:class:`~.errors.BadInput`): text that is not JSON, an nbformat older than 3 or newer
than 4, a file with no cells list.
"""

from __future__ import annotations

import copy
import json
import warnings
from pathlib import Path
from typing import Any

import nbformat
from nbformat import NotebookNode
from nbformat.corpus.words import generate_corpus_id as random_cell_id
from nbformat.warnings import MissingIDFieldWarning

from .errors import BadInput

#: the version every output is written in
NBFORMAT_MINOR = 5
_CELL_TYPES = ("code", "markdown", "raw")
_OUTPUT_TYPES = ("stream", "display_data", "execute_result", "error")


def read_notebook(path: Path) -> tuple[NotebookNode, list[str]]:
    """Load a notebook as nbformat 4.5 (:func:`parse_notebook`), with the repairs made;
    raise :class:`BadInput` saying what is wrong when it cannot be read."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput(f"INPUT {path} does not exist") from None
    except IsADirectoryError:
        raise BadInput(f"INPUT {path} is a folder, not a notebook") from None
    except UnicodeDecodeError:
        raise BadInput(f"INPUT {path} is not a notebook: it is not UTF-8 text") from None
    except OSError as exc:
        raise BadInput(f"cannot read INPUT {path}: {exc.strerror}") from None
    return parse_notebook(text, f"INPUT {path}")


class TooManyCells(BadInput):
    """A notebook of more cells than the caller takes (``count`` > ``limit``)."""

    def __init__(self, where: str, count: int, limit: int) -> None:
        super().__init__(
            f"{where} has {count} cells, more than the {limit} a notebook may have here; "
            "split it into smaller notebooks (or ask your admin to raise limits.cells)"
        )
        self.count, self.limit = count, limit


def parse_notebook(
    text: str, where: str = "the notebook", *, max_cells: int | None = None
) -> tuple[NotebookNode, list[str]]:
    """The notebook in ``text`` as nbformat 4.5, and the repairs made, one sentence each.

    ``where`` names the notebook in refusals (``INPUT train.ipynb``). With
    ``max_cells``, a notebook of more cells is refused as soon as they are counted,
    before the costly part (validation) begins.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput(
            f"{where} is not a notebook: invalid JSON at line {exc.lineno} "
            f"column {exc.colno} ({exc.msg})"
        ) from None
    if not isinstance(data, dict):
        raise BadInput(f"{where} is not a notebook: its JSON is not an object")
    major = data.get("nbformat")
    if major is None:
        raise BadInput(f"{where} is not a valid notebook: it names no nbformat version")
    if not isinstance(major, int) or major < 3 or major > 4:
        raise BadInput(
            f"{where} is not a notebook Jupyter can run (nbformat {major!r}; "
            "nbformat 3 and 4 are read): open and save it in JupyterLab first"
        )
    cells_key = "cells" if major == 4 else "worksheets"
    if not isinstance(data.get(cells_key), list):
        raise BadInput(f"{where} is not a notebook: it has no list of cells")
    if max_cells is not None:
        count = cell_count(data)
        if count > max_cells:
            raise TooManyCells(where, count, max_cells)
    repairs: list[str] = []
    if major == 4:
        repairs += _repair_v4(data)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MissingIDFieldWarning)
            warnings.simplefilter("ignore", UserWarning)  # nbformat's "invalid notebook" notes
            nb = nbformat.convert(_as_node(data, major), 4)
    except Exception as exc:  # nbformat raises several kinds for what it cannot convert
        reason = getattr(exc, "message", None) or str(exc).splitlines()[0]
        raise BadInput(f"{where} is not a notebook Jupyter can read: {reason[:240]}") from None
    if major == 3:
        repairs.append("converted from nbformat 3 to nbformat 4, as Jupyter does on opening")
    _to_current_minor(nb)
    try:
        nbformat.validate(nb)
    except nbformat.ValidationError as exc:
        reason = getattr(exc, "message", None) or str(exc).splitlines()[0]
        raise BadInput(f"{where} is not a valid notebook: {reason[:240]}") from None
    return nb, repairs


def _as_node(data: dict[str, Any], major: int) -> NotebookNode:
    """The notebook JSON ``data`` (nbformat ``major``) as nbformat's objects, as
    ``nbformat.reads`` makes them but neither from text again nor validated: it is
    validated once, as 4.5, after the upgrade. Read and validated twice, a notebook of
    300 tiny cells took 27 ms to check at submit, and its runner's start as much again;
    14 ms each now (3 000 cells: 318 ms, now 185)."""
    try:
        return nbformat.versions[major].to_notebook_json(data, minor=data.get("nbformat_minor", 0))
    except AttributeError as exc:  # as nbformat.reads: a key it needs is missing
        raise nbformat.ValidationError(f"a key the notebook needs is missing ({exc})") from None


def cell_count(data: dict[str, Any]) -> int:
    """How many cells the notebook JSON ``data`` has (nbformat 4, or 3's worksheets)."""
    if data.get("nbformat") == 4:
        return len(data.get("cells") or [])
    return sum(
        len(sheet.get("cells") or [])
        for sheet in data.get("worksheets") or []
        if isinstance(sheet, dict) and isinstance(sheet.get("cells"), list)
    )


def _to_current_minor(nb: NotebookNode) -> None:
    """nbformat 4.x to 4.5: an id on every cell, unique (JupyterLab's upgrade on save)."""
    seen: set[str] = set()
    for cell in nb.cells:
        cell_id = cell.get("id")
        if not isinstance(cell_id, str) or not cell_id or cell_id in seen:
            cell_id = random_cell_id()
            while cell_id in seen:
                cell_id = random_cell_id()
            cell["id"] = cell_id
        seen.add(cell_id)
    nb.nbformat_minor = max(nb.nbformat_minor, NBFORMAT_MINOR)


def _repair_v4(data: dict[str, Any]) -> list[str]:
    """Fix in place what Jupyter's tools tolerate in an nbformat 4 file; say what changed."""
    repairs: list[str] = []
    if not isinstance(data.get("metadata"), dict):
        data["metadata"] = {}
        repairs.append("the notebook had no metadata; an empty one was added")
    if not isinstance(data.get("nbformat_minor"), int):
        data["nbformat_minor"] = 0
        repairs.append("the notebook had no nbformat_minor; it is read as 4.0")
    kept = []
    for number, cell in enumerate(data["cells"], start=1):
        if not isinstance(cell, dict):
            repairs.append(f"cell {number} was not a cell (a JSON {type(cell).__name__}); dropped")
            continue
        repairs += _repair_cell(cell, number)
        kept.append(cell)
    data["cells"] = kept
    return repairs


def _repair_cell(cell: dict[str, Any], number: int) -> list[str]:
    repairs = []
    kind = cell.get("cell_type")
    if kind not in _CELL_TYPES:
        repairs.append(f"cell {number} had cell type {kind!r}; it is kept as a raw cell")
        cell["cell_type"] = kind = "raw"
    source = cell.get("source", "")
    if isinstance(source, list):
        source = "".join(str(s) for s in source)
    if not isinstance(source, str):
        repairs.append(f"cell {number} had no readable source; it is kept empty")
        source = ""
    cell["source"] = source
    if not isinstance(cell.get("metadata"), dict):
        cell["metadata"] = {}
    if kind == "code":
        outputs = cell.get("outputs")
        if not isinstance(outputs, list):
            outputs = []
        fixed = [o for o in (_repair_output(copy.deepcopy(o)) for o in outputs) if o is not None]
        if len(fixed) != len(outputs) or any(a != b for a, b in zip(fixed, outputs, strict=False)):
            # they are replaced by this run's outputs anyway
            repairs.append(
                f"cell {number}'s saved outputs did not follow the notebook format; "
                "they were fixed (the run replaces them)"
            )
        cell["outputs"] = fixed
        count = cell.get("execution_count")
        if count is not None and not (isinstance(count, int) and count >= 0):
            cell["execution_count"] = None
        cell.setdefault("execution_count", None)
    else:
        for key in ("outputs", "execution_count"):
            if key in cell:
                del cell[key]
                repairs.append(f"{kind} cell {number} carried {key!r}, which only code cells have")
    return repairs


def _repair_output(output: Any) -> dict[str, Any] | None:
    """An output as the format wants it, or None when nothing of it can be kept."""
    if not isinstance(output, dict) or output.get("output_type") not in _OUTPUT_TYPES:
        return None
    kind = output["output_type"]
    if kind == "stream":
        if output.get("name") not in ("stdout", "stderr"):
            output["name"] = "stdout"
        text = output.get("text", "")
        output["text"] = "".join(text) if isinstance(text, list) else str(text)
    elif kind in ("display_data", "execute_result"):
        if not isinstance(output.get("data"), dict):
            output["data"] = {}
        if not isinstance(output.get("metadata"), dict):
            output["metadata"] = {}
        if kind == "execute_result" and "execution_count" not in output:
            output["execution_count"] = None
    else:  # error
        output.setdefault("ename", "Error")
        output.setdefault("evalue", "")
        if not isinstance(output.get("traceback"), list):
            output["traceback"] = []
    return output

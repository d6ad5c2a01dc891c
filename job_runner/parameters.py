"""Parameters the papermill way: an injected cell after the ``parameters`` cell.

Values keep their JSON types. Python kernels get Python literals; for other
languages we refuse parameters rather than guess a syntax.
"""

from __future__ import annotations

import ast
import json
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # nbformat is imported where a cell or an output is made
    from nbformat import NotebookNode

PARAMETERS_TAG = "parameters"
INJECTED_TAG = "injected-parameters"


class ParameterError(ValueError):
    """Parameters that cannot be given to this notebook."""


def parse_parameters_arg(text: str) -> dict[str, Any]:
    """Parse ``--parameters``: inline JSON (an object, or anything else JSON-looking) or a file."""
    source = text
    if not text.lstrip().startswith(("{", "[", '"')):
        try:
            with open(text, encoding="utf-8") as f:
                source = f.read()
        except OSError as exc:
            raise ParameterError(f"cannot read parameters file {text}: {exc.strerror}") from exc
    try:
        value = json.loads(source)
    except json.JSONDecodeError as exc:
        raise ParameterError(f"parameters are not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ParameterError("parameters must be a JSON object of name: value")
    return value


def parse_parameter_value(text: str) -> Any:
    """A ``-p NAME VALUE`` value: JSON when it parses (``5``, ``true``, ``[1]``), else a string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def python_literal(value: Any) -> str:
    """The Python source for a JSON value, exact for every JSON type."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if isinstance(value, dict):
        items = ", ".join(f"{python_literal(k)}: {python_literal(v)}" for k, v in value.items())
        return "{" + items + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(python_literal(v) for v in value) + "]"
    if value is None or isinstance(value, bool | int | float | str):
        return repr(value)
    raise ParameterError(f"parameter value {value!r} is not a JSON value")


def declared_names(source: str) -> set[str] | None:
    """Names assigned at top level in a parameters cell; None if it is not valid Python."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    names: set[str] = set()
    for node in tree.body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        for target in targets:
            for sub in ast.walk(target):
                if isinstance(sub, ast.Name):
                    names.add(sub.id)
    return names


def inject_parameters(nb: NotebookNode, parameters: dict[str, Any], language: str) -> list[str]:
    """Insert (or replace) the injected-parameters cell; return warnings for the output.

    The cell goes right after the cell tagged ``parameters``, or first when
    there is none. An injected cell left by an earlier run is replaced, never
    duplicated.
    """
    nb.cells = [c for c in nb.cells if INJECTED_TAG not in c.get("metadata", {}).get("tags", [])]
    if not parameters:
        return []
    if language != "python":
        raise ParameterError(
            f"parameters can be injected into Python notebooks only; this one's kernel "
            f"language is {language!r}"
        )
    for name in parameters:
        if not isinstance(name, str) or not name.isidentifier():
            raise ParameterError(f"parameter name {name!r} is not a valid Python identifier")

    position = 0
    warnings: list[str] = []
    declared: set[str] | None = None
    for index, cell in enumerate(nb.cells):
        if PARAMETERS_TAG in cell.get("metadata", {}).get("tags", []):
            position = index + 1
            declared = declared_names(cell.source) if cell.cell_type == "code" else None
            break
    else:
        warnings.append(
            "no cell is tagged 'parameters'; the parameters were injected as the first cell"
        )
    if declared is not None:
        unknown = [name for name in parameters if name not in declared]
        if unknown:
            known = ", ".join(sorted(declared)) or "none"
            warnings.append(
                f"parameter(s) {', '.join(unknown)} not defined in the parameters cell "
                f"(it defines: {known}); injected anyway"
            )

    lines = ["# Parameters injected by nbjobs"]
    lines += [f"# nbjobs warning: {w}" for w in warnings]
    lines += [f"{name} = {python_literal(value)}" for name, value in parameters.items()]
    from nbformat.v4 import new_code_cell

    cell = new_code_cell("\n".join(lines) + "\n")
    cell.metadata["tags"] = [INJECTED_TAG]
    nb.cells.insert(position, cell)
    return warnings

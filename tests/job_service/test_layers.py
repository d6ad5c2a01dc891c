"""job_service/ in layers: what imports what, read from the source (an AST walk).

- No circle among the handler modules: each part's handlers build on ``api_base`` and
  only ``app.py`` puts the routes together.
- No module imports ``service.py`` but ``app.py`` (not even for a type): the parts get
  a context and callables, the handlers a protocol of the service
  (:mod:`~nbjobs.job_service.facade`).
- No circle at run time (imports inside ``if TYPE_CHECKING:`` aside).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "job_service"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> list[tuple[str, bool]]:
    """The job_service modules ``path`` imports: (name, only for type checking)."""
    tree = ast.parse(path.read_text())
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        test = getattr(node, "test", None)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(test or node):
            typing_only.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
            target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            names = [target] if node.module else []
            # "from . import handlers": each name may be a module
            names += [f"{target}.{a.name}".lstrip(".") for a in node.names]
            for name in names:
                found.append((name.lstrip("."), id(node) in typing_only))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            "nbjobs.job_service."
        ):
            found.append((node.module.removeprefix("nbjobs.job_service."), id(node) in typing_only))
    return found


def graph(*, runtime_only: bool) -> dict[str, set[str]]:
    modules = {module_name(p): p for p in ROOT.rglob("*.py") if "__pycache__" not in p.parts}
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for target, typing in imports_of(path):
            if runtime_only and typing:
                continue
            if target in modules and target != name:
                edges[name].add(target)
    return edges


def test_no_module_but_app_imports_service():
    edges = graph(runtime_only=False)
    importers = {name for name, targets in edges.items() if "service" in targets}

    assert importers == {"app"}


def test_only_app_imports_the_handler_modules():
    handler_modules = {"handlers", "dashboard.handlers", "schedules.handlers"}
    handler_modules.add("notifications.handlers")
    edges = graph(runtime_only=False)
    importers = {
        name
        for name, targets in edges.items()
        if targets & handler_modules and name not in ("app", "dashboard")
    }

    assert importers == set()
    # the dashboard package re-exports its page routes; app.py takes the rest itself
    assert edges["app"] >= handler_modules


def test_there_is_no_import_circle_at_run_time():
    edges = graph(runtime_only=True)
    circles = []
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for target in sorted(edges[node]):
            if state.get(target) == 1:
                circles.append([*trail[trail.index(target) :], target])
            elif target not in state:
                visit(target, [*trail, target])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])

    assert circles == []

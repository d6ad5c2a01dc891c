"""The source layout the design names, and imports that work in both install modes."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PARTS = [
    "job_runner",
    "job_service",
    "server_extension",
    "spawner",
    "hub_config",
    "client",
    "programs",
]
BARE_IMPORT = re.compile(rf"^\s*(from|import)\s+({'|'.join(PARTS)})\b", re.MULTILINE)


def python_files():
    for folder in ["nbjobs", *PARTS]:
        yield from (ROOT / folder).rglob("*.py") if (ROOT / folder).is_dir() else ()


def test_parts_are_imported_through_the_nbjobs_package():
    # `import job_runner` works in a checkout but not from the wheel, where the
    # folder is nbjobs/job_runner; every import must go through nbjobs.
    offenders = [
        f"{path.relative_to(ROOT)}: {match.group(0).strip()}"
        for path in python_files()
        for match in BARE_IMPORT.finditer(path.read_text())
    ]
    assert offenders == []


def test_the_runner_has_its_own_folder_and_entry_point():
    assert (ROOT / "job_runner" / "__main__.py").is_file()
    assert not (ROOT / "nbjobs" / "job_runner").exists()


#: the house limit on a module's length: past it, split it by concern
MAX_LINES = 800


def source_files():
    """The product's own Python and TypeScript (no tests, benches, generated types)."""
    for folder in ["nbjobs", *PARTS, "labextension/src"]:
        top = ROOT / folder
        if top.is_dir():
            yield from top.rglob("*.py")
            yield from (p for p in top.rglob("*.ts") if not p.name.endswith(".d.ts"))


def test_no_module_grows_past_the_line_limit():
    lengths = {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines())
        for path in source_files()
        if "node_modules" not in path.parts
    }
    assert len(lengths) > 100  # the product's modules were found
    too_long = {name: n for name, n in lengths.items() if n > MAX_LINES}
    assert too_long == {}, f"past {MAX_LINES} lines: split them by concern"


#: the house limit on a function's length; a longer one says why in the comment just
#: above it (above its decorators), which starts with LONG_REASON
MAX_FUNCTION_LINES = 80
LONG_REASON = "# Over 80 lines:"


def test_no_function_past_its_limit_without_a_reason():
    long_ones = []
    for path in source_files():
        if path.suffix != ".py":
            continue
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if node.end_lineno - node.lineno + 1 <= MAX_FUNCTION_LINES:
                continue
            above = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 2
            comment = []  # the comment block just above it
            while above >= 0 and lines[above].strip().startswith("#"):
                comment.insert(0, lines[above].strip())
                above -= 1
            if not (comment and comment[0].startswith(LONG_REASON)):
                long_ones.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert long_ones == [], "split them, or say above each why it is one piece"


#: the parts above the shared base, by the package a wheel puts them in
ABOVE_BASE = ("job_service", "hub_config", "spawner", "server_extension", "programs")


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports (at its top or inside a function), absolute names."""
    tree = ast.parse(path.read_text())
    # a part's folder is a subpackage of nbjobs in the wheel (job_runner: nbjobs.job_runner)
    folders = path.relative_to(ROOT).parent.parts
    package = ".".join(folders if folders[:1] == ("nbjobs",) else ("nbjobs", *folders))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            found |= {f"{base}.{alias.name}" for alias in node.names} | {base}
    return found


def reaches(modules: set[str], packages: tuple[str, ...]) -> set[str]:
    return {m for m in modules for p in packages if m == p or m.startswith(p + ".")}


def test_no_loop_between_the_parts():
    # The shared base (configuration, models, storage, units, the CLI's dispatch by
    # name) imports no part; no part imports the programs that assemble them (the demo,
    # the installer) or the CLI; the runner imports nothing of nbjobs but itself.
    base = [p for p in (ROOT / "nbjobs").rglob("*.py") if "labextension" not in p.parts]
    offenders = [
        f"{path.relative_to(ROOT)} imports {sorted(reached)}"
        for path in base
        if (reached := reaches(imported_modules(path), tuple(f"nbjobs.{p}" for p in ABOVE_BASE)))
    ]
    for part in ("job_runner", "job_service", "hub_config", "spawner", "server_extension"):
        for path in (ROOT / part).rglob("*.py"):
            reached = reaches(imported_modules(path), ("nbjobs.programs", "nbjobs.cli"))
            if part == "job_runner":
                reached |= {
                    m
                    for m in imported_modules(path)
                    if m.startswith("nbjobs.") and not m.startswith("nbjobs.job_runner")
                }
            if reached:
                offenders.append(f"{path.relative_to(ROOT)} imports {sorted(reached)}")
    assert offenders == []

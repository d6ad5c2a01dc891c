"""Helpers for the runner tests: notebooks built per test, the CLI in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat

NOTEBOOKS = Path(__file__).parent / "notebooks"
PYTHON3 = {"name": "python3", "display_name": "Python 3", "language": "python"}


def code(source: str, *tags: str) -> nbformat.NotebookNode:
    """A code cell, optionally tagged."""
    cell = nbformat.v4.new_code_cell(source)
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


def markdown(source: str) -> nbformat.NotebookNode:
    """A markdown cell."""
    return nbformat.v4.new_markdown_cell(source)


def runner_command(*args: Any) -> list[str]:
    """The runner's command line, as the job service and the Kubernetes Job run it."""
    return [sys.executable, "-m", "nbjobs.job_runner", *map(str, args)]


def run_cli(*args: Any, timeout: float = 120, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """Run the runner to completion, capturing its log."""
    return subprocess.run(
        runner_command(*args),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        **kwargs,
    )


def read_json(path: Path) -> dict[str, Any]:
    """Load a JSON file."""
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def wait_for(predicate: Callable[[], bool], timeout: float = 60, what: str = "condition") -> None:
    """Poll until ``predicate`` holds; fail the test with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def leftovers(folder: Path) -> list[str]:
    """Temp files the atomic writes might have left behind."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".") or p.suffix == ".tmp")

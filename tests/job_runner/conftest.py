"""Fixtures for the runner tests."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from .helpers import PYTHON3, code


@pytest.fixture
def make_notebook(tmp_path: Path) -> Callable[..., Path]:
    """Write a notebook of the given cells (strings become code cells) and return its path."""

    def make(*cells: Any, name: str = "input.ipynb", kernelspec: dict | None = None) -> Path:
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = kernelspec or PYTHON3
        nb.cells = [code(c) if isinstance(c, str) else c for c in cells]
        path = tmp_path / name
        nbformat.write(nb, path)
        return path

    return make


@pytest.fixture
def not_writable_folder(tmp_path: Path) -> Path:
    """A folder this process cannot create files in (root ignores modes, so use sysfs)."""
    if os.geteuid() == 0:
        return Path("/sys")
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o500)
    return folder


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB file system of its own, mounted for the test."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    folder = tmp_path / "small-disk"
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k,mode=0755", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)

"""What the runner leaves on shared storage is durable: fsync'ed before the rename.

On NFS a rename can be acknowledged while the file's data is still only in the
client's cache; a node that dies right after the job would leave an empty
notebook where the job service says the result is. These tests watch
``os.fsync`` (the one edge no real thing can observe here) during a real run.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from nbjobs.job_runner import ExitCode, read_status, run_notebook
from nbjobs.job_runner.status import atomic_write_text

from .helpers import leftovers


@pytest.fixture
def fsynced(monkeypatch: pytest.MonkeyPatch) -> list[os.stat_result]:
    """The files and folders fsync'ed from now on, as fstat saw them."""
    calls: list[os.stat_result] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        calls.append(os.fstat(fd))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    return calls


def same_file(synced: os.stat_result, path: Path) -> bool:
    now = os.stat(path)
    return (synced.st_dev, synced.st_ino) == (now.st_dev, now.st_ino)


def test_output_and_final_status_are_fsynced_progress_is_not(make_notebook, tmp_path, fsynced):
    cells = [f"import time; time.sleep(0.03); v{i} = {i}" for i in range(20)]
    source = make_notebook(*cells)
    output = tmp_path / "out.ipynb"
    status = tmp_path / "s.json"

    result = run_notebook(source, output, status_file=status)

    assert result.exit_code == ExitCode.SUCCEEDED
    final = read_status(status)
    assert final is not None
    assert final.state == "succeeded"
    files = [s for s in fsynced if stat.S_ISREG(s.st_mode)]
    folders = [s for s in fsynced if stat.S_ISDIR(s.st_mode)]
    # The bytes now at OUTPUT and at the status file are the ones that were fsync'ed
    # (the temp file's inode survives the rename), and the renames' folder too.
    assert any(same_file(s, output) for s in files)
    assert any(same_file(s, status) for s in files)
    assert any(same_file(s, tmp_path) for s in folders)
    # 20 cells of 30 ms give a dozen progress writes: none of them waits for the disk.
    assert len(files) == 2, "progress writes should not be fsync'ed"
    assert leftovers(tmp_path) == []


def test_a_failed_run_is_durable_too(make_notebook, tmp_path, fsynced):
    source = make_notebook("raise ValueError('x')")
    output = tmp_path / "out.ipynb"
    status = tmp_path / "s.json"

    result = run_notebook(source, output, status_file=status)

    assert result.exit_code == ExitCode.FAILED
    assert any(same_file(s, output) for s in fsynced)
    assert any(same_file(s, status) for s in fsynced)


def test_atomic_write_is_cheap_unless_asked_to_be_durable(tmp_path, fsynced):
    target = tmp_path / "f.json"

    atomic_write_text(target, "{}\n")
    assert fsynced == []
    atomic_write_text(target, '{"a": 1}\n', durable=True)

    assert target.read_text() == '{"a": 1}\n'
    assert any(same_file(s, target) for s in fsynced)
    assert leftovers(tmp_path) == []

"""The runner cannot write its results (a full disk, a folder made read-only): the job
still ends with a sentence that says what happened and what to do, never an empty
message or a traceback.

The full disks are real: a tmpfs of 64 KiB mounted for the test (root only).
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from nbjobs.job_runner import ExitCode, read_status

from .helpers import leftovers, run_cli, runner_command

FILL_THE_DISK = """
import os
with open({path!r}, "wb", buffering=0) as f:
    for size in (65536, 4096, 1):
        try:
            while True:
                f.write(b"x" * size)
        except OSError:
            pass
print("the disk is full")
"""


def test_a_full_output_disk_ends_the_job_with_what_to_do(make_notebook, tmp_path, small_disk):
    source = make_notebook("print('x' * 200_000)")  # the output notebook needs ~200 KB
    output, status = small_disk / "out.ipynb", tmp_path / "status.json"

    proc = run_cli(source, output, "--status-file", status)

    assert proc.returncode == ExitCode.FAILED, proc.stderr
    final = read_status(status)
    assert final is not None
    assert final.state == "failed"
    assert final.exit_code == ExitCode.FAILED
    assert final.message == (
        f"could not write the output notebook {output}: no space left on device (ENOSPC); "
        "free space in your folder and re-run"
    )
    assert final.message in proc.stderr  # the job's log says it too
    assert "Traceback" not in proc.stderr
    assert not output.exists()
    assert leftovers(small_disk) == []  # the half-written temp file is gone


def test_a_disk_that_stays_full_still_gets_the_jobs_last_word(make_notebook, small_disk):
    # Everything on the small disk, the log too; the notebook fills it and keeps it full.
    source = make_notebook("print('start')", FILL_THE_DISK.format(path=str(small_disk / "filler")))
    output, status, log = small_disk / "out.ipynb", small_disk / "status.json", small_disk / "log"

    with open(log, "wb") as log_file:
        proc = subprocess.run(
            runner_command(source, output, "--status-file", status),
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            timeout=120,
        )

    assert proc.returncode == ExitCode.FAILED, log.read_text()
    final = read_status(status)  # whole, valid JSON, though no new file fitted
    assert final is not None
    assert final.state == "failed"
    assert final.message is not None
    assert final.message.startswith(f"could not write the output notebook {output}: ")
    assert "no space left on device (ENOSPC); free space in your folder" in final.message
    assert final.cells_done == final.cells_total == 2
    assert json.loads(status.read_text())["exit_code"] == ExitCode.FAILED
    assert not output.exists()


def test_an_output_folder_made_read_only_ends_the_job_with_what_to_do(make_notebook, tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    if os.geteuid() == 0:
        # Root writes through any mode: make the folder a file system mounted read-only.
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)], capture_output=True
        )
        if mounted.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
        lock = f"import subprocess\nsubprocess.run(['mount', '-o', 'remount,ro', {str(folder)!r}])"
        reason = "read-only file system (EROFS)"
        advice = "is on a read-only file system now; move the notebook to a writable folder"
    else:
        lock = f"import os\nos.chmod({str(folder)!r}, 0o555)"
        reason = "permission denied (EACCES)"
        advice = f"make {folder} writable again"
    source = make_notebook("print('working')", lock)
    output, status = folder / "out.ipynb", tmp_path / "status.json"
    try:
        proc = run_cli(source, output, "--status-file", status)
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", "-l", str(folder)], check=True)
        else:
            folder.chmod(0o755)

    assert proc.returncode == ExitCode.FAILED, proc.stderr
    final = read_status(status)
    assert final is not None
    assert final.state == "failed"
    assert final.message is not None
    assert final.message.startswith(f"could not write the output notebook {output}: {reason}; ")
    assert advice in final.message
    assert "Traceback" not in proc.stderr


def test_a_failed_cell_keeps_its_reason_when_the_output_cannot_be_written(
    make_notebook, tmp_path, small_disk
):
    source = make_notebook("print('x' * 200_000)", "1 / 0")
    output, status = small_disk / "out.ipynb", tmp_path / "status.json"

    proc = run_cli(source, output, "--status-file", status)

    assert proc.returncode == ExitCode.FAILED, proc.stderr
    final = read_status(status)
    assert final is not None
    assert final.message is not None
    assert final.message.startswith("code cell 2 of 2 raised ZeroDivisionError: division by zero; ")
    assert f"could not write the output notebook {output}: no space left" in final.message
    assert final.error is not None
    assert final.error.ename == "ZeroDivisionError"

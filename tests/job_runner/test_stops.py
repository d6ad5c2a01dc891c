"""Runs that end early: time limits, dead kernels, SIGTERM. Each keeps its partial output."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import nbformat
import psutil
import pytest
from nbjobs.job_runner import ExitCode, read_status

from .helpers import leftovers, run_cli, runner_command, wait_for


def banner(nb: nbformat.NotebookNode) -> str:
    first = nb.cells[0]
    assert "nbjobs-banner" in first.metadata.get("tags", [])
    return str(first.source)


def test_job_timeout_keeps_what_ran(make_notebook, tmp_path):
    source = make_notebook("print('done before the limit')", "import time; time.sleep(60)", "1")
    output = tmp_path / "out.ipynb"
    status = tmp_path / "s.json"

    started = time.monotonic()
    proc = run_cli(source, output, "--timeout", "3", "--status-file", status)

    assert proc.returncode == ExitCode.TIMED_OUT, proc.stderr
    assert time.monotonic() - started < 30
    nb = nbformat.read(output, as_version=4)
    assert "timed out after 3 s (job time limit)" in banner(nb)
    assert nb.cells[1].outputs[0]["text"] == "done before the limit\n"
    final = read_status(status)
    assert final is not None
    assert final.state == "timed_out"
    assert final.cells_done == 1
    assert final.error is not None
    assert nb.cells[final.error.cell_index].source.startswith("import time")
    assert nb.cells[-1].execution_count is None


def test_cell_timeout_names_the_cell(make_notebook, tmp_path):
    source = make_notebook("x = 1", "import time; time.sleep(60)")
    output = tmp_path / "out.ipynb"
    status = tmp_path / "s.json"

    proc = run_cli(source, output, "--cell-timeout", "2", "--status-file", status)

    assert proc.returncode == ExitCode.TIMED_OUT, proc.stderr
    final = read_status(status)
    assert final is not None
    assert final.state == "timed_out"
    assert final.message == "code cell 2 of 2 ran longer than the per-cell limit of 2 s"
    nb = nbformat.read(output, as_version=4)
    assert nb.cells[1].execution_count == 1  # the first cell's result is kept


@pytest.mark.parametrize(
    "death",
    [
        "import os; os._exit(3)",
        "import ctypes; ctypes.string_at(0)",  # segfault
        "import os, signal; os.kill(os.getpid(), signal.SIGKILL)",  # what the OOM killer does
    ],
    ids=["os._exit", "segfault", "sigkill"],
)
def test_dead_kernel_fails_with_partial_output(make_notebook, tmp_path, death):
    source = make_notebook("print('still here')", death, "print('never')")
    output = tmp_path / "out.ipynb"
    status = tmp_path / "s.json"

    proc = run_cli(source, output, "--status-file", status)

    assert proc.returncode == ExitCode.FAILED, proc.stderr
    final = read_status(status)
    assert final is not None
    assert final.state == "failed"
    assert final.message == "kernel died while running code cell 2 of 3"
    nb = nbformat.read(output, as_version=4)
    assert "kernel died" in banner(nb)
    assert nb.cells[1].outputs[0]["text"] == "still here\n"
    assert nb.cells[-1].execution_count is None
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_interrupts_and_writes_partial_output(make_notebook, tmp_path, sig):
    source = make_notebook(
        "print('before', flush=True)",
        "import time\nfor i in range(600):\n    time.sleep(0.1)",
        "print('never')",
    )
    output = tmp_path / "out.ipynb"
    status = tmp_path / "s.json"
    with subprocess.Popen(
        runner_command(source, output, "--status-file", status),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as proc:
        wait_for(
            lambda: (s := read_status(status)) is not None and s.cells_done == 1,
            what="the first cell to finish",
        )
        kernels = [p for p in psutil.Process(proc.pid).children(recursive=True)]
        sent = time.monotonic()
        proc.send_signal(sig)
        code = proc.wait(timeout=30)
        took = time.monotonic() - sent

    assert code == ExitCode.CANCELLED
    assert took < 30, f"took {took:.1f} s to stop (the cell would run 60 s)"
    final = read_status(status)
    assert final is not None
    assert final.state == "cancelled"
    assert final.exit_code == ExitCode.CANCELLED
    assert final.message == f"cancelled by {sig.name}"
    nb = nbformat.read(output, as_version=4)
    assert f"cancelled by {sig.name}" in banner(nb)
    assert nb.metadata["nbjobs"]["state"] == "cancelled"
    assert nb.cells[1].outputs[0]["text"] == "before\n"
    interrupted = nb.cells[final.error.cell_index] if final.error else None
    assert interrupted is not None
    assert interrupted.source.startswith("import time")
    assert kernels
    assert not any(p.is_running() and p.status() != "zombie" for p in kernels)


@pytest.mark.parametrize("when", ["kernel launched", "job checked"])
def test_sigterm_during_kernel_start_still_reports(make_notebook, tmp_path, when):
    source = make_notebook("print('x')")
    output = tmp_path / "out.ipynb"
    status = tmp_path / "s.json"
    # The kernel inherits this mark, so it can be found after the runner is gone.
    mark = f"nbjobs-test-{uuid.uuid4()}"
    with subprocess.Popen(
        runner_command(source, output, "--status-file", status),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "NBJOBS_TEST_MARK": mark},
    ) as proc:
        # The kernel process is up, but not yet ready: the runner launches it first, and
        # checks the job (the status file says "starting") while it boots.
        wait_for(
            lambda: bool(psutil.Process(proc.pid).children()),
            what="the kernel process to be launched",
        )
        if when == "job checked":
            wait_for(lambda: read_status(status) is not None, what="the first status")
            starting = read_status(status)
            assert starting is not None
            assert starting.state == "starting"
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)

    assert code == ExitCode.CANCELLED
    final = read_status(status)
    assert final is not None
    assert final.state == "cancelled"
    assert final.message == "cancelled by SIGTERM"
    nb = nbformat.read(output, as_version=4)
    assert "cancelled by SIGTERM" in banner(nb)
    assert nb.cells[-1].execution_count is None  # the cell never ran
    wait_for(lambda: not processes_marked(mark), timeout=5, what="no kernel left behind")


def processes_marked(mark: str) -> list[psutil.Process]:
    """Live processes (not zombies) whose environment carries ``mark``."""
    found = []
    for process in psutil.process_iter():
        try:
            if (
                process.environ().get("NBJOBS_TEST_MARK") == mark
                and process.status() != psutil.STATUS_ZOMBIE
            ):
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def stopped_when(ready, status: Path, *args: Any, reason: str | None = None):
    """Run the runner with ``args`` until ``ready(status)``, leave ``reason`` beside the
    status file as the job service does (if given), send SIGTERM; the final status."""
    with subprocess.Popen(
        runner_command(*args, "--status-file", status),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as proc:
        wait_for(lambda: (s := read_status(status)) is not None and ready(s))
        if reason is not None:
            (status.parent / "stop-reason.txt").write_text(reason + "\n")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == ExitCode.CANCELLED
    final = read_status(status)
    assert final is not None
    return final


def test_a_stop_reason_beside_the_status_file_is_the_cancel_message(make_notebook, tmp_path):
    """The job service leaves why it stops a job (its GPUs were idle) in stop-reason.txt
    before the signal; the runner says so in the status and the output's banner. A link
    in its place is not followed."""
    source = make_notebook("print('before', flush=True)", "import time; time.sleep(60)")
    folder = tmp_path / "job"
    folder.mkdir()
    status, output = folder / "status.json", tmp_path / "out.ipynb"
    reason = "stopped: its GPUs were idle (below 5 %) for 31 min"
    one_cell_done = lambda s: s.cells_done == 1  # noqa: E731

    final = stopped_when(one_cell_done, status, source, output, reason=reason)

    assert (final.state, final.message) == ("cancelled", reason)
    assert reason in banner(nbformat.read(output, as_version=4))

    secret = tmp_path / "secret.txt"
    secret.write_text("someone else's words")
    (folder / "stop-reason.txt").unlink()
    (folder / "stop-reason.txt").symlink_to(secret)
    status.unlink()
    final = stopped_when(one_cell_done, status, source, output)
    assert final.message == "cancelled by SIGTERM"


def test_a_script_stopped_with_a_reason_says_it_too(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import time\nprint('started', flush=True)\ntime.sleep(60)\n")
    folder = tmp_path / "job"
    folder.mkdir()
    reason = "stopped: its GPUs were idle (below 5 %) for 31 min"

    final = stopped_when(
        lambda s: s.state == "running",
        folder / "status.json",
        *(script, tmp_path / "train.log", "--script"),
        reason=reason,
    )

    assert (final.state, final.message) == ("cancelled", reason)


def test_a_job_refused_after_its_kernel_was_launched_leaves_no_kernel(make_notebook, tmp_path):
    # The kernel is launched before the job is checked; a check that fails (here the
    # OUTPUT's folder) kills it before the runner exits, and removes its sockets.
    source = make_notebook("print('never')")
    sockets = tmp_path / "tmp"
    sockets.mkdir()
    mark = f"nbjobs-test-{uuid.uuid4()}"
    proc = subprocess.run(
        runner_command(source, tmp_path / "missing" / "out.ipynb"),
        capture_output=True,
        text=True,
        env={**os.environ, "NBJOBS_TEST_MARK": mark, "TMPDIR": str(sockets)},
        timeout=60,
    )
    assert proc.returncode == ExitCode.BAD_INPUT
    assert "does not exist" in proc.stderr
    assert processes_marked(mark) == []  # killed, not left to notice its parent is gone
    assert list(sockets.iterdir()) == []

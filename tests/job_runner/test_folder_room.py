"""``--folder-limit``: the job's log stops at the room left for its owner's job files,
and the job ends saying so, with its output still written (issue 43, item 6: one job
wrote a 50 MB log past a 200 MiB cap that was checked at submit only)."""

from __future__ import annotations

import subprocess

import nbformat
from nbjobs.job_runner import ExitCode

from .helpers import read_json, run_cli, runner_command

MiB = 1024**2


def job_files(tmp_path):
    """A user's ``.nbjobs`` with one job's folder in it; (.nbjobs, the job's folder)."""
    folder = tmp_path / ".nbjobs"
    job = folder / "jobs" / "j1"
    job.mkdir(parents=True)
    return folder, job


def run_logged_to(log, *args):
    """Run the runner with its stdout and stderr appended to ``log``, as the local
    backend runs it (the job's log in its folder)."""
    with log.open("a") as to_log:
        return subprocess.run(
            runner_command(*args), stdout=to_log, stderr=to_log, stdin=subprocess.DEVNULL,
            timeout=120,
        )  # fmt: skip


def size_of(folder):
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def test_a_notebook_printing_past_the_room_stops_with_its_output_openable(tmp_path, make_notebook):
    folder, job = job_files(tmp_path)
    source = make_notebook(
        "for i in range(60_000):\n    print('x' * 100)",  # about 6 MB of output
        "print('the next cell')",
    )
    log = job / "log.txt"
    out = tmp_path / "out.ipynb"

    proc = run_logged_to(
        log, source, out, "--status-file", job / "status.json",
        "--folder-limit", MiB, "--folder-used", 0, "--folder", folder,
    )  # fmt: skip

    assert proc.returncode == ExitCode.FAILED
    status = read_json(job / "status.json")
    assert status["state"] == "failed"
    assert status["message"].startswith(
        "no room left in your folder (1.0 MiB of 1.0 MiB for job files); delete jobs you "
        "no longer need"
    )
    assert log.read_text().rstrip().endswith("the log stops here")
    # the folder is past the limit by the status file and one line at most
    assert size_of(folder) < MiB + 16 * 1024
    result = nbformat.read(out, as_version=4)
    nbformat.validate(result)
    assert result.metadata["nbjobs"]["state"] == "failed"
    assert "no room left in your folder" in result.cells[0].source  # the banner
    assert result.cells[-1].outputs == []  # the cell after it never ran


def test_what_the_job_writes_into_its_folder_itself_stops_it_at_the_next_measure(
    tmp_path, make_notebook
):
    folder, job = job_files(tmp_path)
    filler = folder / "jobs" / "j1" / "mine.bin"
    source = make_notebook(
        f"open({str(filler)!r}, 'wb').write(b'0' * {3 * MiB})\nimport time\ntime.sleep(60)"
    )

    proc = run_cli(
        source, tmp_path / "out.ipynb", "--status-file", job / "status.json",
        "--folder-limit", 2 * MiB, "--folder-used", 0, "--folder", folder,
        timeout=40,
    )  # fmt: skip

    assert proc.returncode == ExitCode.FAILED, proc.stderr
    message = read_json(job / "status.json")["message"]
    assert message.startswith("no room left in your folder (3.0 MiB of 2.0 MiB for job files)")


def test_a_script_printing_past_the_room_is_stopped(tmp_path):
    folder, job = job_files(tmp_path)
    (job / "input.bin").write_bytes(b"0" * MiB)  # what the folder held as the job started
    script = tmp_path / "chatty.py"
    script.write_text("for i in range(100_000):\n    print('y' * 100)\n")
    log = job / "log.txt"

    proc = run_logged_to(
        log, script, tmp_path / "chatty.log", "--script", "--status-file", job / "status.json",
        "--folder-limit", 2 * MiB, "--folder-used", MiB, "--folder", folder,
    )  # fmt: skip

    assert proc.returncode == ExitCode.FAILED
    assert read_json(job / "status.json")["message"].startswith(
        "no room left in your folder (2.0 MiB of 2.0 MiB for job files)"
    )
    # the log took the MiB that was left, and a line saying it stops there
    assert MiB - 4096 <= log.stat().st_size < MiB + 1024

"""``--log-file``: the runner keeps the job's log in a file of its own (on Kubernetes, the
job's folder on the shared storage), so the log outlives the pod and the job service.

The file holds what the runner prints, in order, as it prints it; it is appended to,
never followed through a link, bounded, and a file that cannot be written never costs
the job. Real runner processes and kernels."""

from __future__ import annotations

import io
import os
import stat
import subprocess
import sys
from pathlib import Path

from nbjobs.job_runner import ExitCode, read_status
from nbjobs.job_runner.log_file import LogFile, teed_to

from .helpers import run_cli, runner_command, wait_for


def test_the_log_file_holds_everything_the_runner_printed(make_notebook, tmp_path):
    source = make_notebook(
        "print('to stdout')",
        "import sys; print('to stderr', file=sys.stderr)",
        "1 / 0",
    )
    log = tmp_path / "job" / "log.txt"
    log.parent.mkdir()

    proc = run_cli(source, tmp_path / "out.ipynb", "--log-file", log)

    assert proc.returncode == ExitCode.FAILED, proc.stderr
    text = log.read_text()
    # the runner's own lines, both streams' cell output and the traceback, in order
    for earlier, later in [
        ("[nbjobs] running input.ipynb", "to stdout"),
        ("to stdout", "to stderr"),
        ("to stderr", "ZeroDivisionError"),
        ("ZeroDivisionError", "[nbjobs] done: failed"),
    ]:
        assert text.index(earlier) < text.index(later)
    # nothing more and nothing less than stdout and stderr together
    assert sorted(text.splitlines()) == sorted((proc.stdout + proc.stderr).splitlines())
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


def test_an_existing_log_is_appended_to_and_a_new_one_gets_the_mode_asked_for(
    make_notebook, tmp_path
):
    source = make_notebook("print('second run')")
    kept = tmp_path / "kept.txt"
    kept.write_text("an earlier line\n")
    kept.chmod(0o644)
    new = tmp_path / "new.txt"

    for log in (kept, new):
        proc = run_cli(
            source,
            tmp_path / "out.ipynb",
            *("--log-file", log, "--log-file-mode", "660"),
            preexec_fn=lambda: os.umask(0o022),  # the mode given wins over the umask
        )
        assert proc.returncode == 0, proc.stderr

    assert kept.read_text().startswith("an earlier line\n[nbjobs] running")
    assert "second run" in kept.read_text()
    assert stat.S_IMODE(kept.stat().st_mode) == 0o644  # a file that was there keeps its own
    assert stat.S_IMODE(new.stat().st_mode) == 0o660


def test_the_log_file_grows_while_the_job_runs(make_notebook, tmp_path):
    go = tmp_path / "go"
    source = make_notebook(
        "print('first cell done', flush=True)",
        f"import os, time\nwhile not os.path.exists({str(go)!r}):\n    time.sleep(0.05)",
    )
    log = tmp_path / "log.txt"
    process = subprocess.Popen(
        runner_command(source, tmp_path / "out.ipynb", "--log-file", log),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    try:
        wait_for(
            lambda: log.exists() and "first cell done" in log.read_text(),
            what="the first cell's output in the log file while the job runs",
        )
        assert process.poll() is None
    finally:
        go.touch()
        assert process.wait(timeout=60) == 0
    assert log.read_text().rstrip().splitlines()[-1].startswith("[nbjobs] done: succeeded")


def test_a_link_at_the_log_path_is_not_followed_and_the_job_runs(make_notebook, tmp_path):
    source = make_notebook("print('the job ran')")
    victim = tmp_path / "bobs-notebook.ipynb"
    victim.write_text("bob's notebook")
    log = tmp_path / "log.txt"
    log.symlink_to(victim)

    proc = run_cli(source, tmp_path / "out.ipynb", "--log-file", log)

    assert proc.returncode == 0, proc.stderr
    assert victim.read_text() == "bob's notebook"
    assert "the job ran" in proc.stdout  # the log still goes to the runner's own output
    warnings = [line for line in proc.stderr.splitlines() if "log file" in line]
    assert warnings == [
        f"[nbjobs] warning: the log file {log} cannot be opened (it is a link, and links are "
        "not followed); the job goes on, its log only on the runner's own output (kubectl logs)"
    ]


def test_the_log_file_is_never_the_notebook_or_the_status_file(make_notebook, tmp_path):
    source = make_notebook("print(1)")
    before = source.read_bytes()
    status = tmp_path / "status.json"

    proc = run_cli(source, tmp_path / "out.ipynb", "--status-file", status, "--log-file", source)

    assert proc.returncode == ExitCode.BAD_INPUT
    assert source.read_bytes() == before
    assert "--log-file" in proc.stderr
    assert "is the INPUT file" in proc.stderr
    assert read_status(status).exit_code == ExitCode.BAD_INPUT
    again = run_cli(source, tmp_path / "out.ipynb", "--status-file", status, "--log-file", status)
    assert again.returncode == ExitCode.BAD_INPUT
    assert "is the --status-file file" in again.stderr


def test_a_full_disk_under_the_log_costs_the_log_not_the_job(make_notebook, tmp_path, small_disk):
    # 200 KB of output into a 64 KiB file system: the log file fills it
    source = make_notebook("for i in range(2000):\n    print('x' * 99)", "print('last cell')")
    log = small_disk / "log.txt"
    output = tmp_path / "out.ipynb"

    proc = run_cli(source, output, "--log-file", log, "--status-file", tmp_path / "s.json")

    assert proc.returncode == 0, proc.stderr
    assert read_status(tmp_path / "s.json").state == "succeeded"
    assert "last cell" in output.read_text()
    warnings = [line for line in proc.stderr.splitlines() if "log file" in line]
    assert len(warnings) == 1, proc.stderr  # said once, not once a line
    assert "could not be written (No space left on device)" in warnings[0]
    assert "last cell" in proc.stdout  # the runner's own output goes on


def test_the_log_file_stops_at_its_limit_and_says_so(tmp_path):
    warn = io.StringIO()
    log = LogFile.open(tmp_path / "log.txt", mode=0o600, limit=100, warn=warn)
    for _ in range(10):
        log.write("y" * 30)
    log.close()

    text = (tmp_path / "log.txt").read_text()
    assert text.startswith("y" * 100 + "\n[nbjobs] the log file reached its limit (100 bytes)")
    assert text.count("reached its limit") == 1
    assert log.dropped == 300 - 100
    assert warn.getvalue() == ""


def test_the_tee_restores_the_streams_and_copies_what_they_write(tmp_path):
    before = sys.stdout, sys.stderr
    with teed_to(tmp_path / "log.txt", limit=1 << 20) as log:
        assert log is not None
        assert log.usable
        print("out")
        print("err", file=sys.stderr)
        sys.stdout.writelines(["a\n", "b\n"])
    assert (sys.stdout, sys.stderr) == before
    assert (tmp_path / "log.txt").read_text() == "out\nerr\na\nb\n"
    with teed_to(None, limit=1) as nothing:
        assert nothing is None
        assert (sys.stdout, sys.stderr) == before
    assert Path(tmp_path / "log.txt").stat().st_size == len("out\nerr\na\nb\n")

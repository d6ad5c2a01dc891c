"""The runner's ordinary outcomes: success, a failing cell, tags, metadata, streaming."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest
from nbjobs.job_runner import ExitCode, read_status, run_notebook

from .helpers import (
    NOTEBOOKS,
    code,
    gpu_env,
    leftovers,
    markdown,
    read_json,
    run_cli,
    runner_command,
    wait_for,
)


def test_success_writes_executed_copy_and_leaves_input_alone(make_notebook, tmp_path):
    source = make_notebook(markdown("# Title"), "x = 6 * 7", "print(x)", "x")
    before = source.read_bytes()
    output = tmp_path / "out.ipynb"
    status = tmp_path / "status.json"

    proc = run_cli(source, output, "--status-file", status)

    assert proc.returncode == ExitCode.SUCCEEDED, proc.stderr
    assert source.read_bytes() == before
    nb = nbformat.read(output, as_version=4)
    assert nb.cells[2].outputs[0]["text"] == "42\n"
    assert nb.cells[3].outputs[0]["data"]["text/plain"] == "42"
    assert [c.execution_count for c in nb.cells[1:]] == [1, 2, 3]
    final = read_status(status)
    assert final is not None
    assert (final.state, final.exit_code, final.cells_done, final.cells_total) == (
        "succeeded",
        0,
        3,
        3,
    )
    assert final.finished_at is not None
    assert final.error is None
    assert leftovers(tmp_path) == []


def test_output_metadata_records_the_run(make_notebook, tmp_path):
    source = make_notebook("import time; time.sleep(0.3)", "1 + 1")
    output = tmp_path / "out.ipynb"

    proc = subprocess.run(
        runner_command(source, output, "-p", "n", "3"),
        capture_output=True,
        text=True,
        timeout=120,
        env=gpu_env(tmp_path, CUDA_VISIBLE_DEVICES=""),  # whatever GPUs this host has
    )

    assert proc.returncode == 0, proc.stderr
    nb = nbformat.read(output, as_version=4)
    meta = nb.metadata["nbjobs"]
    assert meta["state"] == "succeeded"
    assert meta["parameters"] == {"n": 3}
    assert meta["kernel"] == {"name": "python3", "language": "python"}
    assert meta["host"]
    assert meta["started_at"] < meta["finished_at"]
    assert meta["gpus"] == {"cuda_visible_devices": "", "devices": "none", "source": "none"}
    durations = [
        c.metadata["nbjobs"]["duration_seconds"] for c in nb.cells if c.cell_type == "code"
    ]
    assert len(durations) == 3  # the injected cell too
    assert durations[1] >= 0.3


def test_failing_cell_keeps_everything_up_to_it(make_notebook, tmp_path):
    source = make_notebook("print('first')", "raise ValueError('bad value 7')", "print('never')")
    output = tmp_path / "out.ipynb"
    status = tmp_path / "status.json"

    proc = run_cli(source, output, "--status-file", status)

    assert proc.returncode == ExitCode.FAILED
    nb = nbformat.read(output, as_version=4)
    assert "nbjobs-banner" in nb.cells[0].metadata["tags"]
    assert "ValueError: bad value 7" in nb.cells[0].source
    final = read_status(status)
    assert final is not None
    assert final.error is not None
    assert final.state == "failed"
    assert final.message == "code cell 2 of 3 raised ValueError: bad value 7"
    failed = nb.cells[final.error.cell_index]
    assert failed.source == "raise ValueError('bad value 7')"
    assert failed.outputs[0]["output_type"] == "error"
    assert final.error.ename == "ValueError"
    assert final.error.evalue == "bad value 7"
    assert any("bad value 7" in line for line in final.error.traceback)
    assert not any("\x1b[" in line for line in final.error.traceback)
    never = nb.cells[-1]
    assert never.source == "print('never')"
    assert never.outputs == []
    assert never.execution_count is None
    assert nb.metadata["nbjobs"]["error"]["cell_index"] == final.error.cell_index
    assert "ValueError: bad value 7" in proc.stderr  # the traceback is in the job's log


def test_raises_exception_tag_lets_the_run_go_on(make_notebook, tmp_path):
    source = make_notebook(code("1 / 0", "raises-exception"), "print('went on')")
    output = tmp_path / "out.ipynb"

    proc = run_cli(source, output)

    assert proc.returncode == ExitCode.SUCCEEDED, proc.stderr
    nb = nbformat.read(output, as_version=4)
    assert nb.cells[0].outputs[0]["ename"] == "ZeroDivisionError"
    assert nb.cells[1].outputs[0]["text"] == "went on\n"


def test_input_fails_at_once_instead_of_waiting(make_notebook, tmp_path):
    source = make_notebook("name = input('your name? ')", "print('after')")
    output = tmp_path / "out.ipynb"
    # stdin left open: a runner that forwarded input requests would block forever.
    proc = subprocess.run(
        runner_command(source, output, "--status-file", tmp_path / "s.json"),
        stdin=subprocess.PIPE,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert proc.returncode == ExitCode.FAILED
    final = read_status(tmp_path / "s.json")
    assert final is not None
    assert final.error is not None
    assert final.error.ename == "StdinNotImplementedError"
    assert "pass the value as a parameter" in (final.message or "")


def test_cwd_defaults_to_the_notebook_folder_and_can_be_set(make_notebook, tmp_path):
    source = make_notebook("import os; print(os.getcwd())")
    other = tmp_path / "elsewhere"
    other.mkdir()

    run_cli(source, tmp_path / "a.ipynb", check=True)
    run_cli(source, tmp_path / "b.ipynb", "--cwd", other, check=True)

    first = nbformat.read(tmp_path / "a.ipynb", as_version=4).cells[0].outputs[0]["text"]
    second = nbformat.read(tmp_path / "b.ipynb", as_version=4).cells[0].outputs[0]["text"]
    assert Path(first.strip()) == source.parent
    assert Path(second.strip()) == other


def test_old_notebook_with_stale_outputs_and_unicode(tmp_path):
    output = tmp_path / "out.ipynb"

    proc = run_cli(NOTEBOOKS / "old_format_no_ids.ipynb", output)

    assert proc.returncode == 0, proc.stderr
    nb = nbformat.read(output, as_version=4)
    outputs = nb.cells[1].outputs
    assert [o["text"] for o in outputs] == ["héllo, wörld ✓\n"]  # the stale output is gone
    assert "héllo, wörld ✓" in proc.stdout


def test_output_streams_to_the_log_while_the_job_runs(make_notebook, tmp_path):
    source = make_notebook(
        "import time\nprint('tick 1', flush=True)\ntime.sleep(30)\nprint('tick 2')"
    )
    status = tmp_path / "s.json"
    with subprocess.Popen(
        runner_command(source, tmp_path / "out.ipynb", "--status-file", status),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line == "tick 1\n"
            running = read_status(status)
            assert running is not None
            assert running.state == "running"
            assert running.cells_done == 0
            assert running.current_cell == 0
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def test_cell_stderr_streams_to_the_log_stderr_while_the_job_runs(make_notebook, tmp_path):
    source = make_notebook(
        "import sys, time\n"
        "print('to stdout', flush=True)\n"
        "sys.stderr.write('warning: to stderr\\n'); sys.stderr.flush()\n"
        "time.sleep(30)"
    )
    with subprocess.Popen(
        runner_command(source, tmp_path / "out.ipynb"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            assert proc.stderr is not None
            stderr_lines = []
            while (line := proc.stderr.readline()) and line != "warning: to stderr\n":
                stderr_lines.append(line)
            assert line == "warning: to stderr\n", stderr_lines  # while the cell still runs
            assert proc.poll() is None
        finally:
            proc.terminate()
            stdout, stderr = proc.communicate(timeout=30)
    assert stdout.startswith("to stdout\n")
    assert "to stderr" not in stdout
    assert "to stdout" not in "".join(stderr_lines) + stderr


def test_status_file_is_always_whole_while_it_is_replaced(make_notebook, tmp_path):
    # Many quick cells: the file is replaced dozens of times a second while we read.
    cells = [f"import time; time.sleep(0.004); v{i} = {i}" for i in range(400)]
    source = make_notebook(*cells)
    status = tmp_path / "s.json"
    seen: list[tuple[str, int]] = []
    with subprocess.Popen(
        runner_command(source, tmp_path / "out.ipynb", "--status-file", status),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as proc:
        while True:
            finished = proc.poll() is not None  # then this read is the last one
            try:
                text = status.read_text()
            except FileNotFoundError:
                assert not seen, "the status file vanished while being replaced"
                assert not finished
                continue
            data = json.loads(text)  # a torn or empty file fails here
            assert data["cells_total"] == 400
            seen.append((data["state"], data["cells_done"]))
            if finished:
                break
        assert proc.returncode == ExitCode.SUCCEEDED

    done = [n for _, n in seen]
    assert done == sorted(done), "progress went backwards"
    assert seen[-1] == ("succeeded", 400)
    running = sorted({n for state, n in seen if state == "running"})
    assert len(running) >= 5, f"saw too little progress: {running}"
    assert len(seen) > 100  # the reader really did race the writer


def test_status_file_reports_progress_mid_run(make_notebook, tmp_path):
    source = make_notebook("a = 1", "b = 2", "import time; time.sleep(30)", "c = 3")
    status = tmp_path / "s.json"
    proc = subprocess.Popen(
        runner_command(source, tmp_path / "out.ipynb", "--status-file", status),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(
            lambda: (s := read_status(status)) is not None and s.cells_done == 2,
            what="two cells done",
        )
        data = read_json(status)
        assert data["state"] == "running"
        assert data["cells_total"] == 4
        assert data["current_cell"] == 2
        assert data["started_at"] <= data["updated_at"]
        assert data["finished_at"] is None
        assert data["exit_code"] is None
        assert data["pid"] == proc.pid
        assert data["version"] == 1
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_python_api_returns_the_result(make_notebook, tmp_path):
    source = make_notebook("raise KeyError('k')")

    result = run_notebook(source, tmp_path / "out.ipynb")

    assert result.exit_code == ExitCode.FAILED
    assert result.state == "failed"
    assert result.error is not None
    assert result.error.ename == "KeyError"
    assert result.output_path == tmp_path / "out.ipynb"
    assert (result.cells_done, result.cells_total) == (0, 1)


def test_help_documents_every_exit_code():
    out = subprocess.run(
        runner_command("--help"), capture_output=True, text=True, check=True
    ).stdout
    for code_ in ExitCode:
        assert f"  {code_.value}  {code_.name.lower().replace('_', ' ')}" in out


@pytest.mark.parametrize("content", ["{}", "[1, 2]", "not json"])
def test_read_status_rejects_what_is_not_a_status(tmp_path, content):
    from nbjobs.job_runner import StatusFileError

    path = tmp_path / "s.json"
    assert read_status(path) is None
    path.write_text(content)
    with pytest.raises(StatusFileError):
        read_status(path)


def test_runner_imports_nothing_else_of_nbjobs():
    code_ = (
        "import sys, nbjobs.job_runner, nbjobs.job_runner.__main__\n"
        "extra = sorted(m for m in sys.modules if m.startswith('nbjobs') "
        "and not m.startswith('nbjobs.job_runner') and m != 'nbjobs')\n"
        "heavy = sorted(m for m in ('jupyterhub', 'sqlalchemy', 'kubernetes', 'pydantic', "
        "'yaml', 'tornado.web') if m in sys.modules)\n"
        "print(json.dumps([extra, heavy]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", "import json\n" + code_], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == [[], []]


def test_the_runner_starts_without_compiling_optional_iri_grammars(make_notebook, tmp_path):
    # jsonschema (under nbformat) builds lark grammars at import when rfc3987-syntax is
    # installed, as in most Jupyter images: most of a second of every job's start-up.
    source = make_notebook("x = 1")
    command = [sys.executable, "-X", "importtime", "-m", "nbjobs.job_runner"]
    out = subprocess.run(
        [*command, str(source), str(tmp_path / "out.ipynb")],
        capture_output=True,
        text=True,
        check=True,
    )
    imported = {line.split("|")[-1].strip() for line in out.stderr.splitlines() if "|" in line}
    assert "nbformat" in imported  # the check has teeth: the executor did load
    assert not {"lark", "lark.lark"} & imported


def test_reading_status_files_does_not_load_the_executor():
    # the job service imports this package for the status file; it needs no kernel client
    code_ = (
        "import sys, json, nbjobs.job_runner as r\n"
        "r.read_status, r.RunStatus\n"
        "print(json.dumps(sorted(m for m in ('nbformat', 'nbclient', 'jupyter_client') "
        "if m in sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code_], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == []
    assert callable(__import__("nbjobs.job_runner", fromlist=["run_notebook"]).run_notebook)


def test_the_kernel_is_reached_through_sockets_only_its_user_can_open(make_notebook, tmp_path):
    # on a shared machine, a kernel on loopback TCP could be listened to by any local user
    source = make_notebook(
        "from ipykernel.kernelapp import IPKernelApp\n"
        "import os, stat\n"
        "app = IPKernelApp.instance()\n"
        "folder = os.path.dirname(app.ip)\n"
        "print(app.transport, oct(stat.S_IMODE(os.stat(folder).st_mode)), folder)"
    )
    output = tmp_path / "out.ipynb"
    short = Path(tempfile.mkdtemp(prefix="t-", dir="/tmp"))  # a TMPDIR sockets fit in
    long = tmp_path / ("x" * 80)  # one they do not: /tmp then
    long.mkdir()
    try:
        found = []
        for tmpdir in (short, long):
            proc = run_cli(source, output, env={**os.environ, "TMPDIR": str(tmpdir)})
            assert proc.returncode == ExitCode.SUCCEEDED, proc.stderr
            assert "without encryption" not in proc.stderr
            found.append(nbformat.read(output, as_version=4).cells[0].outputs[0].text.split())
    finally:
        shutil.rmtree(short, ignore_errors=True)

    for (transport, mode, folder), parent in zip(found, (short, Path("/tmp")), strict=True):
        assert (transport, mode) == ("ipc", "0o700")
        assert Path(folder).parent == parent
        assert not Path(folder).exists()  # the sockets go with the job

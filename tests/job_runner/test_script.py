"""The runner's ``--script`` and ``--command``: a script's output is its log, its exit
code decides the state, and a time limit stops its whole process group."""

from __future__ import annotations

from nbjobs.job_runner import ExitCode

from .helpers import read_json, run_cli


def test_a_script_succeeds_and_its_output_is_kept_in_output(tmp_path):
    script = tmp_path / "hello.py"
    script.write_text("import os\nprint('hello', os.environ['NBJOBS_PARAM_WHO'])\n")
    out, status = tmp_path / "hello.log", tmp_path / "status.json"

    proc = run_cli(script, out, "--script", "-p", "who", "ada", "--status-file", status)

    assert proc.returncode == ExitCode.SUCCEEDED, proc.stderr
    assert out.read_text() == "hello ada\n"
    assert "hello ada" in proc.stdout  # the job's log
    final = read_json(status)
    assert (final["state"], final["exit_code"], final["message"]) == ("succeeded", 0, None)


def test_output_past_the_limit_keeps_its_start_and_end_and_says_what_was_left_out(tmp_path):
    script = tmp_path / "chatty.py"
    script.write_text("for i in range(5000):\n    print(f'line {i:05d}')\n")
    out = tmp_path / "chatty.log"

    proc = run_cli(script, out, "--script", "--max-output", "2K")

    assert proc.returncode == ExitCode.SUCCEEDED, proc.stderr
    kept = out.read_text()
    assert kept.startswith("line 00000\n")
    assert kept.rstrip().endswith("line 04999")
    assert "bytes of output left out here; the end follows" in kept
    assert len(kept) < 20_000


def test_a_script_killed_by_a_signal_says_so(tmp_path):
    script = tmp_path / "boom.sh"
    script.write_text("echo about to go\nkill -9 $$\n")
    status = tmp_path / "status.json"

    proc = run_cli(script, tmp_path / "boom.log", "--script", "--status-file", status)

    assert proc.returncode == ExitCode.FAILED
    assert read_json(status)["message"] == "boom.sh was killed by SIGKILL: about to go"


def test_a_file_that_is_no_script_is_bad_input(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("hi")
    proc = run_cli(notes, tmp_path / "n.log", "--script")
    assert proc.returncode == ExitCode.BAD_INPUT
    assert "is not a script this runner starts" in proc.stderr


def test_a_command_runs_in_its_folder(tmp_path):
    (tmp_path / "here").mkdir()
    out = tmp_path / "c.log"
    proc = run_cli("-", out, "--command", "pwd; echo $0", "--cwd", tmp_path / "here")
    assert proc.returncode == ExitCode.SUCCEEDED, proc.stderr
    lines = out.read_text().splitlines()
    assert lines[0] == str(tmp_path / "here")
    assert lines[1] in ("/bin/bash", "bash")

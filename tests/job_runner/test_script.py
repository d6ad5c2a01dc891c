"""The runner's ``--script`` and ``--command``: a script's output is its log, its exit
code decides the state, and a time limit stops its whole process group."""

from __future__ import annotations

import pytest
from nbjobs.job_runner import ExitCode

from tests.loops import cpu_spin, spun_share

from .helpers import gpu_env, read_json, run_cli


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


def test_a_scripts_gpus_cpu_and_memory_are_sampled_like_a_notebooks(tmp_path):
    h100 = {
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": "GPU-aaaa0000-1111-2222-3333-444444444444",
        "memory_mib": 81559,
        "readings": [{"utilization": 70, "memory_used_mib": 3000}],
    }
    env = gpu_env(tmp_path, nvml_devices=[h100])
    script = tmp_path / "train.py"
    # the script's own child spins a core: the runner's whole tree is counted
    script.write_text(
        "import subprocess, sys\n"
        f"subprocess.run([sys.executable, '-c', {cpu_spin(2.5, str(tmp_path / 'share.txt'))!r}],"
        " check=True)\n"
        "print('trained')\n"
    )
    status = tmp_path / "status.json"

    proc = run_cli(
        script, tmp_path / "train.log", "--script", "--status-file", status,
        "--telemetry-interval", "1", env=env,
    )  # fmt: skip

    assert proc.returncode == ExitCode.SUCCEEDED, proc.stderr
    final = read_json(status)
    latest, summary = final["telemetry"], final["telemetry_summary"]
    assert latest["gpus"][0]["utilization_percent"] == 70.0
    assert latest["gpus"][0]["memory_used_bytes"] == 3000 * 1024 * 1024
    assert summary["samples"] >= 2
    [gpu] = summary["gpus"]
    assert gpu["utilization_mean_percent"] == 70.0
    assert 2 < gpu["allocated_seconds"] < 30
    assert gpu["busy_seconds"] == pytest.approx(0.7 * gpu["allocated_seconds"], abs=0.002)
    share = spun_share(tmp_path / "share.txt")  # the child's share of a core as it spun
    assert summary["cpu_peak_percent"] >= 0.7 * share, (summary, share)
    assert final["started_at"] <= summary["since"] < summary["until"] <= final["finished_at"]


def test_a_command_with_telemetry_off_samples_nothing(tmp_path):
    status = tmp_path / "status.json"
    proc = run_cli(
        "-", tmp_path / "c.log", "--command", "sleep 1.2", "--status-file", status,
        "--telemetry-interval", "0",
    )  # fmt: skip
    assert proc.returncode == ExitCode.SUCCEEDED, proc.stderr
    final = read_json(status)
    assert (final["telemetry"], final["telemetry_summary"]) == (None, None)

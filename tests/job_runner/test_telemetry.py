"""Telemetry: while a notebook runs, the runner samples the GPUs the job was given and
its processes' CPU and memory into the status file, and sums them up in the output.

The GPUs are stand-ins (``stand_ins/``: an NVML module and an nvidia-smi that replay
scripted readings), so these tests pass the same on a laptop and on a GPU node; the
kernels, processes and files are real.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbjobs.job_runner.status import parse_status
from nbjobs.job_runner.telemetry import ProcessTree, Summary

from tests.loops import cpu_spin, spun_share

from .helpers import gpu_env, read_json, run_cli, runner_command, wait_for

MiB = 1024 * 1024


def gpu(letter: str, **script: Any) -> dict[str, Any]:
    """A stand-in H100 whose UUID starts with ``GPU-<letter*4>``, readings as scripted."""
    return {
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": f"GPU-{letter * 4}0000-1111-2222-3333-444444444444",
        "memory_mib": 81559,
        **script,
    }


def steady(utilization: float, memory_mib: int = 0, **more: Any) -> dict[str, Any]:
    """A script holding one reading for the whole run."""
    return {"readings": [{"utilization": utilization, "memory_used_mib": memory_mib, **more}]}


def trouble_once_sampled(tmp_path: Path, then: float) -> tuple[Path, str]:
    """A file that sends a stand-in GPU into trouble (``lost_when``, ``hang_when``) and a
    cell that makes it once the runner has put a good reading of every GPU in its status
    file, then runs ``then`` seconds more: the GPU fails after a sample, however slowly the
    machine starts the kernel."""
    mark, status = tmp_path / "trouble", tmp_path / "status.json"
    cell = f"""import json, pathlib, time
status = pathlib.Path({str(status)!r})

def sampled():
    try:
        latest = json.loads(status.read_text()).get("telemetry")
    except (OSError, ValueError):
        return False
    return bool(latest) and all(g["utilization_percent"] is not None for g in latest["gpus"])

while not sampled():
    time.sleep(0.05)
pathlib.Path({str(mark)!r}).touch()
time.sleep({then})"""
    return mark, cell


def run(tmp_path: Path, source: Path, env: dict[str, str], *args: Any) -> dict[str, Any]:
    """Run the runner to the end; its exit code, final status, output and log."""
    output, status = tmp_path / "out.ipynb", tmp_path / "status.json"
    done = run_cli(source, output, "--status-file", status, *args, env=env)
    notebook = nbformat.read(output, as_version=4) if output.exists() else None
    return {
        "code": done.returncode,
        "log": done.stderr,
        "status": read_json(status) if status.exists() else None,
        "notebook": notebook,
    }


def test_samples_reach_the_status_file_during_one_long_cell(make_notebook, tmp_path):
    scripted = [
        gpu("a", **steady(50, 2000, temperature=61, power_watts=312.5)),
        # 10 % with 1000 MiB for 1.5 s, then 90 % with 6000 MiB to the end
        gpu(
            "b",
            readings=[
                {"utilization": 10, "memory_used_mib": 1000},
                {"utilization": 90, "memory_used_mib": 6000},
            ],
            every=1.5,
        ),
    ]
    env = gpu_env(tmp_path, nvml_devices=scripted)
    # the long cell lasts 4.5 s at least, and until the test has seen two samples in it
    go = tmp_path / "go"
    long_cell = (
        "import os, time\nt = time.monotonic()\n"
        f"while not os.path.exists({str(go)!r}) or time.monotonic() - t < 4.5:\n"
        "    time.sleep(0.05)"
    )
    source = make_notebook(long_cell, "print('done')")
    output, status_file = tmp_path / "out.ipynb", tmp_path / "status.json"
    args = [source, output, "--status-file", status_file, "--telemetry-interval", "1"]
    runner = subprocess.Popen(runner_command(*args), env=env, stdin=subprocess.DEVNULL)
    seen_in_the_cell: set[str] = set()
    try:

        def sampled_twice_in_the_long_cell() -> bool:
            try:
                status = read_json(status_file)
            except (OSError, ValueError):
                return False
            if status["state"] == "running" and status["cells_done"] == 0 and status["telemetry"]:
                seen_in_the_cell.add(status["telemetry"]["at"])
            return len(seen_in_the_cell) >= 2

        wait_for(sampled_twice_in_the_long_cell, timeout=60, what="two samples in one cell")
    finally:
        go.touch()  # the long cell may end now
        assert runner.wait(timeout=60) == 0

    final = read_json(status_file)
    assert final["state"] == "succeeded"
    latest, summary = final["telemetry"], final["telemetry_summary"]
    assert latest["gpus"][0] == {
        "index": "0",
        "uuid": scripted[0]["uuid"],
        "name": "NVIDIA H100 80GB HBM3",
        "utilization_percent": 50.0,
        "memory_used_bytes": 2000 * MiB,
        "memory_total_bytes": 81559 * MiB,
        "temperature_celsius": 61.0,
        "power_watts": 312.5,
        "error": None,
    }
    assert latest["cpu_percent"] is not None
    assert latest["memory_bytes"] > 10 * MiB  # the runner and the kernel

    # one sample a second from the start (the kernel's start too), and one when the cells
    # ended: as many as the seconds it ran, however slowly the machine ran it
    first, second = summary["gpus"]
    assert 5 <= summary["samples"] <= first["allocated_seconds"] + 2
    assert summary["interval_seconds"] == 1.0
    assert final["started_at"] <= summary["since"] < summary["until"] <= final["finished_at"]
    assert first["utilization_mean_percent"] == first["utilization_peak_percent"] == 50.0
    ran = datetime.fromisoformat(final["finished_at"]) - datetime.fromisoformat(final["started_at"])
    assert 4.5 < first["allocated_seconds"] <= ran.total_seconds() + 0.01
    assert first["busy_seconds"] == pytest.approx(0.5 * first["allocated_seconds"], abs=0.002)
    assert first["memory_peak_bytes"] == 2000 * MiB
    assert second["utilization_peak_percent"] == 90.0
    assert 10 < second["utilization_mean_percent"] < 90
    assert second["memory_peak_bytes"] == 6000 * MiB
    assert second["memory_total_bytes"] == 81559 * MiB
    assert second["allocated_seconds"] == first["allocated_seconds"]
    mean_busy = second["utilization_mean_percent"] / 100 * second["allocated_seconds"]
    assert second["busy_seconds"] == pytest.approx(mean_busy, abs=0.01)
    assert summary["memory_peak_bytes"] >= latest["memory_bytes"]

    # the output carries the final summary, and stays a valid notebook
    notebook = nbformat.read(output, as_version=4)
    nbformat.validate(notebook)
    assert notebook.metadata["nbjobs"]["telemetry"] == summary


@pytest.mark.parametrize(
    ("visible", "chosen"),
    [
        ("1", [1]),
        ("GPU-cccc0000-1111-2222-3333-444444444444", [2]),
        ("GPU-cccc,0", [2, 0]),  # the job's device 0 is the node's GPU 2
        (None, [0, 1, 2]),
    ],
    ids=["index", "uuid", "order", "unset"],
)
def test_only_the_gpus_the_job_was_given_are_sampled(make_notebook, tmp_path, visible, chosen):
    # each GPU busy at its own level, so a reading says which GPU it came from
    node = [gpu("a", **steady(10)), gpu("b", **steady(20)), gpu("c", **steady(30))]
    extra = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    env = gpu_env(tmp_path, nvml_devices=node, **extra)

    done = run(tmp_path, make_notebook("1"), env, "--telemetry-interval", "1")

    sample = done["status"]["telemetry"]
    assert [(g["index"], g["uuid"], g["utilization_percent"]) for g in sample["gpus"]] == [
        (str(position), node[i]["uuid"], 10.0 * (i + 1)) for position, i in enumerate(chosen)
    ]


MIG_GPU = {
    "name": "NVIDIA H100 80GB HBM3",
    "uuid": "GPU-eeee0000-1111-2222-3333-444444444444",
    "memory_mib": 81559,
    **steady(40, temperature=55),
    "mig": [
        {
            "name": "NVIDIA H100 80GB HBM3 MIG 1g.10gb",
            "uuid": "MIG-1a1a1a1a-0000-0000-0000-000000000000",
            "memory_mib": 9984,
            **steady(0, 100),
        },
        None,
        {
            "name": "NVIDIA H100 80GB HBM3 MIG 3g.40gb",
            "uuid": "MIG-3c3c3c3c-0000-0000-0000-000000000000",
            "memory_mib": 40192,
            **steady(0, 3000),
        },
    ],
}


def test_a_mig_slice_is_sampled_as_the_slice(make_notebook, tmp_path):
    visible = "MIG-3c3c3c3c-0000-0000-0000-000000000000"
    env = gpu_env(tmp_path, nvml_devices=[MIG_GPU], CUDA_VISIBLE_DEVICES=visible)

    done = run(tmp_path, make_notebook("1"), env, "--telemetry-interval", "1")

    (entry,) = done["status"]["telemetry"]["gpus"]
    assert entry == {
        "index": "0",
        "uuid": visible,
        "name": "NVIDIA H100 80GB HBM3 MIG 3g.40gb",
        "utilization_percent": None,  # NVML has none for a slice
        "memory_used_bytes": 3000 * MiB,  # the slice's own
        "memory_total_bytes": 40192 * MiB,
        "temperature_celsius": 55.0,  # its GPU's
        "power_watts": None,  # shared by the slices
        "error": None,
    }
    (totals,) = done["status"]["telemetry_summary"]["gpus"]
    assert totals["utilization_mean_percent"] is None
    assert totals["busy_seconds"] == 0
    assert totals["allocated_seconds"] > 0


def test_a_node_in_mig_mode_is_sampled_by_its_slices_not_twice(make_notebook, tmp_path):
    env = gpu_env(tmp_path, nvml_devices=[MIG_GPU])  # CUDA_VISIBLE_DEVICES unset

    done = run(tmp_path, make_notebook("1"), env, "--telemetry-interval", "1")

    assert [g["uuid"][:12] for g in done["status"]["telemetry"]["gpus"]] == [
        "MIG-1a1a1a1a",
        "MIG-3c3c3c3c",
    ]


def test_without_driver_samples_the_current_utilisation_is_read(make_notebook, tmp_path):
    env = gpu_env(tmp_path, nvml_devices=[gpu("a", **steady(35))], driver_samples=False)

    done = run(tmp_path, make_notebook("1"), env, "--telemetry-interval", "1")

    assert done["status"]["telemetry"]["gpus"][0]["utilization_percent"] == 35.0


def test_a_gpu_that_stops_answering_is_recorded_and_the_job_succeeds(make_notebook, tmp_path):
    lost, cell = trouble_once_sampled(tmp_path, then=2)
    node = [gpu("a", **steady(60)), gpu("b", **steady(80), lost_when=str(lost))]
    env = gpu_env(tmp_path, nvml_devices=node)
    source = make_notebook(cell)

    done = run(tmp_path, source, env, "--telemetry-interval", "1")

    assert done["code"] == 0, done["log"]
    assert done["status"]["state"] == "succeeded"
    healthy, lost = done["status"]["telemetry"]["gpus"]
    assert healthy["utilization_percent"] == 60.0
    assert healthy["error"] is None
    assert lost == {
        "index": "1",
        "uuid": node[1]["uuid"],
        "name": node[1]["name"],
        "utilization_percent": None,
        "memory_used_bytes": None,
        "memory_total_bytes": None,
        "temperature_celsius": None,
        "power_watts": None,
        "error": "NVML: GPU is lost",
    }
    assert f"GPU 1 ({node[1]['uuid']}) gave no reading (NVML: GPU is lost)" in done["log"]
    healthy_totals, lost_totals = done["status"]["telemetry_summary"]["gpus"]
    # it was the job's all along; it was measured busy only while it answered
    assert lost_totals["allocated_seconds"] == healthy_totals["allocated_seconds"]
    assert lost_totals["utilization_peak_percent"] == 80.0
    assert 0 < lost_totals["busy_seconds"] < 0.8 * lost_totals["allocated_seconds"]
    assert done["notebook"].metadata["nbjobs"]["telemetry"] == done["status"]["telemetry_summary"]


def test_a_gpu_whose_driver_hangs_holds_up_neither_the_cells_nor_the_end(make_notebook, tmp_path):
    hung, cell = trouble_once_sampled(tmp_path, then=1.5)
    node = [gpu("a", **steady(70), hang_when=str(hung))]
    env = gpu_env(tmp_path, nvml_devices=node)
    source = make_notebook(cell, "print('after')")

    started = time.monotonic()
    done = run(tmp_path, source, env, "--telemetry-interval", "1")
    took = time.monotonic() - started

    assert done["code"] == 0, done["log"]
    # the cells, the wait for a last sample (2 s) and for the GPU list (5 s) at most, with
    # room for a loaded machine's kernel start: far from the hour the driver would block
    assert took < 90
    summary = done["status"]["telemetry_summary"]
    assert summary["samples"] >= 1  # those before the driver hung
    assert summary["gpus"][0]["utilization_peak_percent"] == 70.0
    gpus = done["notebook"].metadata["nbjobs"]["gpus"]
    assert gpus["error"] == "the GPU driver did not answer within 5 s"


SMI_NODE = [
    gpu("a", **steady(25, 1500, temperature=48, power_watts=101.25)),
    gpu("b", **steady(75, 7000)),
]


@pytest.mark.parametrize("nvml", [False, None], ids=["no-pynvml", "no-driver"])
def test_nvidia_smi_when_nvml_is_missing(make_notebook, tmp_path, nvml):
    lost, cell = trouble_once_sampled(tmp_path, then=1.5)
    node = [SMI_NODE[0], {**SMI_NODE[1], "lost_when": str(lost)}]
    env = gpu_env(tmp_path, nvml_devices=nvml, smi_devices=node)
    source = make_notebook(cell)

    done = run(tmp_path, source, env, "--telemetry-interval", "1")

    assert done["code"] == 0, done["log"]
    assert "2 GPUs from nvidia-smi" in done["log"]
    first, second = done["status"]["telemetry"]["gpus"]
    assert first == {
        "index": "0",
        "uuid": SMI_NODE[0]["uuid"],
        "name": "NVIDIA H100 80GB HBM3",
        "utilization_percent": 25.0,
        "memory_used_bytes": 1500 * MiB,
        "memory_total_bytes": 81559 * MiB,
        "temperature_celsius": 48.0,
        "power_watts": 101.25,
        "error": None,
    }
    # a GPU nvidia-smi can no longer reach: its words, and the other GPU goes on
    assert second["error"] == (
        "nvidia-smi: Unable to determine the device handle for GPU0001:3B:00.0: Unknown Error"
    )
    assert second["utilization_percent"] is None
    totals = done["status"]["telemetry_summary"]["gpus"]
    assert totals[0]["utilization_mean_percent"] == 25.0
    assert totals[1]["utilization_peak_percent"] == 75.0


def test_nvidia_smi_samples_only_the_gpus_given(make_notebook, tmp_path):
    env = gpu_env(tmp_path, smi_devices=SMI_NODE, CUDA_VISIBLE_DEVICES="GPU-bbbb")

    done = run(tmp_path, make_notebook("1"), env, "--telemetry-interval", "1")

    (entry,) = done["status"]["telemetry"]["gpus"]
    assert (entry["index"], entry["uuid"], entry["utilization_percent"]) == (
        "0",
        SMI_NODE[1]["uuid"],
        75.0,
    )


def test_no_gpu_at_all_still_samples_cpu_and_memory(make_notebook, tmp_path):
    env = gpu_env(tmp_path, psutil=False)  # no pynvml, no nvidia-smi, and no psutil needed
    busy = cpu_spin(2.5, str(tmp_path / "share.txt"))

    done = run(tmp_path, make_notebook(busy), env, "--telemetry-interval", "1")

    assert done["code"] == 0, done["log"]
    assert "no GPU readings (NVML did not start, no nvidia-smi answered)" in done["log"]
    latest, summary = done["status"]["telemetry"], done["status"]["telemetry_summary"]
    assert latest["gpus"] == summary["gpus"] == []
    assert latest["memory_bytes"] > 10 * MiB
    # the kernel spins (the runner alone idles near 0): the tree's peak of 1 s samples is
    # at least the share of a core the kernel got over its spin, less sampling's edges
    share = spun_share(tmp_path / "share.txt")
    assert summary["cpu_peak_percent"] >= 0.7 * share, (summary, share)
    assert 0 < summary["cpu_mean_percent"] <= summary["cpu_peak_percent"]
    assert summary["memory_peak_bytes"] >= latest["memory_bytes"]


def test_telemetry_off_samples_nothing(make_notebook, tmp_path):
    env = gpu_env(tmp_path, nvml_devices=[gpu("a", **steady(50))])

    done = run(
        tmp_path, make_notebook("import time\ntime.sleep(1.5)"), env, "--telemetry-interval", "0"
    )

    assert done["code"] == 0, done["log"]
    assert done["status"]["telemetry"] is None
    assert done["status"]["telemetry_summary"] is None
    assert done["notebook"].metadata["nbjobs"]["telemetry"] is None
    assert "[nbjobs] telemetry" not in done["log"]


def test_by_default_every_10_s_and_a_short_job_still_gets_its_sample(make_notebook, tmp_path):
    env = gpu_env(tmp_path, nvml_devices=[gpu("a", **steady(45))])

    done = run(tmp_path, make_notebook("1"), env)

    summary = done["status"]["telemetry_summary"]
    assert summary["interval_seconds"] == 10.0
    assert summary["samples"] == 1  # the last one, when the cells ended
    assert summary["gpus"][0]["utilization_mean_percent"] == 45.0
    assert "telemetry: every 10 s, 1 GPU from NVML" in done["log"]


@pytest.mark.parametrize(
    ("value", "says"),
    [("0.5", "at least 1"), ("-1", "not an interval"), ("often", "not a number of seconds")],
)
def test_a_bad_interval_is_refused_before_anything_runs(make_notebook, tmp_path, value, says):
    done = run_cli(make_notebook("1"), tmp_path / "out.ipynb", "--telemetry-interval", value)

    assert done.returncode == 2
    assert says in done.stderr
    assert not (tmp_path / "out.ipynb").exists()


# -- in-process: the process tree's readers, the arithmetic -----------------------


@pytest.mark.parametrize("reader", ["_proc_reader", "_psutil_reader"])
def test_the_process_tree_counts_a_busy_child(reader):
    pytest.importorskip("psutil")
    spin = "import time\nt = time.time()\nwhile time.time() - t < 30:\n    pass"
    child = subprocess.Popen([sys.executable, "-c", spin])
    try:
        tree = ProcessTree(os.getpid())
        tree._read_members = getattr(tree, reader)()
        time.sleep(0.2)  # the child is spinning
        spun_before, began = child_cpu_seconds(child.pid), time.monotonic()
        tree.read()  # the baseline
        # a second at least, and until the child has had a tenth of a second of CPU (on
        # a machine at load 11 it gets a few percent of a core: then it takes longer)
        time.sleep(1.0)
        while child_cpu_seconds(child.pid) - spun_before < 0.1 and time.monotonic() < began + 20:
            time.sleep(0.2)
        reading = tree.read()
        spun, took = child_cpu_seconds(child.pid) - spun_before, time.monotonic() - began
        members = tree._read_members()
    finally:
        child.kill()
        child.wait()

    assert {key[0] for key, _used, _rss in members} >= {os.getpid(), child.pid}
    assert spun >= 0.1, f"the child barely ran ({spun:.2f} s in {took:.0f} s): nothing to read"
    # The child's share of a core, as the kernel counted it over the same time: on a
    # busy machine (CI's workers) it gets part of a core, and the tree must count it all.
    share = 100 * spun / took
    assert reading["cpu_percent"] >= 0.8 * share, (reading, share)
    assert reading["memory_bytes"] > 10 * MiB


def child_cpu_seconds(pid: int) -> float:
    """A process's CPU time (user and system) from /proc, as the kernel counts it."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- the arithmetic ---------------------------------------------------------------


def entry(index: str, utilization: float | None, memory: int | None = None, error=None):
    return {
        "index": index,
        "uuid": f"GPU-{index}",
        "name": "stand-in",
        "utilization_percent": utilization,
        "memory_used_bytes": memory,
        "memory_total_bytes": None if memory is None else 8 * MiB,
        "temperature_celsius": None,
        "power_watts": None,
        "error": error,
    }


def test_busy_seconds_are_the_seconds_covered_times_the_utilisation():
    summary = Summary(10.0, "2026-01-01T00:00:00.000+00:00")
    readings = [
        (10.0, 50.0, 1 * MiB, 100.0),
        (10.0, 100.0, 3 * MiB, 250.0),
        (5.0, None, None, 50.0),
    ]
    for n, (covered, utilization, memory, cpu) in enumerate(readings):
        error = "NVML: GPU is lost" if utilization is None else None
        sample = {
            "at": f"2026-01-01T00:00:{n:02d}.000+00:00",
            "gpus": [entry("0", utilization, memory, error)],
            "cpu_percent": cpu,
            "memory_bytes": 100 + n,
        }
        summary.add(sample, covered)

    result = summary.as_dict()
    assert result["samples"] == 3
    assert result["until"] == "2026-01-01T00:00:02.000+00:00"
    assert result["gpus"] == [
        {
            "index": "0",
            "uuid": "GPU-0",
            "name": "stand-in",
            "utilization_mean_percent": 75.0,  # over the 20 s it was measured
            "utilization_peak_percent": 100.0,
            "memory_peak_bytes": 3 * MiB,
            "memory_total_bytes": 8 * MiB,
            "busy_seconds": 15.0,  # 10 s at 50 % + 10 s at 100 %
            "allocated_seconds": 25.0,  # the 5 s without a reading included
        }
    ]
    assert result["cpu_mean_percent"] == 150.0  # (10 s at 100 + 10 s at 250 + 5 s at 50) / 25 s
    assert result["cpu_peak_percent"] == 250.0
    assert result["memory_peak_bytes"] == 102


def test_a_status_with_malformed_telemetry_is_still_read():
    status = {"state": "running", "telemetry": [1, 2], "telemetry_summary": "x"}

    parsed = parse_status(json.dumps(status).encode())

    assert parsed.state == "running"
    assert parsed.telemetry is None
    assert parsed.telemetry_summary is None

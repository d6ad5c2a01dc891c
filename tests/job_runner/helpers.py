"""Helpers for the runner tests: notebooks built per test, the CLI in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat

NOTEBOOKS = Path(__file__).parent / "notebooks"
PYTHON3 = {"name": "python3", "display_name": "Python 3", "language": "python"}


def code(source: str, *tags: str) -> nbformat.NotebookNode:
    """A code cell, optionally tagged."""
    cell = nbformat.v4.new_code_cell(source)
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


def markdown(source: str) -> nbformat.NotebookNode:
    """A markdown cell."""
    return nbformat.v4.new_markdown_cell(source)


def runner_command(*args: Any) -> list[str]:
    """The runner's command line, as the job service and the Kubernetes Job run it."""
    return [sys.executable, "-m", "nbjobs.job_runner", *map(str, args)]


def run_cli(*args: Any, timeout: float = 120, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """Run the runner to completion, capturing its log."""
    return subprocess.run(
        runner_command(*args),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        **kwargs,
    )


def read_json(path: Path) -> dict[str, Any]:
    """Load a JSON file."""
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def wait_for(predicate: Callable[[], bool], timeout: float = 60, what: str = "condition") -> None:
    """Poll until ``predicate`` holds; fail the test with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def leftovers(folder: Path) -> list[str]:
    """Temp files the atomic writes might have left behind."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".") or p.suffix == ".tmp")


# -- GPUs: the runner asks NVML (pynvml) first, then nvidia-smi; tests decide both --

STAND_INS = Path(__file__).parent / "stand_ins"
NO_PYNVML = 'raise ImportError("no NVML here (a test stub)")\n'
#: the stand-in NVML module (see its docstring for the script it replays)
FAKE_PYNVML = (STAND_INS / "fake_pynvml.py").read_text()
NO_PSUTIL = 'raise ImportError("no psutil here (a test stub)")\n'


def gpu_env(
    folder: Path,
    *,
    nvml_devices: list[dict[str, Any]] | bool | None = False,
    smi_script: str | None = None,
    smi_devices: list[dict[str, Any]] | None = None,
    driver_samples: bool = True,
    psutil: bool = True,
    **extra: str,
) -> dict[str, str]:
    """An environment for the runner whose GPU tools are the test's, whatever the host has.

    ``nvml_devices``: False, no pynvml at all (a stub that fails to import);
    None, a pynvml whose init fails (no driver); a list of ``{"name", "uuid",
    "memory_mib"}``, the stand-in pynvml (``stand_ins/fake_pynvml.py``) reporting those
    devices at indexes 0, 1, … (a ``"mig"`` list of the same shape, with None for an
    empty index, puts a device in MIG mode with those slices), with the readings each
    one's script gives (``"readings"``, ``"every"``, ``"then"``, ``"lost_when"``,
    ``"hang_when"``); ``driver_samples`` False: its driver keeps no utilisation samples.
    ``smi_script``: the ``nvidia-smi`` on PATH, as a shell script; ``smi_devices``: the
    stand-in ``nvidia-smi`` (``stand_ins/fake_nvidia_smi.py``) reporting these devices
    and their scripted readings; neither: none at all (PATH is cleared of every folder
    holding one). ``psutil`` False hides psutil from the runner (CPU and memory come
    from /proc). ``extra`` variables are set as given.
    """
    modules = folder / "fake-pynvml"
    modules.mkdir(parents=True, exist_ok=True)
    if nvml_devices is False:
        (modules / "pynvml.py").write_text(NO_PYNVML)
    else:
        (modules / "pynvml.py").write_text(FAKE_PYNVML)
        config = {"devices": nvml_devices, "driver_samples": driver_samples}
        (modules / "fake_nvml.json").write_text(json.dumps(config))
    if not psutil:
        (modules / "psutil.py").write_text(NO_PSUTIL)
    env = dict(os.environ)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(modules), env.get("PYTHONPATH", "")) if p)
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and not _has_smi(p)]
    if smi_script is not None or smi_devices is not None:
        bin_dir = folder / "fake-bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        smi = bin_dir / "nvidia-smi"
        if smi_devices is not None:
            stand_in = (STAND_INS / "fake_nvidia_smi.py").read_text()
            smi_script = f"#!{sys.executable}\n{stand_in}"
            (bin_dir / "fake_smi.json").write_text(json.dumps({"devices": smi_devices}))
        assert smi_script is not None
        smi.write_text(smi_script)
        smi.chmod(0o755)
        path.insert(0, str(bin_dir))
    env["PATH"] = os.pathsep.join(path)
    env.update(extra)
    return env


def _has_smi(folder: str) -> bool:
    return os.access(os.path.join(folder, "nvidia-smi"), os.X_OK)

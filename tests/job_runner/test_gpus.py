"""The output records the GPUs the job could see, as CUDA programs will see them."""

from __future__ import annotations

import os
import subprocess

import nbformat
import pytest

from .helpers import runner_command

FAKE_SMI = """#!/bin/sh
# Answers the one query the runner makes, like a two-GPU node would.
echo "0, GPU-1111aaaa-0000-0000-0000-000000000000, NVIDIA A100-SXM4-40GB, 40960"
echo "1, GPU-2222bbbb-0000-0000-0000-000000000000, NVIDIA A100-SXM4-40GB, 40960"
"""


@pytest.fixture
def fake_node(tmp_path):
    """A PATH whose nvidia-smi reports two GPUs."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(FAKE_SMI)
    smi.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}"


def gpus_recorded(make_notebook, tmp_path, env):
    source = make_notebook("1")
    output = tmp_path / "out.ipynb"
    subprocess.run(
        runner_command(source, output), env=env, capture_output=True, check=True, timeout=120
    )
    return nbformat.read(output, as_version=4).metadata["nbjobs"]["gpus"]


@pytest.mark.parametrize(
    ("visible", "uuids"),
    [
        ("1", ["GPU-2222bbbb-0000-0000-0000-000000000000"]),
        ("GPU-1111aaaa", ["GPU-1111aaaa-0000-0000-0000-000000000000"]),
        (
            "0,1",
            [
                "GPU-1111aaaa-0000-0000-0000-000000000000",
                "GPU-2222bbbb-0000-0000-0000-000000000000",
            ],
        ),
    ],
)
def test_only_the_gpus_the_job_was_given(make_notebook, tmp_path, fake_node, visible, uuids):
    env = {**os.environ, "PATH": fake_node, "CUDA_VISIBLE_DEVICES": visible}

    gpus = gpus_recorded(make_notebook, tmp_path, env)

    assert gpus["source"] == "nvidia-smi"
    assert gpus["cuda_visible_devices"] == visible
    assert [d["uuid"] for d in gpus["devices"]] == uuids
    assert gpus["devices"][0]["name"] == "NVIDIA A100-SXM4-40GB"
    assert gpus["devices"][0]["memory_total_mib"] == 40960


def test_no_gpu_given_means_none(make_notebook, tmp_path, fake_node):
    env = {**os.environ, "PATH": fake_node, "CUDA_VISIBLE_DEVICES": ""}

    gpus = gpus_recorded(make_notebook, tmp_path, env)

    assert gpus == {"cuda_visible_devices": "", "devices": "none", "source": "nvidia-smi"}


def test_a_node_without_nvidia_tools(make_notebook, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if "nvidia" not in p)

    gpus = gpus_recorded(make_notebook, tmp_path, env)

    assert gpus == {"cuda_visible_devices": "unset", "devices": "none", "source": "none"}

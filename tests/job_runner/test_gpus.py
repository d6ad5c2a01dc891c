"""The output records the GPUs the job could see, as CUDA programs will see them.

Every test decides what NVML (pynvml) and nvidia-smi report, so they pass the
same on a laptop and on a GPU node.
"""

from __future__ import annotations

import json
import subprocess

import nbformat
import pytest

from .helpers import gpu_env, runner_command

FAKE_SMI = """#!/bin/sh
# Answers the one query the runner makes, like a two-GPU node would.
echo "0, GPU-1111aaaa-0000-0000-0000-000000000000, NVIDIA A100-SXM4-40GB, 40960"
echo "1, GPU-2222bbbb-0000-0000-0000-000000000000, NVIDIA A100-SXM4-40GB, 40960"
"""


NVML_DEVICES = [
    {
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": "GPU-aaaa0000-1111-2222-3333-444444444444",
        "memory_mib": 81559,
    },
    {
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": "GPU-bbbb0000-1111-2222-3333-444444444444",
        "memory_mib": 81559,
    },
    {"name": "NVIDIA L4", "uuid": "GPU-cccc0000-1111-2222-3333-444444444444", "memory_mib": 23034},
]


@pytest.fixture
def fake_node(tmp_path):
    """An environment whose nvidia-smi reports two GPUs, and with no NVML."""

    def env(**extra):
        return gpu_env(tmp_path, smi_script=FAKE_SMI, **extra)

    return env


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
    env = fake_node(CUDA_VISIBLE_DEVICES=visible)

    gpus = gpus_recorded(make_notebook, tmp_path, env)

    assert gpus["source"] == "nvidia-smi"
    assert gpus["cuda_visible_devices"] == visible
    assert [d["uuid"] for d in gpus["devices"]] == uuids
    assert gpus["devices"][0]["name"] == "NVIDIA A100-SXM4-40GB"
    assert gpus["devices"][0]["memory_total_mib"] == 40960


def test_no_gpu_given_means_none_and_no_gpu_tool_is_asked(make_notebook, tmp_path):
    # a CPU job on a GPU node: neither NVML nor nvidia-smi is started for it (each would
    # take a tenth of a second and more of the job's start), and it records no GPU
    asked = tmp_path / "asked"
    env = gpu_env(
        tmp_path,
        nvml_devices=NVML_DEVICES,
        smi_script=f"#!/bin/sh\ntouch {asked}\n" + FAKE_SMI.split("\n", 2)[2],
        CUDA_VISIBLE_DEVICES="",
    )
    started = tmp_path / "nvml-started"
    settings = tmp_path / "fake-pynvml" / "fake_nvml.json"
    settings.write_text(json.dumps({**json.loads(settings.read_text()), "init_mark": str(started)}))
    source = make_notebook("1")
    output = tmp_path / "out.ipynb"
    done = subprocess.run(
        runner_command(source, output, "--telemetry-interval", "1"),
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    gpus = nbformat.read(output, as_version=4).metadata["nbjobs"]["gpus"]

    assert gpus == {"cuda_visible_devices": "", "devices": "none", "source": "none"}
    assert not asked.exists()
    assert not started.exists()
    assert "no GPU given to this job" in done.stderr


def test_a_node_without_nvidia_tools(make_notebook, tmp_path):
    env = gpu_env(tmp_path)  # no pynvml, no nvidia-smi, CUDA_VISIBLE_DEVICES unset

    gpus = gpus_recorded(make_notebook, tmp_path, env)

    assert gpus == {"cuda_visible_devices": "unset", "devices": "none", "source": "none"}


def nvml_devices(*indexes):
    """What the runner records for these indexes of NVML_DEVICES."""
    return [
        {
            "index": i,
            "uuid": NVML_DEVICES[i]["uuid"],
            "name": NVML_DEVICES[i]["name"],
            "memory_total_mib": NVML_DEVICES[i]["memory_mib"],
        }
        for i in indexes
    ]


@pytest.mark.parametrize(
    ("visible", "indexes"),
    [
        (None, [0, 1, 2]),
        ("2", [2]),
        ("2,0", [2, 0]),  # CUDA's order: device 0 of the job is the node's GPU 2
        ("GPU-bbbb0000-1111-2222-3333-444444444444", [1]),  # what Kubernetes hands out
        ("GPU-cccc0000,GPU-aaaa0000-1111-2222-3333-444444444444", [2, 0]),
        ("GPU-aaaa0000, 1", [0, 1]),  # UUIDs and indexes mixed, spaces around
        ("1,7,2", [1]),  # like CUDA, the list ends at an entry that names no GPU
        ("GPU-,0", []),  # a prefix naming several GPUs names none
        ("GPU-dddd0000-1111-2222-3333-444444444444", []),
    ],
    ids=["unset", "index", "order", "uuid", "uuids", "mixed", "invalid", "ambiguous", "other"],
)
def test_nvml_reports_the_visible_gpus(make_notebook, tmp_path, visible, indexes):
    extra = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    # nvidia-smi would say something else: NVML, when it answers, is what counts.
    env = gpu_env(tmp_path, nvml_devices=NVML_DEVICES, smi_script=FAKE_SMI, **extra)

    gpus = gpus_recorded(make_notebook, tmp_path, env)

    assert gpus == {
        "cuda_visible_devices": "unset" if visible is None else visible,
        "devices": nvml_devices(*indexes) if indexes else "none",
        "source": "nvml",
    }


def test_nvml_without_a_driver_falls_back_to_nvidia_smi(make_notebook, tmp_path):
    env = gpu_env(tmp_path, nvml_devices=None, smi_script=FAKE_SMI, CUDA_VISIBLE_DEVICES="0")

    gpus = gpus_recorded(make_notebook, tmp_path, env)

    assert gpus["source"] == "nvidia-smi"
    assert [d["uuid"] for d in gpus["devices"]] == ["GPU-1111aaaa-0000-0000-0000-000000000000"]


MIG_GPU = {
    "name": "NVIDIA H100 80GB HBM3",
    "uuid": "GPU-eeee0000-1111-2222-3333-444444444444",
    "memory_mib": 81559,
    "mig": [
        {
            "name": "NVIDIA H100 80GB HBM3 MIG 1g.10gb",
            "uuid": "MIG-1a1a1a1a-0000-0000-0000-000000000000",
            "memory_mib": 9984,
        },
        None,  # a slice index with no instance on it
        {
            "name": "NVIDIA H100 80GB HBM3 MIG 3g.40gb",
            "uuid": "MIG-3c3c3c3c-0000-0000-0000-000000000000",
            "memory_mib": 40192,
        },
    ],
}


def test_a_job_given_a_mig_slice_records_that_slice(make_notebook, tmp_path):
    # what a Kubernetes job asking for nvidia.com/mig-3g.40gb gets from the device plugin
    visible = "MIG-3c3c3c3c-0000-0000-0000-000000000000"
    env = gpu_env(tmp_path, nvml_devices=[NVML_DEVICES[2], MIG_GPU], CUDA_VISIBLE_DEVICES=visible)

    gpus = gpus_recorded(make_notebook, tmp_path, env)

    assert gpus == {
        "cuda_visible_devices": visible,
        "devices": [
            {
                "index": "1:2",
                "uuid": visible,
                "name": "NVIDIA H100 80GB HBM3 MIG 3g.40gb",
                "memory_total_mib": 40192,
                "parent_uuid": "GPU-eeee0000-1111-2222-3333-444444444444",
            }
        ],
        "source": "nvml",
    }


def test_a_node_in_mig_mode_lists_its_slices(make_notebook, tmp_path):
    env = gpu_env(tmp_path, nvml_devices=[MIG_GPU])

    gpus = gpus_recorded(make_notebook, tmp_path, env)

    assert [(d["index"], d["uuid"][:12]) for d in gpus["devices"]] == [
        (0, "GPU-eeee0000"),
        ("0:0", "MIG-1a1a1a1a"),
        ("0:2", "MIG-3c3c3c3c"),
    ]


@pytest.mark.parametrize(
    ("visible", "said"),
    [("0", "[nbjobs] GPU 0 is simulated"), ("0,1", "[nbjobs] GPUs 0,1 are simulated")],
)
def test_the_log_counts_simulated_gpus_in_words_that_agree(make_notebook, tmp_path, visible, said):
    # the demo on a machine without a GPU: one GPU reads "GPU 0 is", never "GPUs 0 are"
    env = gpu_env(tmp_path, NBJOBS_SIMULATED_GPUS="1", CUDA_VISIBLE_DEVICES=visible)
    done = subprocess.run(
        runner_command(make_notebook("1"), tmp_path / "out.ipynb"),
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )

    assert said in done.stderr
    assert "GPUs 0 are" not in done.stderr

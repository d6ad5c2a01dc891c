"""One hub and one browser for the Lab tests of telemetry and of schedules.

The usual test hub, its jobs sampled every second (`telemetry: {interval: 1s}`, the
hint after 15 s), its t4 jobs seeing stand-in T4s (the runner's own stand-in NVML,
tests/job_runner/stand_ins/fake_pynvml.py, first on the t4 flavor's PYTHONPATH), and
webhooks set up: a definition's own notification settings are offered only where the
service can send something (none is sent here). The schedules' pictures show no job's
readings, and the telemetry's show no notification settings.
"""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Iterator

import pytest

from ..conftest import HUB_JOBS_CONFIG, ROOT, Hub, run_hub
from ..one_hub import browser, chromium, folder, lab, playwright, starts_afresh  # noqa: F401

#: the GPU job's run: over the samples the service's hint needs (hint_after: 15s here)
GPU_JOB_SECONDS = 40
#: the stand-in GPU's utilisation, one reading every 2 s, over and over: 6 % on average
UTILISATION = [2, 4, 12, 6, 3, 9, 1, 7, 5, 11]
MEMORY_USED_MIB = [2900, 3000, 3300, 3150, 3050, 3400, 3200, 2950, 3100, 3250]
T4 = {"name": "Tesla T4", "memory_mib": 15360}


@pytest.fixture(scope="package")
def hub(tmp_path_factory) -> Iterator[Hub]:
    """The test hub, its jobs sampled every second, its t4 jobs seeing stand-in T4s,
    webhooks allowed."""
    nvml = tmp_path_factory.mktemp("stand-in-nvml")
    shutil.copyfile(ROOT / "tests/job_runner/stand_ins/fake_pynvml.py", nvml / "pynvml.py")
    readings = [
        {"utilization": u, "memory_used_mib": m, "temperature": 41, "power_watts": 28}
        for u, m in zip(UTILISATION, MEMORY_USED_MIB, strict=True)
    ]
    # As many as the local backend hands out (gpus 0-3): whichever the job gets answers.
    devices = [
        {**T4, "uuid": f"GPU-{i:08d}-stand-in", "readings": readings, "every": 2, "then": "cycle"}
        for i in range(4)
    ]
    (nvml / "fake_nvml.json").write_text(json.dumps({"devices": devices}))
    config = copy.deepcopy(HUB_JOBS_CONFIG)
    config["telemetry"] = {"interval": "1s", "hint_after": "15s"}
    for flavor in config["flavors"]:
        if flavor["name"] == "t4":
            flavor["env"] = {"PYTHONPATH": str(nvml)}
    config["notifications"] = {"webhook": {"allowed_hosts": ["127.0.0.1:9"], "allow_http": True}}

    yield from run_hub(tmp_path_factory.mktemp("hub"), config)

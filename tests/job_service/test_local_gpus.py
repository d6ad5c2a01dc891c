"""The local backend's GPUs: from NVML when it works, else the configured list, else none.

NVML needs an NVIDIA driver, which CI machines lack, so ``pynvml`` is replaced by a
fake with the same functions and error class (``sys.modules``); everything else is
real: the backend, the service, the job's runner process.
"""

from __future__ import annotations

import logging
import sys
import types
from typing import Any

import nbformat
import pytest
from nbjobs.job_service.backends.local import LocalBackend, discover_gpus

from nbjobs.config import parse_config

from .conftest import stop_all

LOG = logging.getLogger("nbjobs.tests.gpus")


class FakeNVML(types.ModuleType):
    """``pynvml`` as nvidia-ml-py has it: init, count, shutdown, NVMLError."""

    class NVMLError(Exception):
        pass

    class NVMLError_DriverNotLoaded(NVMLError):
        def __str__(self) -> str:
            return "Driver Not Loaded"

    def __init__(self, gpus: int = 0, init_error: Exception | None = None) -> None:
        super().__init__("pynvml")
        self.gpus = gpus
        self.init_error = init_error
        self.count_error: Exception | None = None
        self.calls: list[str] = []

    def nvmlInit(self) -> None:
        self.calls.append("init")
        if self.init_error is not None:
            raise self.init_error

    def nvmlDeviceGetCount(self) -> int:
        self.calls.append("count")
        if self.count_error is not None:
            raise self.count_error
        return self.gpus

    def nvmlShutdown(self) -> None:
        self.calls.append("shutdown")

    #: each GPU's /dev/nvidiaN number (a machine may number them unlike NVML's order)
    minors: tuple[int, ...] = ()

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetMinorNumber(self, handle: int) -> int:
        return self.minors[handle] if self.minors else handle


@pytest.fixture
def nvml(monkeypatch) -> Any:
    """Install a fake pynvml; ``nvml(gpus=..., init_error=...)`` sets it up."""

    def install(gpus: int = 0, init_error: Exception | None = None) -> FakeNVML:
        fake = FakeNVML(gpus, init_error)
        monkeypatch.setitem(sys.modules, "pynvml", fake)
        return fake

    return install


def backend(gpus: Any) -> LocalBackend:
    config = parse_config(f"backend:\n  kind: local\n  local:\n    gpus: {gpus}\n")
    return LocalBackend(config, log=LOG)


def test_nvml_says_how_many_gpus_there_are(nvml, caplog):
    fake = nvml(gpus=3)

    with caplog.at_level(logging.INFO, logger=LOG.name):
        found = discover_gpus(LOG)

    assert found == ["0", "1", "2"]
    assert fake.calls == ["init", "count", "shutdown"]
    assert "NVML sees 3 GPUs" in caplog.text


def test_auto_uses_nvmls_gpus(nvml):
    nvml(gpus=2)

    local = backend("auto")

    assert local.gpus == ["0", "1"]
    two = parse_config("flavors: [{name: two, gpus: 2}]").flavors[0]
    assert local.can_ever_fit(two) is None


def test_a_jobs_device_rule_names_nvmls_minor_numbers(nvml):
    """NVML's index 0 may be /dev/nvidia2: the control group must allow the device the
    GPU really is, or the job is locked out of its own GPU (and into another's)."""
    fake = nvml(gpus=2)
    fake.minors = (2, 0)

    local = backend("auto")
    one = parse_config("flavors: [{name: one, gpus: 1}]").flavors[0]

    assert local.job_limits(one, ["0"]).gpu_minors == (2,)
    assert local.job_limits(one, ["1"]).gpu_minors == (0,)
    cpu = parse_config("flavors: [{name: c, gpus: 0}]").flavors[0]
    assert local.job_limits(cpu, []).gpu_minors == ()  # a CPU job: no GPU device at all


def test_a_configured_list_wins_and_nvml_is_not_asked(nvml):
    fake = nvml(gpus=4)

    local = backend("[1, 3]")

    assert local.gpus == ["1", "3"]
    assert fake.calls == []


def test_installed_but_no_driver_means_no_gpus_and_a_line_saying_why(nvml, caplog):
    fake = nvml(init_error=FakeNVML.NVMLError_DriverNotLoaded())

    with caplog.at_level(logging.INFO, logger=LOG.name):
        local = backend("auto")

    assert local.gpus == []
    assert fake.calls == ["init"]  # nothing more asked of an NVML that did not start
    assert "NVML did not start (Driver Not Loaded" in caplog.text
    assert "list them in nbjobs.yaml (backend.local.gpus)" in caplog.text
    gpu = parse_config("flavors: [{name: gpu, gpus: 1}]").flavors[0]
    assert "this machine has 0 GPUs" in (local.can_ever_fit(gpu) or "")


def test_no_driver_with_a_configured_list_uses_the_list(nvml):
    nvml(init_error=FakeNVML.NVMLError_DriverNotLoaded())

    assert backend("[0]").gpus == ["0"]


def test_without_nvidia_ml_py_there_are_no_gpus_and_a_line_saying_why(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # what `import pynvml` fails on

    with caplog.at_level(logging.INFO, logger=LOG.name):
        found = discover_gpus(LOG)

    assert found == []
    assert "nvidia-ml-py (NVML) is not installed" in caplog.text


def test_an_nvml_that_cannot_count_is_shut_down_and_means_no_gpus(nvml, caplog):
    fake = nvml(gpus=2)
    fake.count_error = FakeNVML.NVMLError("Unknown Error")

    with caplog.at_level(logging.INFO, logger=LOG.name):
        found = discover_gpus(LOG)

    assert found == []
    assert fake.calls == ["init", "count", "shutdown"]
    assert "NVML could not count the GPUs (Unknown Error)" in caplog.text


SHOW_ENV = (
    "import os\n"
    "print('GPUS=' + os.environ['CUDA_VISIBLE_DEVICES'])\n"
    "print('ORDER=' + os.environ.get('CUDA_DEVICE_ORDER', ''))"
)


async def test_a_service_on_auto_hands_out_nvmls_gpus_in_nvmls_order(nvml, start):
    nvml(gpus=2)
    svc = await start({"backend": {"kind": "local", "local": {"gpus": "auto", "cpu_slots": 1}}})
    try:
        svc.write("root", "env.ipynb", SHOW_ENV)
        async with svc.client("root") as c:
            flavors = {f["name"]: f for f in (await c.get("flavors")).json()}

        job = await svc.submit("root", "env.ipynb", "gpu2")
        done = await svc.wait("root", job["id"])
    finally:
        await stop_all(svc)

    assert flavors["gpu2"]["unavailable"] is None
    assert done["state"] == "succeeded", done
    assert sorted(done["gpus"]) == ["0", "1"]
    out = nbformat.read(svc.home("root") / done["output_path"], as_version=4)
    text = out.cells[0].outputs[0]["text"]
    assert f"GPUS={','.join(done['gpus'])}\n" in text
    assert "ORDER=PCI_BUS_ID\n" in text

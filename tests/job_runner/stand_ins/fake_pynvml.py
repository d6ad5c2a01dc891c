"""A stand-in for NVML (the ``pynvml`` module of nvidia-ml-py): a test's GPUs, and
readings that follow a script.

``helpers.gpu_env`` copies this file into a folder on the runner's PYTHONPATH as
``pynvml.py``, with ``fake_nvml.json`` beside it::

    {"devices": null | [device, ...], "driver_samples": true}

``devices`` null is a node whose driver does not load (``nvmlInit`` fails); with
``"init_mark": path``, ``nvmlInit`` makes that file (a test sees NVML was started). A device
is ``{"name", "uuid", "memory_mib"}`` plus, all optional:

- ``"mig": [slice | null, ...]``: the GPU is in MIG mode with these slices (devices of
  the same shape; null: no instance at that index);
- ``"readings": [{"utilization", "memory_used_mib", "temperature", "power_watts"}]``,
  one every ``"every"`` seconds (default 1) from when this module is first imported
  (the runner's start); after the last, ``"then": "hold"`` (default) keeps it and
  ``"cycle"`` starts over;
- ``"lost_when": path``: once that file exists every call about it fails as a GPU fallen
  off the bus does (``NVMLError_GpuIsLost``); ``"hang_when": path``: once that file
  exists a call about it blocks for an hour, as a wedged driver's does. A test's notebook
  makes the file when the runner has sampled the GPU (an event, not a time).

Like the real driver, it samples utilisation six times a second and keeps 16 seconds
of those samples (``nvmlDeviceGetSamples``); ``"driver_samples": false`` makes that
call unsupported, so that readers fall back on ``nvmlDeviceGetUtilizationRates``. MIG
slices answer memory only, as real ones do.
"""

import json
import math
import os
import time
from pathlib import Path

_CONFIG = json.loads(Path(__file__).with_name("fake_nvml.json").read_text())
_DEVICES = _CONFIG["devices"]
_DRIVER_SAMPLES = _CONFIG.get("driver_samples", True)
_START = time.time()
_SAMPLE_PERIOD = 1 / 6
_BUFFER_SECONDS = 16.0
_initialised = False

NVML_TEMPERATURE_GPU = 0
NVML_GPU_UTILIZATION_SAMPLES = 1
NVML_VALUE_TYPE_UNSIGNED_INT = 1
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_GPU_IS_LOST = 15

for _gpu in _DEVICES or []:
    for _slice in _gpu.get("mig") or []:
        if _slice is not None:
            _slice["is_mig"] = True


class NVMLError(Exception):
    def __init__(self, value=999, text="Unknown Error"):
        super().__init__(text)
        self.value = value


class NVMLError_NotSupported(NVMLError):
    def __init__(self):
        super().__init__(NVML_ERROR_NOT_SUPPORTED, "Not Supported")


class NVMLError_NotFound(NVMLError):
    def __init__(self):
        super().__init__(NVML_ERROR_NOT_FOUND, "Not Found")


class NVMLError_GpuIsLost(NVMLError):
    def __init__(self):
        super().__init__(NVML_ERROR_GPU_IS_LOST, "GPU is lost")


def nvmlInit():
    global _initialised
    if _CONFIG.get("init_mark"):
        Path(_CONFIG["init_mark"]).touch()
    if _DEVICES is None:
        raise NVMLError(9, "Driver Not Loaded")
    _initialised = True


def nvmlShutdown():
    global _initialised
    _initialised = False


def _check():
    if not _initialised:
        raise NVMLError(1, "Uninitialized")


def _answering(handle):
    """Fail or block as the script says the device does by now."""
    _check()
    if "hang_when" in handle and os.path.exists(handle["hang_when"]):
        time.sleep(3600)
    if "lost_when" in handle and os.path.exists(handle["lost_when"]):
        raise NVMLError_GpuIsLost()


def _reading(handle, at=None):
    """The scripted reading at wall time ``at`` (default now)."""
    readings = handle.get("readings") or [{}]
    elapsed = max(0.0, (time.time() if at is None else at) - _START)
    step = int(elapsed / handle.get("every", 1.0))
    if handle.get("then") == "cycle":
        return readings[step % len(readings)]
    return readings[min(step, len(readings) - 1)]


def nvmlDeviceGetCount():
    _check()
    return len(_DEVICES)


def nvmlDeviceGetHandleByIndex(index):
    _check()
    handle = _DEVICES[index]
    _answering(handle)
    return handle


def nvmlDeviceGetName(handle):
    _answering(handle)
    return handle["name"]


def nvmlDeviceGetUUID(handle):
    _answering(handle)
    return handle["uuid"]


class _Memory:
    def __init__(self, total, used):
        self.total, self.used, self.free = total, used, total - used


def nvmlDeviceGetMemoryInfo(handle):
    _answering(handle)
    used = _reading(handle).get("memory_used_mib", 0)
    return _Memory(handle["memory_mib"] * 1024 * 1024, used * 1024 * 1024)


class _Utilization:
    def __init__(self, gpu):
        self.gpu, self.memory = gpu, 0


def nvmlDeviceGetUtilizationRates(handle):
    _answering(handle)
    if handle.get("is_mig"):
        raise NVMLError_NotSupported()
    return _Utilization(int(_reading(handle).get("utilization", 0)))


class _Value:
    def __init__(self, value):
        self.uiVal = value


class _Sample:
    def __init__(self, at, value):
        self.timeStamp, self.sampleValue = at, _Value(value)


def nvmlDeviceGetSamples(handle, sampling_type, last_seen):
    """The driver's utilisation samples newer than ``last_seen`` (microseconds)."""
    _answering(handle)
    if not _DRIVER_SAMPLES or handle.get("is_mig") or sampling_type != 1:
        raise NVMLError_NotSupported()
    now = time.time()
    oldest = max(last_seen / 1e6, now - _BUFFER_SECONDS)
    first = math.floor((oldest - _START) / _SAMPLE_PERIOD) + 1
    last = math.floor((now - _START) / _SAMPLE_PERIOD)
    samples = []
    for tick in range(first, last + 1):
        at = _START + tick * _SAMPLE_PERIOD
        micros = int(at * 1e6)
        if micros > last_seen:
            samples.append(_Sample(micros, int(_reading(handle, at).get("utilization", 0))))
    if not samples:
        raise NVMLError_NotFound()
    return NVML_VALUE_TYPE_UNSIGNED_INT, samples


def nvmlDeviceGetTemperature(handle, sensor):
    _answering(handle)
    if handle.get("is_mig"):
        raise NVMLError_NotSupported()
    return int(_reading(handle).get("temperature", 30))


def nvmlDeviceGetPowerUsage(handle):
    _answering(handle)
    if handle.get("is_mig"):
        raise NVMLError_NotSupported()
    return int(_reading(handle).get("power_watts", 50) * 1000)


def nvmlDeviceGetMigMode(handle):
    _answering(handle)
    if "mig" not in handle:
        raise NVMLError_NotSupported()
    return (1, 1)  # current, pending: enabled


def nvmlDeviceGetMaxMigDeviceCount(handle):
    return 7


def nvmlDeviceGetMigDeviceHandleByIndex(handle, index):
    slices = handle["mig"]
    if index >= len(slices) or slices[index] is None:
        raise NVMLError_NotFound()
    return slices[index]

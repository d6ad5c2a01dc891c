"""The GPUs of this machine as NVML (nvidia-ml-py) sees them, for the local backend."""

from __future__ import annotations

import contextlib
import logging
from typing import Any


def discover_gpus(log: logging.Logger | logging.LoggerAdapter[Any] | None = None) -> list[str]:
    """The GPU indices NVML (nvidia-ml-py) reports on this machine.

    Never raises: without nvidia-ml-py, without a driver (NVML fails to start)
    or when NVML cannot count the devices, the answer is no GPUs, and ``log``
    says why and how to list the GPUs in ``backend.local.gpus`` instead.
    """
    log = log or logging.getLogger(__name__)
    instead = "no GPUs are used; list them in nbjobs.yaml (backend.local.gpus) to use them anyway"
    try:
        import pynvml
    except ImportError:
        log.info("nbjobs: nvidia-ml-py (NVML) is not installed, so %s", instead)
        return []
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError: no driver, no device, no libnvidia-ml
        # Usual on a CPU-only machine (nvidia-ml-py comes with the service): not a warning.
        log.info("nbjobs: NVML did not start (%s; no NVIDIA driver here?), so %s", exc, instead)
        return []
    try:
        count = int(pynvml.nvmlDeviceGetCount())
    except Exception as exc:
        log.warning("nbjobs: NVML could not count the GPUs (%s), so %s", exc, instead)
        return []
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()
    log.info("nbjobs: NVML sees %d GPU%s", count, "" if count == 1 else "s")
    return [str(i) for i in range(count)]


def nvml_minor_numbers() -> dict[str, int]:
    """Each GPU's device minor (``/dev/nvidiaN``) by NVML index; empty without NVML.

    Usually the index itself; NVML says so for certain, which is what a device rule needs.
    """
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return {}
    try:
        return {
            str(i): int(pynvml.nvmlDeviceGetMinorNumber(pynvml.nvmlDeviceGetHandleByIndex(i)))
            for i in range(int(pynvml.nvmlDeviceGetCount()))
        }
    except Exception:
        return {}
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()

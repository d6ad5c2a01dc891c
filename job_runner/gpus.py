"""What GPUs this job can see, recorded in the output notebook.

NVML (the ``pynvml`` module of nvidia-ml-py) when it is importable, else
``nvidia-smi`` when it is on PATH, else nothing. Both list every GPU of the
node; on one machine the job is confined by ``CUDA_VISIBLE_DEVICES``, so the
list is filtered by it (indices or UUIDs), in its order, to what CUDA programs
will use.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from typing import Any


def visible_gpus(env: dict[str, str] | None = None) -> dict[str, Any]:
    """Describe the GPUs this process may use.

    Returns ``{"cuda_visible_devices": str | "unset", "devices": [...] | "none",
    "source": "nvml" | "nvidia-smi" | "none"}`` where each device has index,
    uuid, name and memory_total_mib; a MIG slice (NVML only) also has
    parent_uuid, and its index is ``"<gpu>:<slice>"``.
    """
    env = dict(os.environ if env is None else env)
    visible = env.get("CUDA_VISIBLE_DEVICES")
    devices, source = _query_nvml()
    if devices is None:
        devices, source = _query_nvidia_smi()
    if devices is not None and visible is not None:
        devices = _as_cuda_sees_them(devices, visible)
    return {
        "cuda_visible_devices": "unset" if visible is None else visible,
        "devices": devices if devices else "none",
        "source": source if devices is not None else "none",
    }


def _as_cuda_sees_them(devices: list[dict[str, Any]], visible: str) -> list[dict[str, Any]]:
    """The devices CUDA_VISIBLE_DEVICES selects, in its order, as CUDA reads it.

    Each entry is a node index (``"1"``) or a UUID or unique UUID prefix
    (``"GPU-2222bbbb"``, ``"MIG-…"`` for a MIG slice; Kubernetes' device
    plugin and many schedulers hand out UUIDs). Like CUDA, the list ends at
    the first entry that names no device (or one already named): ``"0,7,1"``
    on a two-GPU node is GPU 0 only.
    """
    chosen: list[dict[str, Any]] = []
    for entry in (v.strip() for v in visible.split(",")):
        if entry.isdigit():
            matches = [d for d in devices if str(d["index"]) == str(int(entry))]
        else:
            matches = [d for d in devices if entry and str(d["uuid"]).startswith(entry)]
        if len(matches) != 1 or matches[0] in chosen:
            break
        chosen.append(matches[0])
    return chosen


def _query_nvml() -> tuple[list[dict[str, Any]] | None, str]:
    try:
        import pynvml
    except ImportError:
        return None, "none"
    try:
        pynvml.nvmlInit()
    except Exception:  # no driver, no device: NVML raises its own error types
        return None, "none"
    try:
        devices = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            gpu = _nvml_device(pynvml, handle, index)
            devices.append(gpu)
            devices.extend(_nvml_mig_devices(pynvml, handle, gpu))
        return devices, "nvml"
    except Exception:
        return None, "none"
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def _nvml_device(pynvml: Any, handle: Any, index: int | str) -> dict[str, Any]:
    name = pynvml.nvmlDeviceGetName(handle)
    uuid = pynvml.nvmlDeviceGetUUID(handle)
    memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
    return {
        "index": index,
        "uuid": uuid.decode() if isinstance(uuid, bytes) else uuid,
        "name": name.decode() if isinstance(name, bytes) else name,
        "memory_total_mib": int(memory.total) // (1024 * 1024),
    }


def _nvml_mig_devices(pynvml: Any, handle: Any, gpu: dict[str, Any]) -> list[dict[str, Any]]:
    """The MIG slices of a GPU in MIG mode, each named ``<gpu>:<slice>``.

    A job given a MIG slice sees ``CUDA_VISIBLE_DEVICES=MIG-<uuid>`` (or gets
    the slice from the container runtime); the slice is what it computes on,
    so it is recorded as a device of its own, with its own memory.
    """
    try:
        current, _pending = pynvml.nvmlDeviceGetMigMode(handle)
        if current != 1:  # NVML_DEVICE_MIG_ENABLE
            return []
        count = pynvml.nvmlDeviceGetMaxMigDeviceCount(handle)
    except Exception:  # a GPU without MIG answers "not supported"
        return []
    slices = []
    for index in range(count):
        try:
            mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, index)
        except Exception:  # no slice at this index
            continue
        device = _nvml_device(pynvml, mig, f"{gpu['index']}:{index}")
        device["parent_uuid"] = gpu["uuid"]
        slices.append(device)
    return slices


def _query_nvidia_smi() -> tuple[list[dict[str, Any]] | None, str]:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None, "none"
    try:
        out = subprocess.run(
            [exe, "--query-gpu=index,uuid,name,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=15,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None, "none"
    devices = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 4:
            continue
        index, uuid, name, memory = parts
        devices.append(
            {
                "index": int(index) if index.isdigit() else index,
                "uuid": uuid,
                "name": name,
                "memory_total_mib": int(memory) if memory.isdigit() else memory,
            }
        )
    return devices, "nvidia-smi"

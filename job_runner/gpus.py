"""What GPUs this job can see, recorded in the output notebook (and sampled by
:mod:`.telemetry`).

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
import threading
from typing import Any

#: how long the output's record of the GPUs waits for the driver (a wedged GPU can
#: block NVML calls for minutes; the job's output must not wait for it)
QUERY_TIMEOUT = 5.0


def visible_gpus(env: dict[str, str] | None = None) -> dict[str, Any]:
    """Describe the GPUs this process may use.

    Returns ``{"cuda_visible_devices": str | "unset", "devices": [...] | "none",
    "source": "nvml" | "nvidia-smi" | "none"}`` where each device has index,
    uuid, name and memory_total_mib; a MIG slice (NVML only) also has
    parent_uuid, and its index is ``"<gpu>:<slice>"``.
    """
    env = dict(os.environ if env is None else env)
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if none_given(visible):  # nothing to ask the driver about
        return {"cuda_visible_devices": visible, "devices": "none", "source": "none"}
    devices, source = _query_nvml()
    if devices is None:
        devices, source = _query_nvidia_smi()
    if devices is not None and visible is not None:
        devices = as_cuda_sees_them(devices, visible)
    return {
        "cuda_visible_devices": "unset" if visible is None else visible,
        "devices": devices if devices else "none",
        "source": source if devices is not None else "none",
    }


def visible_gpus_within(
    seconds: float = QUERY_TIMEOUT, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """:func:`visible_gpus`, or, when the GPU tools do not answer within ``seconds``,
    no devices and an ``error`` saying so."""
    found: list[dict[str, Any]] = []
    asking = threading.Thread(target=lambda: found.append(visible_gpus(env)), daemon=True)
    asking.start()
    asking.join(seconds)
    if found:
        return found[0]
    visible = (os.environ if env is None else env).get("CUDA_VISIBLE_DEVICES")
    return {
        "cuda_visible_devices": "unset" if visible is None else visible,
        "devices": "none",
        "source": "none",
        "error": f"the GPU driver did not answer within {seconds:g} s",
    }


def none_given(visible: str | None) -> bool:
    """Whether ``CUDA_VISIBLE_DEVICES`` gives the job no GPU (set, and empty: a CPU
    job's): it then never loads NVML nor runs nvidia-smi, which on a node full of GPUs
    take a tenth of a second and more of every CPU job's start."""
    return visible is not None and not visible.strip()


def computing_devices(devices: list[dict[str, Any]], visible: str | None) -> list[dict[str, Any]]:
    """The devices a CUDA program of this job computes on, in CUDA's order.

    With ``CUDA_VISIBLE_DEVICES`` set, the ones it selects (:func:`as_cuda_sees_them`).
    Unset, every GPU, except that a GPU in MIG mode is replaced by its slices: CUDA
    enumerates the slices, and a slice is what a job computes on (sampling the parent
    as well would count the same hardware twice).
    """
    if visible is not None:
        return as_cuda_sees_them(devices, visible)
    split = {d["parent_uuid"] for d in devices if "parent_uuid" in d}
    return [d for d in devices if d["uuid"] not in split]


def as_cuda_sees_them(devices: list[dict[str, Any]], visible: str) -> list[dict[str, Any]]:
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
        return [device for device, _handle, _parent in nvml_listing(pynvml)], "nvml"
    except Exception:
        return None, "none"
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def nvml_listing(pynvml: Any) -> list[tuple[dict[str, Any], Any, Any]]:
    """Every device of the node, with its NVML handle and its parent GPU's (a MIG
    slice's; None for a GPU): ``[(device, handle, parent_handle), ...]``, in the order
    and shape :func:`visible_gpus` records. NVML must be initialised; raises NVML's
    errors."""
    listing: list[tuple[dict[str, Any], Any, Any]] = []
    for index in range(pynvml.nvmlDeviceGetCount()):
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        gpu = _nvml_device(pynvml, handle, index)
        listing.append((gpu, handle, None))
        listing.extend(
            (mig, slice_handle, handle)
            for mig, slice_handle in _nvml_mig_devices(pynvml, handle, gpu)
        )
    return listing


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


def _nvml_mig_devices(
    pynvml: Any, handle: Any, gpu: dict[str, Any]
) -> list[tuple[dict[str, Any], Any]]:
    """The MIG slices of a GPU in MIG mode, each named ``<gpu>:<slice>``.

    A job given a MIG slice sees ``CUDA_VISIBLE_DEVICES=MIG-<uuid>`` (or gets
    the slice from the container runtime); the slice is what it computes on,
    so it is recorded as a device of its own, with its own memory. Each comes with
    its handle.
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
        slices.append((device, mig))
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

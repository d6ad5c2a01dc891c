"""A stand-in for ``nvidia-smi --query-gpu=FIELDS --format=csv,noheader,nounits``:
a test's GPUs and readings that follow a script.

``helpers.gpu_env`` installs it as ``nvidia-smi`` (run by the test's Python) with
``fake_smi.json`` beside it: ``{"devices": [device, ...]}``, devices as
``fake_pynvml.py`` describes them (``readings``, ``every``, ``then``, ``lost_when``,
``hang_when``; no MIG: ``--query-gpu`` lists whole GPUs). Time runs from its first
call (kept in ``fake_smi.start`` beside it). A GPU that is lost is reported as the real
one reports it: a line of its own instead of its row, and exit status 15.
"""

import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEVICES = json.loads((HERE / "fake_smi.json").read_text())["devices"]


def started() -> float:
    mark = HERE / "fake_smi.start"
    try:
        return float(mark.read_text())
    except (OSError, ValueError):
        now = time.time()
        mark.write_text(repr(now))
        return now


def reading(device: dict, elapsed: float) -> dict:
    readings = device.get("readings") or [{}]
    step = int(elapsed / device.get("every", 1.0))
    if device.get("then") == "cycle":
        return readings[step % len(readings)]
    return readings[min(step, len(readings) - 1)]


def main() -> int:
    query = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--query-gpu=")), "")
    if not query or "--format=csv,noheader,nounits" not in sys.argv:
        print("this stand-in answers --query-gpu=... --format=csv,noheader,nounits only")
        return 2
    elapsed = time.time() - started()
    status = 0
    for index, device in enumerate(DEVICES):
        if "hang_when" in device and os.path.exists(device["hang_when"]):
            time.sleep(3600)
        if "lost_when" in device and os.path.exists(device["lost_when"]):
            where = f"GPU{index:04X}:3B:00.0"
            print(f"Unable to determine the device handle for {where}: Unknown Error")
            status = 15
            continue
        now = reading(device, elapsed)
        values = {
            "index": index,
            "uuid": device["uuid"],
            "name": device["name"],
            "memory.total": device["memory_mib"],
            "memory.used": now.get("memory_used_mib", 0),
            "utilization.gpu": now.get("utilization", 0),
            "temperature.gpu": now.get("temperature", 30),
            "power.draw": f"{now.get('power_watts', 50):.2f}",
        }
        print(", ".join(str(values.get(field, "[N/A]")) for field in query.split(",")))
    return status


if __name__ == "__main__":
    sys.exit(main())

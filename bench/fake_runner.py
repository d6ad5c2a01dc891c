"""A stand-in for job_runner in the service benchmarks: it only takes time.

Same command line as ``python -m nbjobs.job_runner`` (INPUT OUTPUT --status-file
S --parameters JSON ...). It notes when it started (``S.started``), sleeps
``parameters["seconds"]`` and writes a final status, so the service benchmarks
measure the service (dispatch, queue, packing), not kernels. It imports only
the standard library, to start as fast as Python can.
"""

import json
import os
import sys
import time
from datetime import datetime, timezone

started = time.time()
argv = sys.argv[1:]
status_file = argv[argv.index("--status-file") + 1]


def write_atomically(path: str, text: str) -> None:
    # readers poll these files: they must never see one half-written
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


write_atomically(status_file + ".started", repr(started))
parameters = json.loads(argv[argv.index("--parameters") + 1]) if "--parameters" in argv else {}
time.sleep(float(parameters.get("seconds", 0)))
now = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
final = {"state": "succeeded", "exit_code": 0, "started_at": now, "finished_at": now}
write_atomically(status_file, json.dumps(final))

"""Stopping processes nbjobs started (a demo's hub, an uninstalled service, a removed
account's leftovers): politely first, then for good."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any


def stop_processes(processes: Iterable[Any], grace: float) -> None:
    """SIGTERM each of ``processes`` (``psutil.Process``) and give them ``grace`` seconds;
    SIGKILL what is left (at once with ``grace`` 0), and wait for it to be gone."""
    import psutil  # ipykernel's dependency; the runner-only install never stops anything

    left = [p for p in processes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    if grace > 0:
        for process in left:
            with contextlib.suppress(psutil.Error):
                process.terminate()
        _, left = psutil.wait_procs(left, timeout=grace)
    for process in left:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(left, timeout=10)

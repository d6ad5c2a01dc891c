"""What this test run names on the machine itself, so that an install or a demo running
beside it (its ``nbjobs`` or ``nbjobs-demo`` control groups) is never touched."""

from __future__ import annotations

import copy
import uuid
from typing import Any

#: this test process's nbjobs instance (``backend.local.instance``): the parent of the
#: control groups its hubs' servers and its services' jobs run in; removed at the end
INSTANCE = f"nbjobs-test-{uuid.uuid4().hex[:8]}"


def this_runs(settings: dict[str, Any]) -> dict[str, Any]:
    """``settings`` (an nbjobs.yaml's, as a dict) with this run's instance on its local
    backend, unless it names one: a copy, the given dict is left as it was."""
    mine = copy.deepcopy(settings)
    backend = mine.setdefault("backend", {})
    if backend.get("kind", "local") == "local":
        local = backend.setdefault("local", {})
        local.setdefault("instance", INSTANCE)
    return mine

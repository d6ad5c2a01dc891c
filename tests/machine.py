"""What this test run names and makes on the machine itself, so that an install or a demo
running beside it (its ``nbjobs`` or ``nbjobs-demo`` control groups) is never touched and
nothing of the run is left behind."""

from __future__ import annotations

import atexit
import copy
import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

import yaml

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


def scratch_folder(prefix: str) -> Path:
    """A new temporary folder of this process's, removed with what is in it when the
    process exits (a conftest's, made at import, in every worker of every run)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def kubeconfig_to_no_cluster() -> None:
    """Point ``$KUBECONFIG`` at a cluster that is not there (loopback's discard port), for
    tests that import kubespawner or kubernetes_asyncio, which read it at import or when a
    spawner is made, and never talk to an API server."""
    path = scratch_folder("nbjobs-kube-") / "config"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "none", "cluster": {"server": "https://127.0.0.1:9"}}],
        "users": [{"name": "none", "user": {"token": "unused"}}],
        "contexts": [{"name": "none", "context": {"cluster": "none", "user": "none"}}],
        "current-context": "none",
    }
    path.write_text(yaml.safe_dump(config))
    os.environ["KUBECONFIG"] = str(path)

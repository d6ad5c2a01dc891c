"""What this test run names and makes on the machine itself, so that an install or a demo
running beside it (its ``nbjobs`` or ``nbjobs-demo`` control groups) is never touched and
nothing of the run is left behind."""

from __future__ import annotations

import atexit
import contextlib
import copy
import os
import shutil
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psutil
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


def end_instance(instance: str) -> None:
    """Kill what still runs in the control groups of the nbjobs ``instance`` (a job a
    stopped service left running, as it leaves one for the next to adopt; a hub's server)
    and remove them with their parent: what a test run or a test's hub made on the
    machine goes with it, and another instance's groups (an install's, a demo's) are
    never touched."""
    from nbjobs.cgroups import Cgroups
    from nbjobs.instances import remove_control_groups

    cgroups = Cgroups(parent=instance)
    for parent in cgroups.parent_folders():
        for child in [c for c in parent.iterdir() if c.is_dir()] if parent.is_dir() else []:
            group = cgroups.group(child.name)
            group.kill_all()
            group.remove()
    remove_control_groups(instance)


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


def job_tmp(job_id: str, rank: int | str = 0) -> Path:
    """A local job's temporary folder (its TMPDIR) where it has no namespace of its own,
    as docs/admin/one-machine.md names it (``rank="*"``: a pattern for all its ranks')."""
    return Path(tempfile.gettempdir(), f"nbjobs-job-{job_id}-{rank}")


def end_runner(runner: psutil.Process | None, command: Sequence[object]) -> None:
    """Kill a job's runner (``runner``, started with ``command``; None for one that has
    ended) with all it started, and remove its job's temporary folders (:func:`job_tmp`;
    the job's id names the status file's folder): what the end of a test that stopped a
    service with its jobs running must do, as no service will adopt them."""
    from nbjobs.job_service.backends.base import status_file_in

    if runner is not None:
        with contextlib.suppress(psutil.Error):
            runner.suspend()  # it starts no kernel between the look below and its kill
            for process in [*runner.children(recursive=True), runner]:
                with contextlib.suppress(psutil.Error):
                    process.kill()
    status_file = status_file_in([str(arg) for arg in command])
    if status_file:
        every_rank = job_tmp(Path(status_file).parent.name, rank="*")
        for tmp in every_rank.parent.glob(every_rank.name):
            shutil.rmtree(tmp, ignore_errors=True)


def end_runners_in(folder: Path) -> None:
    """:func:`end_runner` for every job runner still running on the machine whose status
    file lies in ``folder`` (a test hub's or service's, stopped with its jobs running)."""
    from nbjobs.job_service.backends.base import status_file_in

    folder = folder.resolve()
    for process in psutil.process_iter(["cmdline"]):
        command = process.info["cmdline"] or []
        status_file = status_file_in(command)
        if status_file and Path(status_file).is_relative_to(folder):
            end_runner(process, command)

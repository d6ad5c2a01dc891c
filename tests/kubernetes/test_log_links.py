"""On Kubernetes the job service keeps a pod's own log in the job's folder on the shared
storage when the runner left no log there (it never ran), and every user's folder is
mounted there: a link the user planted (the log, the job's folder, ``.nbjobs``) must
never make it write into someone else's files. The cluster is the fake API server; the
storage is a real folder."""

from __future__ import annotations

import asyncio
import shutil
import uuid

import pytest
from nbjobs.job_service.backends.base import LaunchSpec

from nbjobs.storage import job_folder, make_job_dir, user_folder

from .conftest import NAMESPACE, config


@pytest.mark.parametrize("planted", ["nothing", "log.txt", "job folder", ".nbjobs"])
async def test_a_link_planted_in_a_jobs_folder_is_never_written_through(
    make_backend, fake, tmp_path, planted
):
    cfg = config()
    fake.add_node("gpu-0", {"gpu": "a100"}, {"nvidia.com/gpu": "1"})
    user = "ada-" + uuid.uuid4().hex[:6]  # a folder of its own on the session's storage
    home = user_folder(cfg.storage, user)
    job_id = uuid.uuid4().hex[:12]
    folder = job_folder(home, job_id)
    home.mkdir(parents=True)
    make_job_dir(folder, {"input.ipynb": b"{}"})
    bob = tmp_path / "bob"
    (bob / "jobs" / job_id).mkdir(parents=True)
    victim = bob / "notebook.ipynb"
    victim.write_text("bob's notebook")
    if planted == "log.txt":
        (folder / "log.txt").symlink_to(victim)
    elif planted == "job folder":
        shutil.rmtree(folder)
        folder.symlink_to(bob)
    elif planted == ".nbjobs":
        shutil.rmtree(home / ".nbjobs")
        (home / ".nbjobs").symlink_to(bob)
    before = sorted(p.name for p in bob.rglob("*"))
    backend = make_backend(cfg)
    spec = LaunchSpec(
        job_id=job_id,
        user=user,
        flavor=cfg.flavor("a100"),
        snapshot_file=folder / "input.ipynb",
        output_file=home / "out.ipynb",
        status_file=folder / "status.json",
        log_file=folder / "log.txt",
        cwd=home,
    )

    launched = await backend.start(spec)
    waiter = asyncio.ensure_future(backend.wait(launched.ref))
    job = f"nbjobs-{job_id}"
    pod = fake.start_pod(job, NAMESPACE, node="gpu-0")["metadata"]["name"]
    fake.run_pod(pod, NAMESPACE)
    # the runner never ran (an image without nbjobs): only the pod's log says why
    fake.append_log(pod, NAMESPACE, "a line of the job's log\n")
    fake.finish_pod(pod, NAMESPACE, exit_code=1)
    outcome = await asyncio.wait_for(waiter, 10)

    assert outcome.exit_code == 1
    assert victim.read_text() == "bob's notebook"
    assert sorted(p.name for p in bob.rglob("*")) == before  # nothing made there either
    if planted == "nothing":  # the pod's log is kept where no link is in the way
        assert (folder / "log.txt").read_text() == "a line of the job's log\n"

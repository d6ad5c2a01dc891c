"""Least privilege: the shipped Role grants exactly what the backend uses over a job's life.

(conftest also checks, after the whole session, that no test saw a call outside it.)"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import uuid

import yaml
from nbjobs.job_service.backends import LaunchSpec

from nbjobs.config import Flavor, NetworkConfig
from nbjobs.network import JOBS_POLICY
from nbjobs.storage import job_folder, make_job_dir, user_folder

from .conftest import NAMESPACE, RBAC_FILE, allowed_by_rbac, config, eventually


async def test_a_jobs_whole_life_uses_exactly_the_role_and_reads_only_nodes_cluster_wide(
    make_backend, fake
):
    cfg = config()
    # egress rules for jobs: the service keeps their NetworkPolicy (get, create)
    fenced = cfg.model_copy(
        update={"network": NetworkConfig.model_validate({"jobs": {"egress": []}})}
    )
    fake.add_node("gpu-0", {"gpu": "a100"}, {"nvidia.com/gpu": "2"})
    first = make_backend(fenced, events_interval=0.05)
    await first.reconcile(set())
    specs = []
    user = "ada-" + uuid.uuid4().hex[:6]  # a folder of its own on the session's storage
    home = user_folder(cfg.storage, user)
    home.mkdir(parents=True)
    for job_id in ("aaaaaaaaaaaa", "bbbbbbbbbbbb"):
        make_job_dir(job_folder(home, job_id), {"input.ipynb": b"{}"})
        specs.append(
            LaunchSpec(
                job_id=job_id,
                user=user,
                flavor=cfg.flavor("a100"),
                snapshot_file=job_folder(home, job_id) / "input.ipynb",
                output_file=home / "out.ipynb",
                status_file=job_folder(home, job_id) / "status.json",
                log_file=job_folder(home, job_id) / "log.txt",
                cwd=home,
            )
        )
    done, cancelled = [(await first.start(s)).ref for s in specs]
    # a job KAI Scheduler holds: why it waits may be in an event (events list)
    kai = Flavor.model_validate(
        {"name": "kai-half", "gpus": 1, "fraction": 0.5, "scheduler": "kai"}
    )
    make_job_dir(job_folder(home, "dddddddddddd"), {"input.ipynb": b"{}"})
    held = dataclasses.replace(specs[0], job_id="dddddddddddd", flavor=kai)
    held = dataclasses.replace(held, status_file=job_folder(home, "dddddddddddd") / "status.json")
    held_ref = (await first.start(held)).ref
    fake.start_pod("nbjobs-dddddddddddd", NAMESPACE)
    await eventually(lambda: ("list", "", "events") in fake.requests)
    await first.cancel(held_ref)
    for job_id in ("aaaaaaaaaaaa", "bbbbbbbbbbbb"):
        pod = fake.start_pod(f"nbjobs-{job_id}", NAMESPACE, "gpu-0")["metadata"]["name"]
        fake.run_pod(pod, NAMESPACE)
        # a runner that never ran: its pod's log is read once, at the end (pods/log get)
        fake.append_log(pod, NAMESPACE, "hello\n")
    fake.finish_pod(
        fake.pods_of("nbjobs-aaaaaaaaaaaa", NAMESPACE)[0]["metadata"]["name"], NAMESPACE, 0
    )
    await asyncio.wait_for(first.wait(done), 10)
    assert (home / ".nbjobs/jobs/aaaaaaaaaaaa/log.txt").read_text() == "hello\n"
    await first.start(specs[0])  # a retried create: 409, then get
    await first.cancel(cancelled)
    await asyncio.wait_for(first.wait(cancelled), 10)
    # a restart finds an orphaned pod and stops it
    stray = fake.start_pod("nbjobs-aaaaaaaaaaaa", NAMESPACE, "gpu-0")
    stray["metadata"]["labels"]["nbjobs.io/job-id"] = "cccccccccccc"
    stray["metadata"]["labels"]["batch.kubernetes.io/job-name"] = "nbjobs-cccccccccccc"
    fake.put("pods", stray)
    await first.shutdown()
    # the policy edited by hand: the next start puts it back (update)
    edited = copy.deepcopy(fake.get("networkpolicies", NAMESPACE, JOBS_POLICY))
    edited["spec"]["policyTypes"] = ["Ingress"]
    fake.put("networkpolicies", edited)
    second = make_backend(fenced)
    await second.reconcile(set())
    await second.shutdown()
    # and a start with no rules removes it (delete)
    third = make_backend(cfg)
    await third.reconcile(set())
    assert fake.get("networkpolicies", NAMESPACE, JOBS_POLICY) is None
    # a job on two nodes: an Indexed Job and its ranks' Service (create), or a JobSet
    # (watched; created, a retried create read back, deleted at cancel)
    pair = Flavor.model_validate({"name": "pair", "gpus": 1, "nodes": 2})
    make_job_dir(job_folder(home, "eeeeeeeeeeee"), {"input.ipynb": b"{}"})
    ranked = dataclasses.replace(
        specs[0],
        job_id="eeeeeeeeeeee",
        flavor=pair,
        status_file=job_folder(home, "eeeeeeeeeeee") / "status.json",
    )
    for mode in ("indexed-job", "jobset"):
        with_pair = config(multi_node=mode)
        with_pair = with_pair.model_copy(update={"flavors": [*with_pair.flavors, pair]})
        backend = make_backend(with_pair)
        await backend.reconcile(set())
        ref = (await backend.start(ranked)).ref
        if mode == "jobset":
            await backend.start(ranked)  # a retried create: 409, then get
        await backend.cancel(ref)
        await backend.shutdown()

    role, cluster = allowed_by_rbac()
    used = set(fake.requests)
    assert used - cluster == role  # every verb the Role grants is used, and no other
    assert used & cluster == {("list", "", "nodes"), ("watch", "", "nodes")}
    documents = list(yaml.safe_load_all(RBAC_FILE.read_text()))
    kinds = [d["kind"] for d in documents]
    assert kinds == ["ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"]
    assert documents[1]["metadata"]["namespace"] == "gpu-jobs"


async def test_without_the_optional_cluster_role_jobs_still_run(make_backend, fake):
    fake.forbidden.add("nodes")
    cfg = config()
    backend = make_backend(cfg)
    await backend.reconcile(set())
    home = user_folder(cfg.storage, "ada")
    ref = (
        await backend.start(
            LaunchSpec(
                job_id="aaaaaaaaaaaa",
                user="ada",
                flavor=cfg.flavor("a100"),
                snapshot_file=home / "in.ipynb",
                output_file=home / "out.ipynb",
                status_file=home / "status.json",
                log_file=home / "log.txt",
                cwd=home,
            )
        )
    ).ref
    assert backend.queues_jobs_itself
    pod = fake.start_pod("nbjobs-aaaaaaaaaaaa", NAMESPACE, "gpu-0")["metadata"]["name"]
    fake.finish_pod(pod, NAMESPACE, 0)
    outcome = await asyncio.wait_for(backend.wait(ref), 10)
    assert outcome.exit_code == 0
    assert [v for v, _, r in fake.requests if r == "nodes"] == ["list"]  # asked once, refused

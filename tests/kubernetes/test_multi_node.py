"""Multi-node jobs on Kubernetes, against the fake API server: an Indexed Job with the
headless Service it owns, or a JobSet (``backend.kubernetes.multi_node``); Kueue admits
all of a job's pods or none; the ranks get the rendezvous variables (their rank from
their completion index); a rank that fails fails the job saying which; cancel, time
limit and preemption act on the whole set. Manifests pass Kubernetes' schemas and
JobSet's."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from nbjobs.job_runner import RunStatus
from nbjobs.job_runner.status import write_status
from nbjobs.job_service.backends.base import LaunchSpec
from nbjobs.job_service.backends.kubernetes_objects import (
    make_job,
    make_jobset,
    make_rank_service,
)

from nbjobs.config import ConfigError, Flavor, parse_config
from nbjobs.models import placed_on
from nbjobs.storage import user_folder
from tests.job_service.conftest import Service, stop_service

from .conftest import NAMESPACE, config, eventually
from .fake_apiserver import FakeApiServer
from .jobset_schema import jobset_problems
from .test_service import settings, start, status_file

pytestmark = pytest.mark.timeout(120)

PAIR = {"name": "pair", "gpus": 2, "nodes": 2, "memory": "16Gi", "time_limit": "1h"}


def spec_for(flavor_data: dict[str, Any], cfg: Any) -> LaunchSpec:
    flavor = next(f for f in cfg.flavors if f.name == flavor_data["name"])
    home = user_folder(cfg.storage, "ada")
    job_dir = home / ".nbjobs" / "jobs" / "0123abcd"
    return LaunchSpec(
        job_id="0123abcd",
        user="ada",
        flavor=flavor,
        snapshot_file=job_dir / "train.py",
        output_file=home / "train.log",
        status_file=job_dir / "status.json",
        log_file=job_dir / "log.txt",
        cwd=home,
        time_limit=3600,
        script=True,
    )


def env_of(pod_spec: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in pod_spec["containers"][0]["env"]}


@pytest.mark.parametrize("mode", ["indexed-job", "jobset"])
def test_a_multi_node_jobs_objects_pass_kubernetes_and_jobsets_schemas(mode):
    cfg = config(multi_node=mode, kueue={"queue_name": "team-a"})
    cfg = cfg.model_copy(update={"flavors": [*cfg.flavors, parse_flavor(PAIR)]})
    job = make_job(spec_for(PAIR, cfg), cfg.storage, cfg.backend.kubernetes)
    kubernetes_validate.validate(job, "1.37.0", strict=True)
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 2, 2)
    assert spec["backoffLimit"] == 0  # one rank failing fails the job
    pod = spec["template"]["spec"]
    env = env_of(pod)
    index = {
        "fieldRef": {
            "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"
        }
    }
    for name in ("RANK", "NODE_RANK", "PET_NODE_RANK", "NBJOBS_NODE_RANK"):
        assert env[name] == index, name
    assert (env["WORLD_SIZE"], env["NNODES"], env["PET_NNODES"]) == ("2", "2", "2")
    assert (env["MASTER_PORT"], env["LOCAL_RANK"]) == ("29500", "0")
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "2"  # per rank

    if mode == "indexed-job":
        assert pod["subdomain"] == "nbjobs-0123abcd"
        assert env["MASTER_ADDR"] == "nbjobs-0123abcd-0.nbjobs-0123abcd"
        service = make_rank_service(job, "11111111-2222-3333-4444-555555555555")
        kubernetes_validate.validate(service, "1.37.0", strict=True)
        assert service["spec"]["clusterIP"] == "None"
        assert service["spec"]["selector"] == {"job-name": "nbjobs-0123abcd"}
        assert service["metadata"]["ownerReferences"][0]["kind"] == "Job"
        return
    jobset = make_jobset(job)
    assert jobset_problems(jobset) == []
    assert env["MASTER_ADDR"] == "nbjobs-0123abcd-node-0-0.nbjobs-0123abcd"
    assert jobset["spec"]["suspend"] is True  # Kueue admits the JobSet, whole
    assert jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert jobset["spec"]["failurePolicy"] == {"maxRestarts": 0}
    [replicated] = jobset["spec"]["replicatedJobs"]
    assert "suspend" not in replicated["template"]["spec"]  # the JobSet's to say
    # the check can fail: a field JobSet does not have, a wrong type
    broken = copy.deepcopy(jobset)
    broken["spec"]["network"]["enableDNSHostnames"] = "yes"
    broken["spec"]["restartPolicy"] = "Never"
    problems = jobset_problems(broken)
    assert any("restartPolicy: not a field" in p for p in problems), problems
    assert any("boolean" in p for p in problems), problems


def parse_flavor(data: dict[str, Any]) -> Flavor:
    return Flavor.model_validate(data)


def test_a_flavor_whose_pods_would_not_start_together_is_refused():
    base = {
        "storage": {"root": "/srv", "volume": {"nfs": {"server": "n", "path": "/p"}}},
        "backend": {"kind": "kubernetes", "kubernetes": {"multi_node": "indexed-job"}},
    }
    for scheduler, words in (
        ("volcano", "Volcano, which starts pods together only in a PodGroup"),
        ("kai", "set backend.kubernetes.multi_node: jobset"),
    ):
        data = {**base, "flavors": [{**PAIR, "scheduler": scheduler}]}
        with pytest.raises(ConfigError, match=words):
            parse_config(yaml.safe_dump(data))
    # with a JobSet, KAI Scheduler gangs the pods
    jobset = copy.deepcopy(base)
    jobset["backend"]["kubernetes"]["multi_node"] = "jobset"
    parse_config(yaml.safe_dump({**jobset, "flavors": [{**PAIR, "scheduler": "kai"}]}))


@pytest.fixture
async def services() -> AsyncIterator[list[Service]]:
    started: list[Service] = []
    try:
        yield started
    finally:
        for svc in started:
            await stop_service(svc)


async def service_with(
    tmp_path: Path, kubeconfig: Path, services: list[Service], **kubernetes: Any
) -> Service:
    data = settings(tmp_path, **kubernetes)
    data["flavors"].append(PAIR)
    data["quotas"]["default"]["max_running_gpus"] = 8
    svc = await start(tmp_path, kubeconfig, data)
    services.append(svc)
    (svc.home("ada") / "train.py").write_text("print('rank')\n")
    return svc


async def ranks_running(
    svc: Service, fake: FakeApiServer, job: dict[str, Any], job_name: str, nodes: list[str]
) -> tuple[list[str], dict[str, Any]]:
    """The Job's pods made and started, one per node of ``nodes``, and its rank 0 saying
    it runs: the pods' names, and the job as it then shows, once the watch has also told
    the service where its pods run (the runner's word and the pods' binding come by two
    paths, in either order)."""
    pods = fake.start_ranks(job_name, NAMESPACE, nodes)
    write_status(status_file(svc, "ada", job["id"]), RunStatus("running", 0, 0))
    return pods, await svc.wait(
        "ada", job["id"], lambda j: j["state"] == "running" and bool(j["node"])
    )


def gpu_nodes(fake: FakeApiServer, count: int) -> list[str]:
    for i in range(count):
        fake.add_node(f"gpu-{i}", {"gpu": "a100"}, {"nvidia.com/gpu": "2"})
    return [f"gpu-{i}" for i in range(count)]


async def test_an_indexed_job_runs_its_ranks_and_the_first_to_fail_fails_the_job(
    fake, kubeconfig, tmp_path, services
):
    nodes = gpu_nodes(fake, 2)
    svc = await service_with(tmp_path, kubeconfig, services, multi_node="indexed-job")
    await eventually(lambda: svc.service.backend.mirror.nodes)
    async with svc.client("ada") as c:
        flavors = {f["name"]: f for f in (await c.get("flavors")).json()}
    # two nodes of two GPUs: room for one job of two pods of two GPUs, not two jobs
    assert (flavors["pair"]["available"], flavors["a100"]["available"]) == (1, 4)
    job = await svc.submit("ada", "train.py", "pair")
    assert (job["nodes"], job["flavor"]) == (2, "pair")
    name = f"nbjobs-{job['id']}"
    created = await eventually(lambda: fake.get("jobs", NAMESPACE, name))
    async with svc.client("ada") as c:
        flavors = {f["name"]: f for f in (await c.get("flavors")).json()}
    # before its pods exist, the Job counts as both of them
    assert flavors["pair"]["available"] == 0
    service = await eventually(lambda: fake.get("services", NAMESPACE, name))
    # the Service goes with its Job, however the Job goes
    assert service["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]

    pods, running = await ranks_running(svc, fake, job, name, nodes)
    assert sorted(p["spec"]["hostname"] for p in fake.pods_of(name, NAMESPACE)) == [
        f"{name}-0",
        f"{name}-1",
    ]
    assert running["node"] == "gpu-0, gpu-1"
    async with svc.client("ada") as c:
        flavors = {f["name"]: f for f in (await c.get("flavors")).json()}
    assert flavors["pair"]["available"] == 0  # its 2 x 2 GPUs are all the nodes have

    # rank 1 fails; the Job controller stops rank 0, whose runner says "cancelled"
    fake.finish_pod(pods[1], NAMESPACE, exit_code=1)
    write_status(status_file(svc, "ada", job["id"]), RunStatus("cancelled", 0, 0, exit_code=4))
    done = await svc.wait("ada", job["id"], timeout=30)
    assert done["state"] == "failed"
    assert done["message"] == (
        "rank 1 of 2 failed (its runner exited with code 1); the other ranks were stopped; "
        "see the log of rank 1"
    )
    assert done["node"] == "gpu-0, gpu-1"  # recorded: a drain of either node names it
    assert placed_on(done["node"], "gpu-1")
    assert not placed_on(done["node"], "gpu-")
    fake.expire_ttl(name, NAMESPACE)
    assert fake.get("services", NAMESPACE, name) is None  # collected with its Job


async def test_kueue_admits_a_jobsets_ranks_all_at_once_or_none(
    fake, kubeconfig, tmp_path, services
):
    nodes = gpu_nodes(fake, 3)
    svc = await service_with(
        tmp_path, kubeconfig, services, multi_node="jobset", kueue={"queue_name": "team-a"}
    )
    first = await svc.submit("ada", "train.py", "pair")
    second = await svc.submit("ada", "train.py", "pair")
    names = [f"nbjobs-{j['id']}" for j in (first, second)]
    for name in names:
        jobset = await eventually(lambda name=name: fake.get("jobsets", NAMESPACE, name))
        assert jobset["spec"]["suspend"] is True
    # before the JobSet controller made their Jobs, they say what they wait for
    waiting = await svc.wait("ada", first["id"], lambda j: j["waiting_reason"] is not None)
    assert waiting["waiting_reason"].startswith("waiting for the JobSet controller")

    fake.reconcile_jobsets()
    children = [f"{name}-node-0" for name in names]
    assert all(fake.get("jobs", NAMESPACE, c)["spec"]["suspend"] for c in children)
    seen = await svc.wait(
        "ada", first["id"], lambda j: (j["waiting_reason"] or "").startswith("waiting for Kueue")
    )
    assert seen["waiting_reason"] == "waiting for Kueue to admit it (queue team-a)"

    # 6 GPUs of quota: the first job's 4 fit, the second's 4 do not: none of its pods start
    assert fake.kueue_admit_fitting(NAMESPACE, gpus=6) == [names[0]]
    assert fake.get("jobs", NAMESPACE, children[0])["spec"]["suspend"] is False
    assert fake.get("jobs", NAMESPACE, children[1])["spec"]["suspend"] is True
    assert fake.pods_of(children[1], NAMESPACE) == []

    pods, running = await ranks_running(svc, fake, first, children[0], nodes[:2])
    assert running["node"] == "gpu-0, gpu-1"
    still = await svc.job("ada", second["id"])
    assert still["state"] == "queued"

    write_status(status_file(svc, "ada", first["id"]), RunStatus("succeeded", 0, 0, exit_code=0))
    fake.finish_pod(pods[0], NAMESPACE, exit_code=0)
    # one rank of two done: the Job, and the job, go on
    assert not fake.get("jobs", NAMESPACE, children[0])["status"].get("conditions")
    assert (await svc.job("ada", first["id"]))["state"] == "running"
    fake.finish_pod(pods[1], NAMESPACE, exit_code=0)  # all ranks done: the Job completes
    done = await svc.wait("ada", first["id"], timeout=30)
    assert done["state"] == "succeeded", done
    fake.reconcile_jobsets()
    assert fake.get("jobsets", NAMESPACE, names[0])["status"]["conditions"][-1]["type"] == (
        "Completed"
    )
    # its quota back, Kueue admits the second whole
    assert fake.kueue_admit_fitting(NAMESPACE, gpus=6) == [names[1]]


async def admitted_pair(
    fake: FakeApiServer, kubeconfig: Path, tmp_path: Path, services: list[Service]
) -> tuple[Service, dict[str, Any], str, list[str]]:
    """A job on two nodes as a JobSet in Kueue's queue team-a, made and admitted: the
    service, the job, its JobSet's name and the nodes."""
    nodes = gpu_nodes(fake, 2)
    svc = await service_with(
        tmp_path, kubeconfig, services, multi_node="jobset", kueue={"queue_name": "team-a"}
    )
    job = await svc.submit("ada", "train.py", "pair")
    name = f"nbjobs-{job['id']}"
    await eventually(lambda: fake.get("jobsets", NAMESPACE, name))
    fake.reconcile_jobsets()
    fake.kueue_admit_fitting(NAMESPACE, gpus=8)
    return svc, job, name, nodes


async def preempted(
    svc: Service, fake: FakeApiServer, job: dict[str, Any], name: str
) -> dict[str, Any]:
    """Kueue suspends the running JobSet again: the job, as it shows once queued again,
    after the service made its next JobSet (suspended, for Kueue to admit)."""
    write_status(status_file(svc, "ada", job["id"]), RunStatus("cancelled", 0, 0, exit_code=4))
    fake.set_jobset_suspend(name, NAMESPACE, True)
    again = await eventually(lambda: fake.get("jobsets", NAMESPACE, f"{name}-r1"), timeout=30)
    assert again["spec"]["suspend"] is True
    requeued = await svc.wait("ada", job["id"], lambda j: j["requeues"] == 1)
    assert requeued["message"].startswith("Kueue preempted it from queue team-a")
    return requeued


async def test_cancel_and_kueue_preemption_take_the_whole_jobset(
    fake, kubeconfig, tmp_path, services
):
    svc, job, name, nodes = await admitted_pair(fake, kubeconfig, tmp_path, services)
    await ranks_running(svc, fake, job, f"{name}-node-0", nodes)

    # Kueue preempts the JobSet: all of it goes, and the job queues again as a new one
    await preempted(svc, fake, job, name)
    assert fake.get("jobsets", NAMESPACE, name) is None
    assert fake.get("jobs", NAMESPACE, f"{name}-node-0") is None  # collected with it

    # admitted again and running, a cancel deletes the JobSet and every rank with it
    fake.reconcile_jobsets()
    fake.kueue_admit_fitting(NAMESPACE, gpus=8)
    await ranks_running(svc, fake, job, f"{name}-r1-node-0", nodes)
    async with svc.client("ada") as c:
        assert (await c.post(f"jobs/{job['id']}/cancel")).status_code == 200
    await eventually(lambda: fake.get("jobsets", NAMESPACE, f"{name}-r1") is None)
    await eventually(lambda: not fake.pods_of(f"{name}-r1-node-0", NAMESPACE))
    done = await svc.wait("ada", job["id"], timeout=30)
    assert done["state"] == "cancelled"


async def test_a_preemption_the_service_sees_only_after_the_fact_still_queues_it_again(
    fake, kubeconfig, tmp_path, services
):
    # Under load the watches may bring a JobSet's whole run at once: its pods bound,
    # running and deleted, its Job already suspended again. It ran all the same.
    svc, job, name, nodes = await admitted_pair(fake, kubeconfig, tmp_path, services)
    # no await from the ranks' start to the suspension (in preempted): the service sees
    # none of it in between
    fake.start_ranks(f"{name}-node-0", NAMESPACE, nodes)
    requeued = await preempted(svc, fake, job, name)
    assert requeued["state"] in ("queued", "starting")  # its next JobSet may be made already


async def test_without_jobset_in_the_cluster_the_job_fails_saying_what_to_do(
    fake, kubeconfig, tmp_path, services
):
    gpu_nodes(fake, 2)
    fake.absent.add("jobsets")
    svc = await service_with(tmp_path, kubeconfig, services, multi_node="jobset")
    job = await svc.submit("ada", "train.py", "pair")
    done = await svc.wait("ada", job["id"], timeout=30)
    assert done["state"] == "failed"
    assert "this cluster has no JobSet API (jobset.x-k8s.io/v1alpha2)" in done["message"]
    assert "set backend.kubernetes.multi_node: indexed-job" in done["message"]


async def test_an_evicted_rank_requeues_the_whole_job_and_its_deadline_ends_it(
    fake, kubeconfig, tmp_path, services
):
    """One rank's pod evicted (a node drained): the Job fails as a whole, the job goes
    back to the queue as its flavor allows, every rank's log kept; the next attempt's
    ranks reach the time limit together: timed out, not failed."""
    nodes = gpu_nodes(fake, 2)
    data_pair = {**PAIR, "requeue_on_eviction": 1}
    data = settings(tmp_path, multi_node="indexed-job")
    data["flavors"].append(data_pair)
    data["quotas"]["default"]["max_running_gpus"] = 8
    svc = await start(tmp_path, kubeconfig, data)
    services.append(svc)
    (svc.home("ada") / "train.py").write_text("print('rank')\n")
    job = await svc.submit("ada", "train.py", "pair")
    first = f"nbjobs-{job['id']}"
    await eventually(lambda: fake.get("jobs", NAMESPACE, first))
    pods, _ = await ranks_running(svc, fake, job, first, nodes)
    jobdir = status_file(svc, "ada", job["id"]).parent
    (jobdir / "log-rank-1.txt").write_text("rank 1: epoch 1\n")  # as its runner writes it

    fake.finish_pod(
        pods[1], NAMESPACE, exit_code=143, disruption=("EvictionByEvictionAPI", "Eviction API")
    )
    second = f"{first}-r1"
    await eventually(lambda: fake.get("jobs", NAMESPACE, second))
    again = await svc.job("ada", job["id"])
    assert again["requeues"] == 1
    assert "evicted" in again["message"]
    assert (jobdir / "log-rank-1.attempt-1.txt").read_text() == "rank 1: epoch 1\n"
    assert not (jobdir / "log-rank-1.txt").exists()  # the next attempt's rank 1 starts anew
    await eventually(lambda: fake.get("services", NAMESPACE, second))  # its own Service

    await ranks_running(svc, fake, job, second, nodes)
    fake.job_condition(second, NAMESPACE, "Failed", "DeadlineExceeded", "past its deadline")
    done = await svc.wait("ada", job["id"], timeout=30)
    assert done["state"] == "timed_out", done
    assert done["message"].startswith("stopped by Kubernetes at its time limit")


async def test_a_restarted_service_adopts_a_running_jobset_and_sees_it_end(
    fake, kubeconfig, tmp_path, services
):
    nodes = gpu_nodes(fake, 2)
    svc = await service_with(tmp_path, kubeconfig, services, multi_node="jobset")
    job = await svc.submit("ada", "train.py", "pair")
    name = f"nbjobs-{job['id']}"
    await eventually(lambda: fake.get("jobsets", NAMESPACE, name))
    fake.reconcile_jobsets()
    child = f"{name}-node-0"
    assert fake.get("jobs", NAMESPACE, child)["metadata"]["annotations"]["nbjobs.io/owner"] == "ada"
    pods, _ = await ranks_running(svc, fake, job, child, nodes)
    services.remove(svc)
    await stop_service(svc)  # the job goes on in the cluster

    again = await start(tmp_path, kubeconfig, yaml.safe_load(svc.config_file.read_text()))
    services.append(again)
    for pod in pods:
        fake.finish_pod(pod, NAMESPACE, exit_code=0)
    write_status(status_file(again, "ada", job["id"]), RunStatus("succeeded", 0, 0, exit_code=0))
    done = await again.wait("ada", job["id"], timeout=30)
    assert done["state"] == "succeeded", done
    assert fake.get("jobsets", NAMESPACE, name) is not None  # left to its TTL, not deleted

"""GPU-sharing engines: each example nbjobs.yaml validates and makes Jobs whose fields
match its engine's contract (HAMi, KAI Scheduler, Volcano, time-slicing, MIG, Kueue per
class); bad settings are refused naming the setting; the fake's schedulers place, refuse
and ignore pods as the real ones do; nbjobs says who queues a job and why."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml
from nbjobs.job_service.backends.kubernetes_objects import (
    make_job,
)
from nbjobs.job_service.backends.kubernetes_verdicts import (
    engine_waiting,
    newest_warning,
)

from nbjobs.config import ConfigError, KueueConfig, NbjobsConfig, load_config, parse_config

from .conftest import NAMESPACE
from .fake_apiserver import FakeApiServer
from .test_manifests import STORAGE, spec, valid

EXAMPLES = Path(__file__).parents[2] / "hub_config" / "examples" / "gpu-sharing"


def example(name: str) -> NbjobsConfig:
    return load_config(EXAMPLES / f"{name}.yaml")


def job_of(config: NbjobsConfig, flavor: str, **extra: Any) -> dict[str, Any]:
    """The Job of ``flavor`` as the example's backend makes it, checked by Kubernetes'
    own schema."""
    found = config.flavor(flavor)
    assert found is not None
    return valid(make_job(spec(found, **extra), STORAGE, config.backend.kubernetes))


def pod_of(job: dict[str, Any]) -> dict[str, Any]:
    return job["spec"]["template"]


def resources_of(job: dict[str, Any]) -> dict[str, str]:
    resources = pod_of(job)["spec"]["containers"][0]["resources"]
    assert resources["requests"] == resources["limits"]  # extended resources must match
    return {k: v for k, v in resources["limits"].items() if k not in ("cpu", "memory")}


@pytest.mark.parametrize("name", ["hami", "kai", "volcano", "time-slicing", "mig"])
def test_each_engine_example_makes_valid_jobs_for_every_flavor(name: str):
    config = example(name)
    assert config.backend.kind == "kubernetes"
    for flavor in config.flavors:
        job = job_of(config, flavor.name)
        assert job["metadata"]["labels"]["nbjobs.io/flavor"] == flavor.name


def test_hami_gets_one_virtual_gpu_with_its_part_of_memory_and_cores():
    config = example("hami")
    quarter = job_of(config, "a100-quarter")
    assert resources_of(quarter) == {
        "nvidia.com/gpu": "1",
        "nvidia.com/gpumem": "10240",  # the admin's MiB win over a percentage
        "nvidia.com/gpucores": "25",
    }
    assert "schedulerName" not in pod_of(quarter)["spec"]  # HAMi's webhook sets it
    assert resources_of(job_of(config, "a100-half")) == {
        "nvidia.com/gpu": "1",
        "nvidia.com/gpumem-percentage": "50",
        "nvidia.com/gpucores": "50",
    }
    assert resources_of(job_of(config, "a100")) == {"nvidia.com/gpu": "1"}
    shares = {f.name: f.gpu_equivalents for f in config.flavors}
    assert shares == {"a100-quarter": 0.25, "a100-half": 0.5, "a100": 1.0}


def test_kai_gets_its_scheduler_queue_and_fraction_and_no_gpu_request():
    config = example("kai")
    half = job_of(config, "gpu-half")
    pod = pod_of(half)
    assert pod["spec"]["schedulerName"] == "kai-scheduler"
    assert pod["metadata"]["annotations"] == {"gpu-fraction": "0.5"}
    assert resources_of(half) == {}  # a GPU request would take a whole GPU
    assert pod["metadata"]["labels"]["kai.scheduler/queue"] == "research"
    assert half["metadata"]["labels"]["kai.scheduler/queue"] == "research"
    # a student's job goes to their class's queue instead
    in_class = job_of(config, "gpu-half", queue="physics-101")
    assert pod_of(in_class)["metadata"]["labels"]["kai.scheduler/queue"] == "physics-101"
    whole = job_of(config, "gpu")
    assert resources_of(whole) == {"nvidia.com/gpu": "1"}
    assert pod_of(whole)["spec"]["schedulerName"] == "kai-scheduler"
    assert "annotations" not in pod_of(whole)["metadata"]


def test_volcano_gets_its_scheduler_queue_annotation_and_vgpu():
    config = example("volcano")
    quarter = job_of(config, "vgpu-quarter", queue="ml-201")
    pod = pod_of(quarter)
    assert pod["spec"]["schedulerName"] == "volcano"
    assert pod["metadata"]["annotations"] == {"scheduling.volcano.sh/queue-name": "ml-201"}
    assert quarter["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] == "ml-201"
    assert resources_of(quarter) == {
        "volcano.sh/vgpu-number": "1",
        "volcano.sh/vgpu-cores": "25",
        "volcano.sh/vgpu-memory": "8000",
    }


def test_time_slicing_and_mig_take_one_of_their_resource():
    assert resources_of(job_of(example("time-slicing"), "t4-shared")) == {
        "nvidia.com/gpu.shared": "1"
    }
    mig = example("mig")
    assert resources_of(job_of(mig, "a100-1g")) == {"nvidia.com/mig-1g.10gb": "1"}
    assert mig.flavor("a100-3g").gpu_equivalents == 0.429  # type: ignore[union-attr]


def test_with_kueue_a_class_has_its_own_local_queue():
    config = example("hami")
    settings = config.backend.kubernetes.model_copy(
        update={"kueue": KueueConfig(queue_name="gpu-jobs")}
    )
    flavor = config.flavor("a100-quarter")
    assert flavor is not None
    everyone = valid(make_job(spec(flavor), STORAGE, settings))
    assert everyone["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu-jobs"
    assert everyone["spec"]["suspend"] is True
    in_class = valid(make_job(spec(flavor, queue="physics-101"), STORAGE, settings))
    assert in_class["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "physics-101"


def test_flavor_labels_and_annotations_go_on_the_job_and_its_pod():
    config = parse_config(
        """
backend: {kind: kubernetes, kubernetes: {default_image: example.org/nb:1}}
flavors:
  - name: gpu
    gpus: 1
    labels: {team: physics}
    annotations: {example.org/cost-centre: "4711"}
"""
    )
    job = job_of(config, "gpu")
    for meta in (job["metadata"], pod_of(job)["metadata"]):
        assert meta["labels"]["team"] == "physics"
        assert meta["labels"]["nbjobs.io/job-id"] == "0123456789ab"
    assert job["metadata"]["annotations"]["example.org/cost-centre"] == "4711"
    assert pod_of(job)["metadata"]["annotations"] == {"example.org/cost-centre": "4711"}


FLAVOR = "backend: {kind: kubernetes}\nflavors:\n  - {name: g, gpus: 1, %s}\n"


@pytest.mark.parametrize(
    ("setting", "error"),
    [
        ("scheduler: Kai_Sched", "flavors.0.scheduler: scheduler 'Kai_Sched' must be kai"),
        ("fraction: 0.25", "fraction 0.25 needs to say how the cluster shares GPUs"),
        ("fraction: 1.5, gpu_sharing: hami", "flavors.0.fraction: Input should be less than 1"),
        ("fraction: 0, gpu_sharing: hami", "flavors.0.fraction: Input should be greater than 0"),
        ("gpu_sharing: kai", "gpu_sharing kai hands out part of a GPU: give the part as fraction"),
        ("gpu_sharing: mig, fraction: 0.5", "gpu_sharing mig needs gpu_resource set"),
        ("gpu_sharing: slices", "flavors.0.gpu_sharing: Input should be 'hami'"),
        (
            "fraction: 0.5, gpu_sharing: kai, scheduler: volcano",
            "gpu_sharing kai needs scheduler: kai",
        ),
        ("resources: {nvidia.com/gpu: 2}", "resources: nvidia.com/gpu is set by the flavor's gpus"),
        ("resources: {cpu: 2}", "resources: cpu is set by the flavor's cpu"),
        ("resources: {nvidia.com/gpumem: lots}", "'lots' is not a Kubernetes quantity"),
        ("labels: {nbjobs.io/owner: eve}", "label 'nbjobs.io/owner' is written by nbjobs"),
        ("labels: {kai.scheduler/queue: x}", "label 'kai.scheduler/queue' is written by nbjobs"),
        ("annotations: {gpu-fraction: '1'}", "annotation 'gpu-fraction' is written by nbjobs"),
        ("labels: {team: 'two words'}", "label value 'two words' is not valid"),
        ("queue: Physics 101", "queue 'Physics 101' must be a queue's name"),
        ("queue: physics", "queue physics needs a queueing engine: set scheduler: kai"),
    ],
)
def test_a_bad_engine_setting_is_refused_naming_it(setting: str, error: str):
    with pytest.raises(ConfigError) as refused:
        parse_config(FLAVOR % setting)
    assert error in str(refused.value)
    assert "line 3" in str(refused.value)


def test_a_fraction_flavor_needs_one_gpu_and_a_class_queue_an_engine():
    with pytest.raises(ConfigError, match=r"fraction 0\.25 is a share of one GPU: set gpus: 1"):
        parse_config("flavors: [{name: g, gpus: 2, fraction: 0.25, gpu_sharing: hami}]")
    with pytest.raises(ConfigError, match="class 'c1': queue c1 needs a queueing engine"):
        parse_config(
            "backend: {kind: kubernetes}\nflavors: [{name: g, gpus: 1}]\n"
            "classes: [{name: c1, queue: c1}]\n"
        )
    # with Kueue on, a queue of any flavor or class is a LocalQueue
    parse_config(
        "backend: {kind: kubernetes, kubernetes: {kueue: {queue_name: all}}}\n"
        "flavors: [{name: g, gpus: 1, queue: g}]\nclasses: [{name: c1, queue: c1}]\n"
    )


def test_the_queue_manifests_define_every_queue_the_examples_name():
    for engine, kinds in [
        ("kai", {("scheduling.run.ai/v2", "Queue")}),
        ("volcano", {("scheduling.volcano.sh/v1beta1", "Queue")}),
    ]:
        config = example(engine)
        named = {f.queue for f in config.flavors if f.queue} | {
            c.queue for c in config.classes if c.queue
        }
        documents = list(yaml.safe_load_all((EXAMPLES / "queues" / f"{engine}.yaml").read_text()))
        assert {(d["apiVersion"], d["kind"]) for d in documents} == kinds
        assert named <= {d["metadata"]["name"] for d in documents}, engine
    kueue = list(yaml.safe_load_all((EXAMPLES / "queues" / "kueue.yaml").read_text()))
    local = {d["metadata"]["name"]: d for d in kueue if d["kind"] == "LocalQueue"}
    cluster = {d["metadata"]["name"] for d in kueue if d["kind"] == "ClusterQueue"}
    assert {"physics-101", "research"} <= set(local)
    for queue in local.values():
        assert queue["metadata"]["namespace"] == "gpu-jobs"  # the examples' job namespace
        assert queue["spec"]["clusterQueue"] in cluster


# -- what nbjobs says of a pod another scheduler holds -----------------------------------


def engine_pod(scheduler: str, age: float, **meta: Any) -> dict[str, Any]:
    created = datetime.now(timezone.utc) - timedelta(seconds=age)
    return {
        "metadata": {"creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ"), **meta},
        "spec": {"schedulerName": scheduler},
        "status": {"phase": "Pending"},
    }


def test_a_queued_job_names_its_engine_queue_and_the_engines_own_words():
    pod = engine_pod("kai-scheduler", 5, labels={"kai.scheduler/queue": "physics-101"})
    assert engine_waiting(pod, "kai-scheduler", None) == (
        "queued by KAI Scheduler, queue physics-101"
    )
    said = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    said["message"] = "not enough GPUs in queue physics-101"
    assert engine_waiting(pod, "kai-scheduler", said) == (
        "queued by KAI Scheduler, queue physics-101: not enough GPUs in queue physics-101"
    )


def test_a_scheduler_that_never_answers_is_named_as_maybe_not_running():
    pod = engine_pod("volcano", 180, annotations={"scheduling.volcano.sh/queue-name": "ml-201"})
    assert engine_waiting(pod, "volcano", None) == (
        "queued by Volcano, queue ml-201: no scheduler named volcano has looked at it in "
        "3 min; is Volcano installed and running? Ask your admin"
    )


def test_the_engines_newest_warning_event_says_why_when_its_condition_does_not():
    events = [
        {"type": "Warning", "reason": "Unschedulable", "message": "queue full",
         "lastTimestamp": "2026-11-25T10:00:00Z"},
        {"type": "Normal", "reason": "Scheduled", "message": "ok",
         "lastTimestamp": "2026-11-25T10:09:00Z"},
        {"type": "Warning", "reason": "FailedScheduling", "message": "no node fits",
         "series": {"lastObservedTime": "2026-11-25T10:05:00.000000Z"},
         "eventTime": "2026-11-25T09:00:00.000000Z"},
    ]  # fmt: skip
    assert newest_warning(events) == "no node fits"
    assert newest_warning(events[1:2]) is None
    pod = engine_pod("kai-scheduler", 300, labels={"kai.scheduler/queue": "physics-101"})
    # an event counts as a word: the scheduler is running
    assert engine_waiting(pod, "kai-scheduler", None, said="no node fits") == (
        "queued by KAI Scheduler, queue physics-101: no node fits"
    )
    condition = {"type": "PodScheduled", "status": "False", "message": "quota of physics-101"}
    assert engine_waiting(pod, "kai-scheduler", condition, said="no node fits") == (
        "queued by KAI Scheduler, queue physics-101: quota of physics-101"
    )


# -- the fake's schedulers ---------------------------------------------------------------


def pending_pod(fake: FakeApiServer, config: NbjobsConfig, flavor: str, job_id: str) -> str:
    """A Job of ``flavor`` created in the fake, and the pod its controller makes."""
    found = config.flavor(flavor)
    assert found is not None
    launch = dataclasses.replace(spec(found), job_id=job_id)
    job = make_job(launch, STORAGE, config.backend.kubernetes)
    job["metadata"]["namespace"] = NAMESPACE
    fake._create("jobs", NAMESPACE, job)  # as a POST does: stored, validated, given a uid
    return str(fake.start_pod(job["metadata"]["name"], NAMESPACE)["metadata"]["name"])


def conditions(fake: FakeApiServer, pod: str) -> list[dict[str, Any]]:
    return list(fake.get("pods", NAMESPACE, pod)["status"].get("conditions") or [])  # type: ignore[index]


async def test_fake_default_scheduler_counts_gpu_memory_as_a_node_resource():
    fake = FakeApiServer()
    fake.hami_webhook = True  # HAMi sends its pods to hami-scheduler
    fake.add_node("gpu-0", allocatable={"nvidia.com/gpu": "10", "nvidia.com/gpumem": "40960"})
    config = example("hami")
    pods = [pending_pod(fake, config, "a100-quarter", f"q{i:011d}") for i in range(5)]
    fake.schedulers.add("hami-scheduler")
    assert fake.schedule_pending() == pods[:4]  # four quarters of the GPU's memory
    [refused] = conditions(fake, pods[4])
    assert refused["message"] == "0/1 nodes are available: 1 Insufficient nvidia.com/gpumem."


async def test_fake_kai_packs_fractions_and_says_why_it_waits_and_no_scheduler_means_silence():
    fake = FakeApiServer()
    fake.add_node("gpu-0", allocatable={"nvidia.com/gpu": "1"})
    config = example("kai")
    halves = [pending_pod(fake, config, "gpu-half", f"h{i:011d}") for i in range(3)]
    assert fake.schedule_pending() == []  # KAI not running: nobody looks at the pods
    assert all(conditions(fake, pod) == [] for pod in halves)
    fake.schedulers.add("kai-scheduler")
    assert fake.schedule_pending() == halves[:2]  # two halves share the one GPU
    [waiting] = conditions(fake, halves[2])
    assert (waiting["status"], waiting["reason"]) == ("False", "Unschedulable")
    assert "not enough GPUs in queue research" in waiting["message"]

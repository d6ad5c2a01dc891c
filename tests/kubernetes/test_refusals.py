"""What the cluster refuses reaches the job: a Job whose pod the API server will not admit
(a ResourceQuota, Pod Security admission) shows the cluster's own words within seconds,
waits or fails by the admin's rule, and never ends "timed out" for a time no pod ran."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone

from nbjobs.job_runner import RunStatus
from nbjobs.job_runner.status import write_status
from nbjobs.job_service.backends.kubernetes_verdicts import job_verdict

from .conftest import NAMESPACE, eventually
from .test_service import settings, start, status_file

#: the jobs' namespace as the chart makes it (jobsNamespace.podSecurity)
RESTRICTED = {
    "metadata": {"name": NAMESPACE, "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}
}
NO_GPUS = {"metadata": {"name": "gpu-quota"}, "spec": {"hard": {"requests.nvidia.com/gpu": "0"}}}


async def a_job_made(svc, fake) -> tuple[dict, str]:
    """ada's notebook submitted, and its Job made: the job, and its Job's name."""
    svc.write("ada", "train.ipynb", "print('hi')")
    job = await svc.submit("ada", "train.ipynb", "a100")
    name = f"nbjobs-{job['id']}"
    await eventually(lambda: fake.get("jobs", NAMESPACE, name))
    return job, name


async def test_a_quota_that_allows_no_gpu_is_said_in_its_words_and_lifting_it_lets_the_job_run(
    fake, kubeconfig, tmp_path, running_services
):
    fake.add_node("gpu-0", {"gpu": "a100"}, {"nvidia.com/gpu": "1"})
    fake.put(
        "resourcequotas",
        {**NO_GPUS, "metadata": {**NO_GPUS["metadata"], "namespace": NAMESPACE}},
        "ADDED",
    )
    svc = await start(tmp_path, kubeconfig, settings(tmp_path))
    running_services.append(svc)

    job, name = await a_job_made(svc, fake)
    assert fake.make_pod(name, NAMESPACE, "gpu-0") is None  # the API server refuses it
    waiting = await svc.wait(
        "ada", job["id"], lambda j: "refuses" in (j.get("waiting_reason") or ""), timeout=20
    )
    assert waiting["state"] in ("queued", "starting")
    assert waiting["waiting_reason"].startswith(
        "the cluster refuses to make its pod: Error creating: pods "
    )
    assert (
        "exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=1"
        in (waiting["waiting_reason"])
    )

    fake.remove("resourcequotas", NAMESPACE, "gpu-quota")  # the admin lifts the quota
    pod = fake.make_pod(name, NAMESPACE, "gpu-0")
    assert pod is not None
    fake.run_pod(pod["metadata"]["name"], NAMESPACE)
    write_status(status_file(svc, "ada", job["id"]), RunStatus("succeeded", 1, 1, exit_code=0))
    fake.finish_pod(pod["metadata"]["name"], NAMESPACE, exit_code=0)
    done = await svc.wait("ada", job["id"], timeout=20)
    assert done["state"] == "succeeded"


async def test_the_admins_rule_fails_a_refused_job_in_the_clusters_words(
    fake, kubeconfig, tmp_path, running_services
):
    fake.add_node("gpu-0", {"gpu": "a100"}, {"nvidia.com/gpu": "1"})
    fake.put("namespaces", copy.deepcopy(RESTRICTED), "ADDED")
    svc = await start(tmp_path, kubeconfig, settings(tmp_path, fail_refused_after="1s"))
    running_services.append(svc)

    job, name = await a_job_made(svc, fake)
    # the example storage is an inline nfs volume: Pod Security's restricted level refuses it
    assert fake.make_pod(name, NAMESPACE, "gpu-0") is None

    done = await svc.wait("ada", job["id"], timeout=30)
    assert done["state"] == "failed"
    assert done["message"].startswith("the cluster refused to make its pod for 1 s: Error creating")
    assert 'violates PodSecurity "restricted:latest"' in done["message"]
    assert 'uses restricted volume type "nfs"' in done["message"]
    await eventually(lambda: fake.get("jobs", NAMESPACE, name) is None)  # its Job went


def test_a_deadline_that_ran_while_no_pod_existed_is_no_time_out():
    """Kubernetes' deadline counts from the Job's start, pod or no pod: a Job that never
    had one failed to start, it did not run too long."""
    started = (datetime.now(timezone.utc) - timedelta(minutes=11)).strftime("%Y-%m-%dT%H:%M:%SZ")
    job = {
        "metadata": {"name": "nbjobs-0123456789ab", "creationTimestamp": started},
        "spec": {"activeDeadlineSeconds": 600},
        "status": {
            "startTime": started,
            "conditions": [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}],
        },
    }
    said = 'Error creating: pods "nbjobs-0123456789ab-x1y2z" is forbidden: exceeded quota'
    verdict = job_verdict(job, [], None, None, said)
    assert (verdict.done, verdict.state) == (True, "failed")
    assert verdict.message == (
        f"the cluster never made its pod within its time limit (600 s): {said}"
    )
    ran = {"metadata": {"name": "p", "creationTimestamp": started}, "status": {"phase": "Failed"}}
    assert job_verdict(job, [ran], None, None, None).state == "timed_out"


async def test_a_job_pod_on_a_claim_passes_the_restricted_level(
    fake, kubeconfig, tmp_path, running_services
):
    """The chart's jobs' namespace enforces Pod Security's restricted level: nbjobs' job
    pods pass it when the storage is a PersistentVolumeClaim."""
    fake.add_node("gpu-0", {"gpu": "a100"}, {"nvidia.com/gpu": "1"})
    fake.put("namespaces", copy.deepcopy(RESTRICTED), "ADDED")
    data = settings(tmp_path)
    data["storage"]["volume"] = {"persistentVolumeClaim": {"claimName": "nbjobs-home"}}
    svc = await start(tmp_path, kubeconfig, data)
    running_services.append(svc)

    _, name = await a_job_made(svc, fake)
    assert fake.make_pod(name, NAMESPACE, "gpu-0") is not None
    assert [e for e in fake.list("events", NAMESPACE) if e["reason"] == "FailedCreate"] == []


def test_only_a_job_without_a_pod_is_refused_and_an_engines_words_are_not_a_refusal():
    """fail_refused_after ends a job whose pod the cluster will not make; a pod that KAI
    Scheduler or Volcano holds unplaced, with the engine's warning, waits as it says."""
    started = (datetime.now(timezone.utc) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    job = {"metadata": {"name": "nbjobs-0123456789ab", "creationTimestamp": started}, "spec": {}}
    said = "Resources were not found for pod group: not enough GPUs in queue q"
    refused = job_verdict(job, [], None, None, said)
    assert refused.refused
    assert refused.waiting == f"the cluster refuses to make its pod: {said}"
    held = {
        "metadata": {"name": "nbjobs-0123456789ab-x1y2z", "creationTimestamp": started},
        "spec": {"schedulerName": "kai-scheduler"},
        "status": {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                 "message": said}
            ],
        },
    }  # fmt: skip
    waiting = job_verdict(job, [held], None, None, said)
    assert waiting.waiting
    assert not waiting.refused

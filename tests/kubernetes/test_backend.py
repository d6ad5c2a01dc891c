"""The Kubernetes backend against a fake API server: create, follow, the plain answers, logs
(the runner's, or the pod's when the runner left none), cancel, capacity, drain, restarts,
watch resumption."""

from __future__ import annotations

import asyncio
import stat
import uuid

import pytest
from nbjobs.job_service.backends import LaunchSpec, kubernetes_keep
from nbjobs.job_service.backends.kubernetes_api import KubeError
from nbjobs.job_service.backends.kubernetes_objects import (
    make_job,
)

from nbjobs.storage import job_folder, make_job_dir, user_folder

from .conftest import NAMESPACE, config, eventually
from .fake_apiserver import FakeApiServer

JOB = "nbjobs-0123456789ab"


def spec(cfg, job_id: str = "0123456789ab", flavor: str = "a100", user: str = "ada") -> LaunchSpec:
    home = user_folder(cfg.storage, user)
    jobdir = job_folder(home, job_id)
    return LaunchSpec(
        job_id=job_id,
        user=user,
        flavor=cfg.flavor(flavor),
        snapshot_file=jobdir / "input.ipynb",
        output_file=home / f"nb.{job_id}.ipynb",
        status_file=jobdir / "status.json",
        log_file=jobdir / "log.txt",
        cwd=home,
        time_limit=600,
    )


def spec_in_a_new_folder(cfg, job_id: str = "0123456789ab") -> LaunchSpec:
    """A job of a user of its own, with its folder made (as the service does at submit)."""
    job_spec = spec(cfg, job_id=job_id, user="ada-" + uuid.uuid4().hex[:6])
    job_spec.job_dir.parent.parent.parent.mkdir(parents=True)
    make_job_dir(job_spec.job_dir, {"input.ipynb": b"{}"})
    return job_spec


def gpu_nodes(fake: FakeApiServer, count: int = 1, gpus: int = 1) -> None:
    for i in range(count):
        fake.add_node(f"gpu-{i}", {"gpu": "a100"}, {"nvidia.com/gpu": str(gpus)})


async def test_a_job_is_created_followed_to_success_and_its_log_left_to_the_runner(
    make_backend, fake
):
    cfg = config()
    gpu_nodes(fake)
    backend = make_backend(cfg)
    job_spec = spec_in_a_new_folder(cfg)
    launched = await backend.start(job_spec)

    assert launched.ref == f"{NAMESPACE}/{JOB}"
    stored = fake.get("jobs", NAMESPACE, JOB)
    expected = make_job(job_spec, cfg.storage, cfg.backend.kubernetes)
    assert stored["metadata"]["labels"] == expected["metadata"]["labels"]
    assert stored["spec"]["template"]["spec"] == expected["spec"]["template"]["spec"]
    command = stored["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[command.index("--log-file") + 1] == (
        f"/home/jovyan/.nbjobs/jobs/{job_spec.job_id}/log.txt"
    )

    waiter = asyncio.ensure_future(backend.wait(launched.ref))
    pod = fake.start_pod(JOB, NAMESPACE, node="gpu-0")["metadata"]["name"]
    fake.run_pod(pod, NAMESPACE)
    await eventually(lambda: (s := backend.seen(launched.ref)) and s.node == "gpu-0")
    # the runner writes its log into the job's folder; the pod's own log says the same
    for line in ("cell 1 of 2\n", "cell 2 of 2\n"):
        with job_spec.log_file.open("a") as log:
            log.write(line)
        fake.append_log(pod, NAMESPACE, line)
    fake.finish_pod(pod, NAMESPACE, exit_code=0)
    outcome = await asyncio.wait_for(waiter, 10)

    assert (outcome.exit_code, outcome.state, outcome.message) == (0, None, None)
    assert job_spec.log_file.read_text() == "cell 1 of 2\ncell 2 of 2\n"  # one writer
    assert ("get", "", "pods/log") not in fake.requests  # nothing followed, nothing copied


async def test_a_runner_that_left_no_log_gets_what_its_pod_printed(make_backend, fake, monkeypatch):
    """An image without nbjobs: python says so on stderr and the runner never writes a
    log; the user reads why in the job's log all the same (the first part of it)."""
    monkeypatch.setattr(kubernetes_keep, "POD_LOG_KEPT", 64)
    cfg = config()
    backend = make_backend(cfg)
    job_spec = spec_in_a_new_folder(cfg, job_id="bbbbbbbbbbbb")
    ref = (await backend.start(job_spec)).ref
    waiter = asyncio.ensure_future(backend.wait(ref))
    pod = fake.start_pod("nbjobs-bbbbbbbbbbbb", NAMESPACE, node="gpu-0")["metadata"]["name"]
    fake.run_pod(pod, NAMESPACE)
    said = "/usr/bin/python: No module named nbjobs\n"
    fake.append_log(pod, NAMESPACE, said + "x" * 100)
    fake.finish_pod(pod, NAMESPACE, exit_code=1)
    outcome = await asyncio.wait_for(waiter, 10)

    assert outcome.exit_code == 1
    log = job_spec.log_file.read_text()
    assert log.startswith(said)
    assert log.endswith("\n[nbjobs] the pod printed more; the first 64 bytes are kept here\n")
    assert stat.S_IMODE(job_spec.log_file.stat().st_mode) == 0o600
    # only once the pod has ended, and only where no log was: never a second writer
    assert [v for v, _, r in fake.requests if r == "pods/log"] == ["get"]


async def test_a_retried_create_adopts_the_job_instead_of_making_a_second(make_backend, fake):
    cfg = config()
    first = make_backend(cfg)
    await first.start(spec(cfg))
    again = make_backend(cfg)  # the service restarted before it recorded the first create
    launched = await again.start(spec(cfg))
    assert launched.ref == f"{NAMESPACE}/{JOB}"
    assert len(fake.list("jobs", NAMESPACE)) == 1
    assert ("create", "batch", "jobs") in fake.requests
    assert ("get", "batch", "jobs") in fake.requests


async def test_a_foreign_job_with_our_name_is_not_adopted(make_backend, fake):
    cfg = config()
    foreign = make_job(spec(cfg), cfg.storage, cfg.backend.kubernetes)
    foreign["metadata"]["labels"]["nbjobs.io/job-id"] = "someoneelse"
    fake.put("jobs", {**foreign, "status": {}}, "ADDED")
    backend = make_backend(cfg)
    with pytest.raises(RuntimeError, match="that nbjobs did not make exists"):
        await backend.start(spec(cfg))


async def test_no_node_fits_means_queued_with_what_it_waits_for(make_backend, fake):
    gpu_nodes(fake, count=2)
    backend = make_backend()
    busy = await backend.start(spec(config(), job_id="aaaaaaaaaaaa"))
    ref = (await backend.start(spec(config()))).ref
    fake.run_pod(
        fake.start_pod("nbjobs-aaaaaaaaaaaa", NAMESPACE, node="gpu-0")["metadata"]["name"],
        NAMESPACE,
    )
    # the second GPU node is taken by someone else's pod in the namespace
    fake.put(
        "pods",
        {
            "metadata": {"name": "other", "namespace": NAMESPACE},
            "spec": {
                "nodeName": "gpu-1",
                "containers": [{"name": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
            },
            "status": {"phase": "Running"},
        },
        "ADDED",
    )
    pod = fake.start_pod(JOB, NAMESPACE)["metadata"]["name"]
    fake.unschedulable(pod, NAMESPACE, "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.")
    seen = await eventually(lambda: (s := backend.seen(ref)) and s.waiting and s)
    assert seen.waiting == "waiting for 1 × nvidia.com/gpu on nodes with gpu=a100 (0 free)"  # noqa: RUF001
    assert backend.seen(busy.ref).node == "gpu-0"


async def test_without_a_view_of_nodes_the_schedulers_words_are_passed_on(make_backend, fake):
    fake.forbidden.add("nodes")
    backend = make_backend()
    ref = (await backend.start(spec(config()))).ref
    assert backend.queues_jobs_itself  # nbjobs cannot count GPUs: the cluster queues
    assert backend.free_for(config().flavor("a100")) == 0
    pod = fake.start_pod(JOB, NAMESPACE)["metadata"]["name"]
    fake.unschedulable(pod, NAMESPACE, "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.")
    seen = await eventually(lambda: (s := backend.seen(ref)) and s.waiting and s)
    assert seen.waiting == (
        "waiting for 1 × nvidia.com/gpu on nodes with gpu=a100: "  # noqa: RUF001
        "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
    )


@pytest.mark.parametrize(
    ("reason", "message", "expected"),
    [
        (
            "ImagePullBackOff",
            'Back-off pulling image "example.org/nbjobs:1"',
            "could not pull image example.org/nbjobs:1 (ImagePullBackOff: "
            'Back-off pulling image "example.org/nbjobs:1")',
        ),
        (
            "ErrImagePull",
            "manifest unknown",
            "could not pull image example.org/nbjobs:1 (ErrImagePull: manifest unknown)",
        ),
        (
            "CreateContainerConfigError",
            'secret "hf-token" not found',
            "the container could not be configured (CreateContainerConfigError: "
            'secret "hf-token" not found)',
        ),
    ],
)
async def test_an_image_that_cannot_be_pulled_fails_the_job_and_frees_the_cluster(
    make_backend, fake, reason, message, expected
):
    gpu_nodes(fake)
    backend = make_backend()
    ref = (await backend.start(spec(config()))).ref
    waiter = asyncio.ensure_future(backend.wait(ref))
    pod = fake.start_pod(JOB, NAMESPACE, node="gpu-0")["metadata"]["name"]
    fake.waiting(pod, NAMESPACE, reason, message)
    outcome = await asyncio.wait_for(waiter, 10)
    assert (outcome.state, outcome.message) == ("failed", expected)
    assert fake.get("jobs", NAMESPACE, JOB) is None  # deleted, it would wait forever
    assert ("delete", "batch", "jobs") in fake.requests


async def test_out_of_memory_says_so_with_the_limit(make_backend, fake):
    backend = make_backend()
    ref = (await backend.start(spec(config()))).ref
    pod = fake.start_pod(JOB, NAMESPACE, node="gpu-0")["metadata"]["name"]
    fake.run_pod(pod, NAMESPACE)
    fake.finish_pod(pod, NAMESPACE, exit_code=137, reason="OOMKilled")
    outcome = await asyncio.wait_for(backend.wait(ref), 10)
    assert (outcome.state, outcome.message) == ("failed", "out of memory (limit 16Gi)")
    assert outcome.exit_code == 137
    assert not outcome.disrupted  # the notebook's own doing: never re-queued


async def test_the_clusters_deadline_is_timed_out(make_backend, fake):
    backend = make_backend()
    ref = (await backend.start(spec(config()))).ref
    pod = fake.start_pod(JOB, NAMESPACE, node="gpu-0")["metadata"]["name"]
    fake.run_pod(pod, NAMESPACE)
    fake.job_condition(
        JOB, NAMESPACE, "Failed", "DeadlineExceeded", "Job was active longer than specified"
    )
    outcome = await asyncio.wait_for(backend.wait(ref), 10)
    assert outcome.state == "timed_out"
    assert outcome.message == "stopped by Kubernetes at its time limit (720 s)"


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        (
            {"disruption": ("PreemptionByScheduler", "Kueue preempted the workload")},
            "the job's pod was preempted by a higher-priority pod on node gpu-0 "
            "(PreemptionByScheduler: Kueue preempted the workload); re-run it",
        ),
        (
            {"disruption": ("EvictionByEvictionAPI", "Eviction API: evicting")},
            "the job's pod was evicted (the node is being drained or scaled down) on node "
            "gpu-0 (EvictionByEvictionAPI: Eviction API: evicting); re-run it",
        ),
        (
            {
                "pod_reason": "Evicted",
                "pod_message": "The node was low on resource: ephemeral-storage.",
            },
            "the job's pod was evicted from node gpu-0: The node was low on resource: "
            "ephemeral-storage.; re-run it",
        ),
    ],
)
@pytest.mark.parametrize("order", ["pod-kept", "pod-deleted-first"])
async def test_evicted_or_preempted_jobs_fail_with_the_reason(
    make_backend, fake, kwargs, expected, order
):
    """Also in the order real clusters show with pod-tracking finalizers: the pod's
    DELETED event before the Job's Failed condition (the reason was lost then)."""
    backend = make_backend()
    ref = (await backend.start(spec(config()))).ref
    pod = fake.start_pod(JOB, NAMESPACE, node="gpu-0")["metadata"]["name"]
    fake.run_pod(pod, NAMESPACE)
    fake.finish_pod(
        pod, NAMESPACE, exit_code=143, pod_deleted_first=order == "pod-deleted-first", **kwargs
    )
    outcome = await asyncio.wait_for(backend.wait(ref), 10)
    assert (outcome.state, outcome.message) == ("failed", expected)
    assert outcome.disrupted  # not the notebook's fault: a flavor may re-queue it


async def test_a_notebook_error_is_left_to_the_runners_status(make_backend, fake):
    backend = make_backend()
    ref = (await backend.start(spec(config()))).ref
    pod = fake.start_pod(JOB, NAMESPACE, node="gpu-0")["metadata"]["name"]
    fake.run_pod(pod, NAMESPACE)
    fake.finish_pod(pod, NAMESPACE, exit_code=1)
    outcome = await asyncio.wait_for(backend.wait(ref), 10)
    assert (outcome.exit_code, outcome.state, outcome.message) == (1, None, None)


@pytest.mark.parametrize("policy", ["Background", None])
async def test_a_job_deleted_behind_our_back_fails_and_leaves_nothing_running(
    make_backend, fake, policy
):
    backend = make_backend()
    ref = (await backend.start(spec(config()))).ref
    pod = fake.start_pod(JOB, NAMESPACE, node="gpu-0")["metadata"]["name"]
    fake.run_pod(pod, NAMESPACE)
    waiter = asyncio.ensure_future(backend.wait(ref))
    await eventually(lambda: backend.seen(ref) is not None)
    fake._delete("jobs", NAMESPACE, JOB, policy)  # kubectl delete job (or the API's orphan)
    outcome = await asyncio.wait_for(waiter, 10)
    assert outcome.state == "failed"
    assert "deleted outside nbjobs" in outcome.message
    await eventually(
        lambda: not fake.pods_of(JOB, NAMESPACE) and fake.get("pods", NAMESPACE, pod) is None
    )


async def test_cancel_deletes_the_job_in_the_background_and_waits_for_the_pod(make_backend, fake):
    backend = make_backend()
    ref = (await backend.start(spec(config()))).ref
    pod = fake.start_pod(JOB, NAMESPACE, node="gpu-0")["metadata"]["name"]
    fake.run_pod(pod, NAMESPACE)
    waiter = asyncio.ensure_future(backend.wait(ref))
    await eventually(lambda: backend.seen(ref) is not None)
    await backend.cancel(ref)
    outcome = await asyncio.wait_for(waiter, 10)
    assert (outcome.exit_code, outcome.state) == (None, None)  # the runner's status says
    assert fake.get("jobs", NAMESPACE, JOB) is None
    assert fake.get("pods", NAMESPACE, pod) is None
    deletes = [q for v, r, q in fake.queries if v == "delete" and r == "jobs"]
    assert deletes
    assert all(q.get("propagationPolicy") == "Background" for q in deletes)
    # the Job and its pod are gone; where it ran is still known for the job's record
    seen = backend.seen(ref)
    assert seen is not None
    assert seen.node == "gpu-0"
    backend.release(ref)
    assert backend.seen(ref) is None


async def test_free_gpus_come_from_allocatable_minus_requests_and_skip_drained_nodes(
    make_backend, fake
):
    fake.add_node("gpu-0", {"gpu": "a100"}, {"nvidia.com/gpu": "4"})
    fake.add_node("gpu-1", {"gpu": "a100"}, {"nvidia.com/gpu": "4"})
    fake.add_node("t4-0", {"gpu": "t4"}, {"nvidia.com/gpu": "2"})
    fake.add_node("gpu-2", {"gpu": "a100"}, {"nvidia.com/gpu": "4"}, unschedulable=True)
    cfg = config(drained_nodes=["gpu-1"])
    backend = make_backend(cfg)
    a100 = cfg.flavor("a100")
    await backend.reconcile(set())
    await eventually(lambda: backend.free_for(a100) == 4)  # gpu-0 only
    await backend.start(spec(cfg))
    assert backend.free_for(a100) == 3  # the Job made a moment ago counts before its pod
    fake.run_pod(fake.start_pod(JOB, NAMESPACE, node="gpu-0")["metadata"]["name"], NAMESPACE)
    await eventually(lambda: len(backend.mirror.pods) == 1)
    assert backend.free_for(a100) == 3
    fake.label_node("gpu-0", **{"nbjobs.io/drain": "true"})  # maintenance: no new work
    await eventually(lambda: backend.free_for(a100) == 0)
    assert backend.seen(f"{NAMESPACE}/{JOB}").node == "gpu-0"  # and who runs where

    assert backend.can_ever_fit(cfg.flavor("a100-8")) == (
        "flavor 'a100-8' needs 8 × nvidia.com/gpu on one node and no node it may use "  # noqa: RUF001
        "has more than 4; pick a smaller flavor"
    )
    assert backend.can_ever_fit(a100) is None


async def test_kueue_jobs_are_handed_over_at_once_and_wait_for_admission(make_backend, fake):
    cfg = config(kueue={"queue_name": "gpu-queue"})
    backend = make_backend(cfg)
    assert backend.queues_jobs_itself
    ref = (await backend.start(spec(cfg))).ref
    assert fake.get("jobs", NAMESPACE, JOB)["spec"]["suspend"] is True
    seen = await eventually(lambda: (s := backend.seen(ref)) and s.waiting and s)
    assert seen.waiting == "waiting for Kueue to admit it (queue gpu-queue)"
    fake.admit(JOB, NAMESPACE)
    fake.run_pod(fake.start_pod(JOB, NAMESPACE, node="gpu-0")["metadata"]["name"], NAMESPACE)
    await eventually(lambda: backend.seen(ref).node == "gpu-0")
    assert backend.seen(ref).waiting is None


async def test_after_a_restart_jobs_are_adopted_and_orphans_stopped(make_backend, fake):
    cfg = config()
    first = make_backend(cfg)
    for job_id in ["aaaaaaaaaaaa", "bbbbbbbbbbbb", "cccccccccccc"]:
        await first.start(spec(cfg, job_id=job_id))
        fake.run_pod(
            fake.start_pod(f"nbjobs-{job_id}", NAMESPACE, node="gpu-0")["metadata"]["name"],
            NAMESPACE,
        )
    # c finished long ago; a stray pod of a job nobody knows is left running
    fake.finish_pod(
        fake.pods_of("nbjobs-cccccccccccc", NAMESPACE)[0]["metadata"]["name"],
        NAMESPACE,
        exit_code=0,
    )
    stray = fake.start_pod("nbjobs-aaaaaaaaaaaa", NAMESPACE, node="gpu-0")
    stray["metadata"]["labels"]["nbjobs.io/job-id"] = "dddddddddddd"
    stray["metadata"]["labels"]["batch.kubernetes.io/job-name"] = "nbjobs-dddddddddddd"
    fake.put("pods", stray)
    await first.shutdown()

    second = make_backend(cfg)
    # the database: a still runs, b ended (its record says so), c and d are unknown
    await second.reconcile({"aaaaaaaaaaaa"})
    assert second.adopt(f"{NAMESPACE}/nbjobs-aaaaaaaaaaaa", [], cfg.flavor("a100"))
    assert not second.adopt(f"{NAMESPACE}/nbjobs-eeeeeeeeeeee", [], cfg.flavor("a100"))
    await eventually(lambda: fake.get("jobs", NAMESPACE, "nbjobs-bbbbbbbbbbbb") is None)
    assert fake.get("jobs", NAMESPACE, "nbjobs-aaaaaaaaaaaa") is not None
    assert fake.get("jobs", NAMESPACE, "nbjobs-cccccccccccc") is not None  # finished: TTL
    await eventually(lambda: fake.get("pods", NAMESPACE, stray["metadata"]["name"]) is None)
    assert [j["metadata"]["name"] for j in fake.list("jobs", NAMESPACE)] == [
        "nbjobs-aaaaaaaaaaaa",
        "nbjobs-cccccccccccc",
    ]


@pytest.mark.parametrize("http_410", [False, True])
async def test_a_watch_too_old_to_resume_lists_again_and_misses_nothing(
    make_backend, fake, http_410
):
    fake.fail_watch_with_http_410 = http_410
    backend = make_backend(watch_timeout=1)
    ref = (await backend.start(spec(config()))).ref
    await eventually(lambda: backend.seen(ref) is not None)
    # While the watch is between requests, history is compacted and the job finishes.
    fake.compact()
    pod = fake.start_pod(JOB, NAMESPACE, node="gpu-0")["metadata"]["name"]
    fake.compact()
    fake.finish_pod(pod, NAMESPACE, exit_code=0)
    fake.compact()
    outcome = await asyncio.wait_for(backend.wait(ref), 10)
    assert outcome.exit_code == 0
    lists = [q for v, r, q in fake.queries if v == "list" and r == "jobs"]
    assert len(lists) >= 1
    watches = [q for v, r, q in fake.queries if v == "watch" and r == "jobs"]
    assert all(q.get("allowWatchBookmarks") in ("true", "True") for q in watches)


async def test_bookmarks_move_a_quiet_watch_forward(make_backend, fake):
    backend = make_backend(watch_timeout=1)
    await backend.start(spec(config()))
    for i in range(5):  # changes elsewhere move the cluster's resourceVersion on
        fake.add_node(f"n-{i}")
    moved = fake.resource_version
    await eventually(lambda: any(b >= moved for b in fake.bookmarks))  # a bookmark arrives
    await asyncio.sleep(0.05)
    fake.compact()  # without the bookmark, the watch would have to list again
    await eventually(
        lambda: [
            q
            for v, r, q in fake.queries
            if v == "watch" and r == "jobs" and int(q.get("resourceVersion") or 0) >= moved
        ],
        timeout=5,
    )
    lists = [q for v, r, q in fake.queries if v == "list" and r == "jobs"]
    assert len(lists) == 1


@pytest.mark.parametrize(
    "failure",
    [
        (500, True),  # etcd timed out after the write: the Job exists, the client was told 500
        (503, False),  # an API server restarting
        (429, False),  # API priority and fairness: too many requests
    ],
)
async def test_a_create_the_server_failed_is_tried_again_and_makes_one_job(
    make_backend, fake, failure
):
    fake.fail_creates = [failure]
    backend = make_backend()
    launched = await backend.start(spec(config()))
    assert launched.ref == f"{NAMESPACE}/{JOB}"
    assert [j["metadata"]["name"] for j in fake.list("jobs", NAMESPACE)] == [JOB]
    assert [v for v, _, r in fake.requests if r == "jobs" and v == "create"] == ["create"] * 2


async def test_a_create_the_server_refuses_is_not_tried_again_and_says_why(make_backend, fake):
    fake.fail_creates = [(422, False)]
    backend = make_backend()
    with pytest.raises(KubeError, match="422 Invalid"):
        await backend.start(spec(config()))
    assert [v for v, _, r in fake.requests if r == "jobs" and v == "create"] == ["create"]
    assert fake.list("jobs", NAMESPACE) == []


async def test_a_second_nbjobs_on_the_namespace_leaves_the_first_ones_jobs_alone(
    make_backend, fake, caplog
):
    """Two services, each with a database of its own, on one jobs' namespace (a staging
    copy, a second hub): each stops only what it made itself."""
    fake.add_node("gpu-0", {"gpu": "a100"}, {"nvidia.com/gpu": "8"})
    cfg = config()
    first = make_backend(cfg)
    first.instance = "first0000001"
    for job_id in ("aaaaaaaaaaaa", "bbbbbbbbbbbb"):
        await first.start(spec(cfg, job_id=job_id))
    made = fake.get("jobs", NAMESPACE, "nbjobs-aaaaaaaaaaaa")
    assert made["metadata"]["labels"]["nbjobs.io/instance"] == "first0000001"
    pod_labels = made["spec"]["template"]["metadata"]["labels"]
    assert pod_labels["nbjobs.io/instance"] == "first0000001"
    # one from before instance ids, unlabelled, that the second's database runs
    await first.start(spec(cfg, job_id="eeeeeeeeeeee"))
    old = fake.get("jobs", NAMESPACE, "nbjobs-eeeeeeeeeeee")
    del old["metadata"]["labels"]["nbjobs.io/instance"]
    fake.put("jobs", old)
    await first.shutdown()

    second = make_backend(cfg)
    second.instance = "second000002"
    await second.reconcile(set())
    await second.start(spec(cfg, job_id="cccccccccccc"))
    await eventually(lambda: "nbjobs-cccccccccccc" in second.mirror.jobs)
    # at its next start the second's database holds c ended, and runs e
    third = make_backend(cfg)
    third.instance = "second000002"
    caplog.clear()
    await third.reconcile({"eeeeeeeeeeee"})

    await eventually(lambda: fake.get("jobs", NAMESPACE, "nbjobs-cccccccccccc") is None)
    assert fake.get("jobs", NAMESPACE, "nbjobs-aaaaaaaaaaaa") is not None
    assert fake.get("jobs", NAMESPACE, "nbjobs-bbbbbbbbbbbb") is not None
    assert fake.get("jobs", NAMESPACE, "nbjobs-eeeeeeeeeeee") is not None
    deleted = [q for v, r, q in fake.queries if v == "delete" and r == "jobs"]
    assert len(deleted) == 1
    [said] = [r.getMessage() for r in caplog.records if "another nbjobs" in r.getMessage()]
    assert said.startswith(f"2 Job(s) in namespace {NAMESPACE} were made by another nbjobs")
    assert "nbjobs-aaaaaaaaaaaa, nbjobs-bbbbbbbbbbbb" in said

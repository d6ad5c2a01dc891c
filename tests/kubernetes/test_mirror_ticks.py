"""Who the cluster's copy wakes: a Job's follower at a change of its Job or its pods, not
at every change of any other (200 followers each woke at each of a burst's changes), and
every follower at a change that may concern all (a node, a new list)."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

from nbjobs.job_service.backends.kubernetes_mirror import ClusterMirror, Reads


def mirror() -> ClusterMirror:
    reads = Reads(
        watch_timeout=30,
        retry_delay=0.1,
        connect_timeout=5,
        events_interval=0,
        jobsets=False,
        kueue_gpus=None,
    )
    api: Any = SimpleNamespace(namespace="nbjobs-jobs")
    return ClusterMirror(api, reads, logging.getLogger("test"))


def job(name: str) -> dict:
    return {"metadata": {"name": name, "labels": {"nbjobs.io/job": name}}}


def pod(name: str, of: str) -> dict:
    return {"metadata": {"name": name, "labels": {"batch.kubernetes.io/job-name": of}}}


async def test_a_change_of_one_job_or_its_pods_wakes_its_follower_alone():
    copy = mirror()
    a, b = copy.job_tick("nbjobs-a"), copy.job_tick("nbjobs-b")
    everyone = copy.tick

    copy._object_changed("pods", pod("nbjobs-b-x1", of="nbjobs-b"))
    assert b.is_set()
    assert not a.is_set()
    assert everyone.is_set()  # whoever waits on any change (the dispatcher) is woken

    b = copy.job_tick("nbjobs-b")
    assert not b.is_set()  # a new one for the next change
    copy._object_changed("jobs", job("nbjobs-a"))
    assert a.is_set()
    assert not b.is_set()


async def test_a_node_or_the_backend_s_own_change_wakes_every_follower():
    copy = mirror()
    a, b = copy.job_tick("nbjobs-a"), copy.job_tick("nbjobs-b")
    copy._object_changed("nodes", {"metadata": {"name": "gpu-1"}})
    assert a.is_set()
    assert b.is_set()

    a, b = copy.job_tick("nbjobs-a"), copy.job_tick("nbjobs-b")
    copy.changed()  # a cancel, a new list, an engine's words
    assert a.is_set()
    assert b.is_set()

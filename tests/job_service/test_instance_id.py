"""The database's instance id: what a service marks its Kubernetes objects with, so that
it stops only its own (tests/kubernetes/test_backend.py: two services on one namespace)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from nbjobs.job_service.db import connect, instance_id


def test_one_database_keeps_one_id_and_another_has_its_own(tmp_path):
    url = f"sqlite:///{tmp_path / 'jobs.sqlite'}"
    first = instance_id(connect(url))
    assert len(first) == 12
    assert instance_id(connect(url)) == first  # a restart: the same id
    assert instance_id(connect(f"sqlite:///{tmp_path / 'other.sqlite'}")) != first


def test_services_starting_at_once_on_a_new_database_agree(tmp_path):
    sessions = connect(f"sqlite:///{tmp_path / 'jobs.sqlite'}")
    with ThreadPoolExecutor(8) as pool:
        ids = set(pool.map(lambda _: instance_id(sessions), range(8)))
    assert len(ids) == 1

"""The jobs' NetworkPolicy on a cluster: written at the service's start as nbjobs.yaml's
network.jobs says (validated by the fake API server against Kubernetes' schema), put
back when edited, replaced when the rules change, removed when they go, and a start
refused with a sentence when the rules cannot be written."""

from __future__ import annotations

import copy

import pytest

from nbjobs.config import NbjobsConfig, NetworkConfig
from nbjobs.network import JOBS_POLICY, jobs_policy

from .conftest import NAMESPACE, config


def with_rules(**jobs: object) -> NbjobsConfig:
    return config().model_copy(update={"network": NetworkConfig.model_validate({"jobs": jobs})})


async def test_the_policy_follows_nbjobs_yaml_across_starts(make_backend, fake):
    rules = with_rules(egress=[{"cidr": "10.20.0.0/16", "ports": [443]}])
    await make_backend(rules).reconcile(set())
    written = fake.get("networkpolicies", NAMESPACE, JOBS_POLICY)
    assert written is not None
    assert written["spec"] == jobs_policy(rules)["spec"]
    assert written["spec"]["egress"][0] == {
        "to": [{"ipBlock": {"cidr": "10.20.0.0/16"}}],
        "ports": [{"protocol": "TCP", "port": 443}],
    }

    # edited by hand to let jobs out: the next start puts nbjobs.yaml's rules back
    opened = copy.deepcopy(written)
    opened["spec"]["egress"].append({"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]})
    fake.put("networkpolicies", opened)
    await make_backend(rules).reconcile(set())
    assert fake.get("networkpolicies", NAMESPACE, JOBS_POLICY)["spec"] == written["spec"]

    # new rules replace the old ones
    narrower = with_rules(egress=[{"cidr": "10.20.1.0/24"}], dns=False)
    await make_backend(narrower).reconcile(set())
    replaced = fake.get("networkpolicies", NAMESPACE, JOBS_POLICY)
    assert replaced["spec"]["egress"] == [{"to": [{"ipBlock": {"cidr": "10.20.1.0/24"}}]}]

    # no rules any more: nbjobs' policy goes, and jobs reach what the cluster allows
    await make_backend(config()).reconcile(set())
    assert fake.get("networkpolicies", NAMESPACE, JOBS_POLICY) is None


async def test_a_policy_of_that_name_nbjobs_did_not_make_is_left_alone(make_backend, fake):
    theirs = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": JOBS_POLICY, "namespace": NAMESPACE, "uid": "u"},
        "spec": {"podSelector": {}, "policyTypes": ["Egress"], "egress": []},
    }
    fake.put("networkpolicies", theirs, "ADDED")
    await make_backend(config()).reconcile(set())
    assert fake.get("networkpolicies", NAMESPACE, JOBS_POLICY) is not None


async def test_rules_the_service_may_not_write_stop_its_start_with_what_to_do(make_backend, fake):
    fake.forbidden.add("networkpolicies")
    with pytest.raises(RuntimeError) as refused:
        await make_backend(with_rules(egress=[])).reconcile(set())
    text = str(refused.value)
    assert f"NetworkPolicy {JOBS_POLICY} in namespace 'gpu-jobs' cannot be written" in text
    assert "403" in text
    assert "networkpolicies (get, create, update, delete)" in text
    # with no rules, a Role without networkpolicies is fine
    await make_backend(config()).reconcile(set())

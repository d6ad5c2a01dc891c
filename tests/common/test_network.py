"""nbjobs.yaml's network allow-lists: what is accepted or refused with a sentence, the
NetworkPolicies written for jobs and notebook servers (validated against Kubernetes'
own schema), and how the client's address is read behind proxies."""

from __future__ import annotations

import ipaddress

import kubernetes_validate
import pytest
import yaml

from nbjobs.config import ConfigError, parse_config
from nbjobs.network import client_address, jobs_policy, servers_policy

CLUSTER = """
backend:
  kind: kubernetes
  kubernetes: {namespace: gpu-jobs}
storage:
  volume: {nfs: {server: nfs.example.org, path: /export/home}}
"""
RULES = """
network:
  jobs:
    egress:
      - cidr: 10.20.0.0/16
        ports: [443, 5000]
      - cidr: 0.0.0.0/0
        except: [169.254.169.254/32, 10.0.0.0/8]
        ports: [443]
      - cidr: 2001:db8::/32
  servers:
    egress:
      - cidr: 10.30.0.0/16
    dns: false
"""


def test_the_jobs_policy_allows_what_nbjobs_yaml_lists_and_dns():
    config = parse_config(CLUSTER + RULES)
    policy = jobs_policy(config)
    assert policy is not None
    kubernetes_validate.validate(policy, "1.37.0", strict=True)
    assert policy["metadata"]["namespace"] == "gpu-jobs"
    spec = policy["spec"]
    assert spec["policyTypes"] == ["Egress"]
    # every pod of a job, whatever its flavor or owner
    assert spec["podSelector"] == {
        "matchExpressions": [{"key": "nbjobs.io/job-id", "operator": "Exists"}]
    }
    blocks = [(e["to"][0].get("ipBlock"), e.get("ports")) for e in spec["egress"]]
    assert blocks[0] == (
        {"cidr": "10.20.0.0/16"},
        [{"protocol": "TCP", "port": 443}, {"protocol": "TCP", "port": 5000}],
    )
    assert blocks[1][0] == {"cidr": "0.0.0.0/0", "except": ["169.254.169.254/32", "10.0.0.0/8"]}
    assert blocks[2] == ({"cidr": "2001:db8::/32"}, None)  # every port
    dns = spec["egress"][3]
    assert dns["to"][0]["podSelector"] == {"matchLabels": {"k8s-app": "kube-dns"}}
    assert {p["port"] for p in dns["ports"]} == {53}


def test_the_servers_policy_keeps_the_hub_and_its_proxy_reachable():
    config = parse_config(CLUSTER + RULES)
    policy = servers_policy(config, "nbjobs")
    assert policy is not None
    kubernetes_validate.validate(policy, "1.37.0", strict=True)
    spec = policy["spec"]
    assert spec["podSelector"] == {"matchLabels": {"component": "singleuser-server"}}
    hub = spec["egress"][0]["to"][0]["podSelector"]["matchExpressions"][0]
    assert (hub["key"], hub["values"]) == ("component", ["hub", "proxy"])
    assert spec["egress"][1:] == [{"to": [{"ipBlock": {"cidr": "10.30.0.0/16"}}]}]  # no DNS


def test_no_rules_no_policy_and_an_empty_list_allows_only_dns():
    assert jobs_policy(parse_config(CLUSTER)) is None
    assert servers_policy(parse_config(CLUSTER), "nbjobs") is None
    closed = jobs_policy(parse_config(CLUSTER + "network: {jobs: {egress: [], dns: false}}"))
    assert closed is not None
    assert closed["spec"]["egress"] == []  # nothing at all
    kubernetes_validate.validate(closed, "1.37.0", strict=True)


@pytest.mark.parametrize(
    ("rules", "said"),
    [
        ("network: {jobs: {egress: [{cidr: 10.0.0.1/8}]}}", "has host bits set"),
        ("network: {jobs: {egress: [{cidr: 10.0.0.0/8, except: [11.0.0.0/16]}]}}", "not inside"),
        ("network: {jobs: {egress: [{cidr: 10.0.0.0/8, ports: [70000]}]}}", "is not a port"),
        ("network: {jobs: {egress: [{cidr: school}]}}", "is not a network like"),
        ("network: {sign_in: {allow: [everywhere]}}", "is not a network like"),
        ("network: {jobs: {egress: [{cidr: 10.0.0.0/8, protocol: ICMP}]}}", "protocol"),
    ],
)
def test_a_bad_rule_is_refused_with_its_line_and_what_is_wrong(rules, said):
    with pytest.raises(ConfigError) as refused:
        parse_config(CLUSTER + rules)
    assert said in str(refused.value)
    assert "line" in str(refused.value)


def test_egress_rules_on_one_machine_are_refused_as_unenforceable():
    with pytest.raises(ConfigError) as refused:
        parse_config("network: {servers: {egress: [{cidr: 10.0.0.0/8}]}}")
    text = str(refused.value)
    assert "network.servers.egress" in text
    assert "cannot enforce egress rules for servers on one machine" in text
    # sign-in rules work there (the hub checks them)
    config = parse_config("network: {sign_in: {allow: [10.0.0.0/8]}}")
    assert config.network.sign_in.allow == ["10.0.0.0/8"]


TRUSTED = [ipaddress.ip_network("127.0.0.1/32"), ipaddress.ip_network("10.1.0.0/16")]


@pytest.mark.parametrize(
    ("peer", "forwarded", "client"),
    [
        # straight from the client: its own address, whatever it writes
        ("203.0.113.5", ["10.9.9.9"], "203.0.113.5"),
        # through the hub's proxy: the address the proxy saw
        ("127.0.0.1", ["203.0.113.5"], "203.0.113.5"),
        # a forged entry is left of what the proxy added: never reached
        ("127.0.0.1", ["10.9.9.9, 203.0.113.5"], "203.0.113.5"),
        # a load balancer (trusted) in front of the proxy (trusted)
        ("127.0.0.1", ["203.0.113.5", "10.1.2.3"], "203.0.113.5"),
        # a proxy that says nothing: the proxy itself
        ("127.0.0.1", [], "127.0.0.1"),
    ],
)
def test_the_client_address_is_read_back_through_trusted_proxies_only(peer, forwarded, client):
    assert client_address(peer, forwarded, TRUSTED) == client


def test_the_command_prints_both_policies_for_kubectl(tmp_path, capsys):
    from nbjobs.cli import main

    path = tmp_path / "nbjobs.yaml"
    path.write_text(CLUSTER + RULES)
    assert main(["network-policies", "--config", str(path), "--servers-namespace", "hub"]) == 0
    printed = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [(p["metadata"]["name"], p["metadata"]["namespace"]) for p in printed] == [
        ("nbjobs-servers-egress", "hub"),
        ("nbjobs-jobs-egress", "gpu-jobs"),
    ]
    for policy in printed:
        kubernetes_validate.validate(policy, "1.37.0", strict=True)
    # a file with a bad rule: the reason, and exit code 2
    path.write_text(CLUSTER + "network: {jobs: {egress: [{cidr: 10.0.0.1/8}]}}")
    assert main(["network-policies", "--config", str(path)]) == 2
    assert "has host bits set" in capsys.readouterr().err


def test_with_a_multi_node_flavor_job_pods_may_reach_job_pods_and_nothing_more():
    """Ranks meet at rank 0 (and NCCL opens ports of its own): under egress rules the
    jobs' pods may reach the jobs' pods, not the rest of the cluster."""
    closed = "network: {jobs: {egress: [], dns: false}}\n"
    single = jobs_policy(parse_config(CLUSTER + closed))
    assert single is not None
    assert single["spec"]["egress"] == []
    pair = "flavors: [{name: pair, gpus: 1, nodes: 2}]\n"
    policy = jobs_policy(parse_config(CLUSTER + closed + pair))
    assert policy is not None
    kubernetes_validate.validate(policy, "1.37.0", strict=True)
    [rule] = policy["spec"]["egress"]
    assert rule == {"to": [{"podSelector": policy["spec"]["podSelector"]}]}
    assert rule["to"][0]["podSelector"]["matchExpressions"][0]["key"] == "nbjobs.io/job-id"

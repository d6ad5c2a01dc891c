"""Network allow-lists (nbjobs.yaml ``network``): where jobs and notebook servers may
connect to, as Kubernetes NetworkPolicies, and where people may sign in from.

A NetworkPolicy is an allow-list only: once one selects a pod, the pod may open the
connections some policy selecting it allows, and no other. The cluster's network plugin
enforces them (Calico, Cilium; not every plugin does). nbjobs writes one policy for the
pods of GPU jobs (the job service keeps it in the jobs' namespace as nbjobs.yaml says,
at each start) and prints one for the notebook servers (``nbjobs network-policies``),
which also lets them reach the hub and its proxy.

Sign-in is checked by the hub at each login (:func:`sign_in_hook`): the client's address,
read from the proxies' ``X-Forwarded-For`` as far back as the proxies are trusted, must
be inside one of ``network.sign_in.allow``.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import yaml

from .config import ConfigError, NbjobsConfig, PodNetwork, command_config_path, load_config

#: the names of the policies nbjobs writes
JOBS_POLICY = "nbjobs-jobs-egress"
SERVERS_POLICY = "nbjobs-servers-egress"
#: what marks a policy as nbjobs' own
MANAGED_BY = {"app.kubernetes.io/managed-by": "nbjobs"}
#: the label every pod of an nbjobs job has (job_service/backends/kubernetes_objects.py)
JOB_POD_LABEL = "nbjobs.io/job-id"
#: the labels zero-to-jupyterhub gives notebook servers, the hub and its proxy
SERVER_LABELS = {"component": "singleuser-server"}
HUB_AND_PROXY = {"key": "component", "operator": "In", "values": ["hub", "proxy"]}
#: the cluster's DNS: kube-dns (or CoreDNS under that label) in kube-system
CLUSTER_DNS = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
    "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
}

log = logging.getLogger("nbjobs.network")


def _egress(rules: PodNetwork) -> list[dict[str, Any]]:
    """The ``egress`` of a policy from nbjobs.yaml's rules."""
    egress: list[dict[str, Any]] = []
    for rule in rules.egress or []:
        block: dict[str, Any] = {"cidr": rule.cidr}
        if rule.except_:
            block["except"] = list(rule.except_)
        entry: dict[str, Any] = {"to": [{"ipBlock": block}]}
        if rule.ports:
            entry["ports"] = [{"protocol": rule.protocol, "port": port} for port in rule.ports]
        egress.append(entry)
    if rules.dns:
        egress.append(
            {
                "to": [CLUSTER_DNS],
                "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
            }
        )
    return egress


def _policy(name: str, namespace: str, selector: dict[str, Any], egress: list[Any]) -> dict:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(MANAGED_BY)},
        "spec": {"podSelector": selector, "policyTypes": ["Egress"], "egress": egress},
    }


def jobs_policy(config: NbjobsConfig) -> dict[str, Any] | None:
    """The NetworkPolicy of the jobs' pods (in the jobs' namespace); None: no rules.

    With a multi-node flavor, job pods may also reach job pods (its ranks meet at rank 0
    and NCCL opens ports of its own): a policy cannot say "a pod of the same job" only,
    and this opens nothing the policy closed before, as it rules the pods' egress only
    (any pod may reach a job pod)."""
    rules = config.network.jobs
    if rules.egress is None:
        return None
    selector = {"matchExpressions": [{"key": JOB_POD_LABEL, "operator": "Exists"}]}
    egress = _egress(rules)
    if any(flavor.nodes > 1 for flavor in config.flavors):
        egress.append({"to": [{"podSelector": selector}]})
    return _policy(JOBS_POLICY, config.backend.kubernetes.namespace, selector, egress)


def servers_policy(config: NbjobsConfig, namespace: str) -> dict[str, Any] | None:
    """The NetworkPolicy of the notebook servers (in the hub's ``namespace``); None: no
    rules. They may always reach the hub and its proxy (the API, the job service)."""
    rules = config.network.servers
    if rules.egress is None:
        return None
    egress = [{"to": [{"podSelector": {"matchExpressions": [HUB_AND_PROXY]}}]}, *_egress(rules)]
    return _policy(SERVERS_POLICY, namespace, {"matchLabels": dict(SERVER_LABELS)}, egress)


# -- sign-in ---------------------------------------------------------------------------


def _networks(values: Iterable[str]) -> list[Any]:
    return [ipaddress.ip_network(v) for v in values]


def _inside(address: str, networks: Sequence[Any]) -> bool:
    try:
        ip = ipaddress.ip_address(address.strip().split("%")[0])
    except ValueError:
        return False
    if ip.version == 6 and ip.ipv4_mapped is not None:  # ::ffff:10.0.0.1 is 10.0.0.1
        ip = ip.ipv4_mapped
    return any(ip.version == n.version and ip in n for n in networks)


def client_address(peer: str, forwarded_for: Sequence[str], trusted: Sequence[Any]) -> str:
    """The client's address: the connection's peer, or, while the peer is a trusted
    proxy, the address that proxy says it was connected from (``X-Forwarded-For`` read
    from its end: each proxy adds the address it saw last; what a client writes there
    itself is further left and never reached unless its own proxy is trusted)."""
    hops = [hop.strip() for line in forwarded_for for hop in line.split(",") if hop.strip()]
    address = peer
    while _inside(address, trusted) and hops:
        address = hops.pop()
    return address


class SignInCheck:
    """The hub's post-authentication hook (``Authenticator.post_auth_hook``): a login
    from outside ``network.sign_in.allow`` is refused with a page that says so."""

    def __init__(self, config: NbjobsConfig) -> None:
        self.allow = _networks(config.network.sign_in.allow)
        self.trusted = _networks(config.network.sign_in.trusted_proxies)
        self.shown = ", ".join(config.network.sign_in.allow)

    def address_of(self, handler: Any) -> str:
        request = handler.request
        # the connection's own peer: tornado replaces remote_ip with X-Real-Ip or the
        # last X-Forwarded-For when it trusts headers (JupyterHub does), and a client
        # may send X-Real-Ip itself
        peer = getattr(request.connection.context, "_orig_remote_ip", None) or request.remote_ip
        return client_address(peer, request.headers.get_list("X-Forwarded-For"), self.trusted)

    def __call__(self, authenticator: Any, handler: Any, authentication: Any) -> Any:
        if not self.allow or authentication is None:
            return authentication
        address = self.address_of(handler)
        if _inside(address, self.allow):
            return authentication
        name = authentication.get("name") if isinstance(authentication, dict) else None
        log.warning("nbjobs: refused the sign-in of %s from %s", name, address)
        from tornado import web

        raise web.HTTPError(
            403,
            "%s",
            f"Signing in from {address} is not allowed: this hub lets people sign in from "
            f"{self.shown} only. Connect from there (the school's network, or its VPN) and "
            "sign in again.",
        )


# -- nbjobs network-policies -----------------------------------------------------------


def policies_parser() -> argparse.ArgumentParser:
    """The argument parser of ``nbjobs network-policies``."""
    parser = argparse.ArgumentParser(
        prog="nbjobs network-policies",
        description="Print the NetworkPolicies nbjobs.yaml's network section makes, for "
        "kubectl apply -f -: the notebook servers' (in the hub's namespace: apply it "
        "yourself) and the jobs' (the job service keeps that one at each start). Exit "
        "codes: 0 printed (nothing when no rules are set), 2 a bad nbjobs.yaml.",
    )
    parser.add_argument(
        "--config", help="the nbjobs.yaml (default: $NBJOBS_CONFIG, else nbjobs.yaml here)"
    )
    parser.add_argument(
        "--servers-namespace",
        default="nbjobs",
        help="the namespace of the hub and its notebook servers (default: nbjobs)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = policies_parser().parse_args(list(argv) if argv is not None else None)
    path = command_config_path(args.config)
    try:
        config = load_config(path)
    except ConfigError as exc:
        print(f"nbjobs network-policies: {exc}", file=sys.stderr)
        return 2
    found = [p for p in (servers_policy(config, args.servers_namespace), jobs_policy(config)) if p]
    if not found:
        print(
            f"nbjobs network-policies: {path} sets no egress rules (network.servers.egress, "
            "network.jobs.egress): pods reach what the cluster allows",
            file=sys.stderr,
        )
    print(yaml.safe_dump_all(found, sort_keys=False), end="")
    return 0

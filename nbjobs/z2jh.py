"""``nbjobs z2jh-values``: the zero-to-jupyterhub values that hand a hub to an nbjobs
release of the Helm chart (charts/nbjobs), made from the same values the release was
installed with, so that the two charts fit without an edit by hand.

What they add to a plain z2jh install: the hub image with nbjobs, nbjobs.yaml from the
release's ConfigMap, the job service as an external service whose token comes from the
release's Secret (never written in values), the CPU-only spawner and roles
(``nbjobs.hub_config.configure``), notebook pods without Kubernetes credentials, the
proxy's way to the job service's pods, with the release's ServiceMonitor the token
Prometheus reads metrics with, and with nbjobs.yaml's ``network.servers`` rules the
notebook pods' NetworkPolicy (z2jh's own, its allow-rules off, nbjobs' in their place).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from .chart import CHART, ChartValues, release_values
from .network import servers_policy

#: the hub's name for the job service (hub_config/setup.py SERVICE_NAME); the chart's too
SERVICE_NAME = "nbjobs"
#: z2jh's switches of predefined egress on its notebook pods' NetworkPolicy
Z2JH_EGRESS_ALLOW_RULES = (
    "cloudMetadataServer",
    "dnsPortsCloudMetadataServer",
    "dnsPortsKubeSystemNamespace",
    "dnsPortsPrivateIPs",
    "nonPrivateIPs",
    "privateIPs",
)


def z2jh_values(values: ChartValues, release: str, namespace: str, app_version: str) -> dict:
    """z2jh's values for a release ``release`` in ``namespace`` installed with ``values``."""
    return {
        "hub": _hub(values, release, namespace, app_version),
        "singleuser": _singleuser(values, namespace),
        "proxy": _proxy(values, release),
    }


def _hub(values: ChartValues, release: str, namespace: str, app_version: str) -> dict:
    """The hub's part: the image, nbjobs.yaml mounted, the job service as an external
    service with the release's token, and nbjobs' configuration of the hub."""
    name = release[:40].rstrip("-")  # the chart's nbjobs.fullname
    token_secret = values.hub.existingTokenSecret or f"{name}-service-token"
    service = f"http://{name}-job-service.{namespace}.svc:{values.jobService.port}"
    env: dict[str, Any] = {
        "NBJOBS_CONFIG": "/etc/nbjobs/nbjobs.yaml",
        # the job service's own Deployment; the hub routes /services/nbjobs/ to it
        "NBJOBS_SERVICE_URL_EXTERNAL": service,
        "NBJOBS_SERVICE_API_TOKEN": {
            "valueFrom": {"secretKeyRef": {"name": token_secret, "key": "token"}}
        },
        # notebook pods reach the service through the hub's proxy, with their user's token
        # ({base_url} is filled in when each server is spawned)
        "NBJOBS_PUBLIC_SERVICE_URL": f"http://proxy-public{{base_url}}services/{SERVICE_NAME}/",
    }
    extra_config = "from nbjobs.hub_config import configure\nconfigure(c)\n"
    if values.metrics.serviceMonitor.enabled:
        env["NBJOBS_METRICS_TOKEN"] = {
            "valueFrom": {"secretKeyRef": {"name": f"{name}-metrics-token", "key": "token"}}
        }
        extra_config += METRICS_SERVICE
    hub: dict[str, Any] = {
        "image": {"name": values.image.repository, "tag": values.image.tag or app_version},
        "extraEnv": env,
        "extraVolumes": [{"name": "nbjobs-config", "configMap": {"name": f"{name}-config"}}],
        "extraVolumeMounts": [
            {"name": "nbjobs-config", "mountPath": "/etc/nbjobs", "readOnly": True}
        ],
        "extraConfig": {"nbjobs": extra_config},
    }
    if values.hub.baseUrl != "/":
        hub["baseUrl"] = values.hub.baseUrl
    return hub


#: the hub's extra config for the release's ServiceMonitor: Prometheus' token, which
#: reads metrics and nothing else
METRICS_SERVICE = (
    "# Prometheus (the release's ServiceMonitor) reads metrics with this token only\n"
    "import os\n"
    'c.JupyterHub.custom_scopes["custom:nbjobs:metrics"] = '
    '{"description": "Read nbjobs\' metrics."}\n'
    "c.JupyterHub.services.append(\n"
    '    {"name": "nbjobs-metrics", "api_token": os.environ["NBJOBS_METRICS_TOKEN"]}\n'
    ")\n"
    "c.JupyterHub.load_roles.append(\n"
    '    {"name": "nbjobs-metrics", "services": ["nbjobs-metrics"],\n'
    '     "scopes": ["custom:nbjobs:metrics"]}\n'
    ")\n"
)


def _singleuser(values: ChartValues, namespace: str) -> dict:
    """The notebook pods' part: no Kubernetes credentials, no storage of z2jh's (the
    spawner mounts the user's folder itself), and nbjobs.yaml's network.servers rules."""
    singleuser: dict[str, Any] = {
        "serviceAccountName": None,
        "extraPodConfig": {"automountServiceAccountToken": False},
        "storage": {"type": "none"},
    }
    servers = servers_policy(values.config, namespace)
    if servers is not None:
        # nbjobs.yaml's network.servers as z2jh's own policy of the notebook pods: its
        # allow-rules off (a policy only ever allows: any that let the internet in would
        # count), nbjobs' rules in their place
        singleuser["networkPolicy"] = {
            "enabled": True,
            "egressAllowRules": dict.fromkeys(Z2JH_EGRESS_ALLOW_RULES, False),
            "egress": servers["spec"]["egress"],
        }
    return singleuser


def _proxy(values: ChartValues, release: str) -> dict:
    """The proxy's part: its way to the job service's pods (some network plugins apply
    no address rule to pod addresses, so the pods are named by their labels)."""
    pods = {
        "app.kubernetes.io/name": "nbjobs",
        "app.kubernetes.io/instance": release,
        "app.kubernetes.io/component": "job-service",
    }
    egress = [
        {
            "to": [{"podSelector": {"matchLabels": pods}}],
            "ports": [{"port": values.jobService.port}],
        }
    ]
    return {"chp": {"networkPolicy": {"egress": egress}}}


class _Dumper(yaml.SafeDumper):
    """YAML as a person writes it: a text of several lines (the hub's extra config) as a
    block, not one quoted line."""


def _text(dumper: yaml.SafeDumper, text: str) -> yaml.Node:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _text)


def z2jh_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nbjobs z2jh-values",
        description="Print the zero-to-jupyterhub values that hand the hub to a release of "
        "nbjobs' Helm chart; give the same values files the release was installed with. "
        "Add the output to z2jh's values (helm upgrade ... -f it).",
    )
    parser.add_argument("--release", required=True, help="the nbjobs release's name")
    parser.add_argument(
        "--namespace", "-n", default="nbjobs", help="its namespace, the hub's (default: nbjobs)"
    )
    parser.add_argument(
        "-f",
        "--values",
        action="append",
        type=Path,
        default=[],
        help="a values file the release was installed with (repeat, in the same order)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = z2jh_parser().parse_args(list(argv) if argv is not None else None)
    try:
        merged = release_values(args.values)
        values = ChartValues.model_validate(merged)
    except OSError as exc:
        print(f"nbjobs z2jh-values: cannot read {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    except (yaml.YAMLError, ValidationError) as exc:
        print(f"nbjobs z2jh-values: the values are not the chart's: {exc}", file=sys.stderr)
        return 2
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    print(
        f"# zero-to-jupyterhub values for the nbjobs release {args.release!r} "
        f"(namespace {args.namespace}); made by nbjobs z2jh-values"
    )
    made = z2jh_values(values, args.release, args.namespace, str(chart["appVersion"]))
    print(yaml.dump(made, Dumper=_Dumper, sort_keys=False), end="")
    return 0

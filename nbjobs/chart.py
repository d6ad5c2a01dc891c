"""The Helm chart's values (``charts/nbjobs``), as one model: the chart's
``values.schema.json`` is generated from it (``scripts/update_schema.py``), and
``nbjobs z2jh-values`` reads a release's values with it.

The chart's ``values.yaml`` holds the defaults; Helm merges the admin's files over it and
checks the result against the schema, so every key here is required and none has a
default of its own: a key that is not the chart's fails ``helm install`` with its name.
``config`` is nbjobs.yaml itself, checked against its own schema.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from .config import NbjobsConfig

#: the chart: inside the package in a wheel (nbjobs/charts), beside it in a checkout
CHART = next(
    (
        where / "charts" / "nbjobs"
        for where in (Path(__file__).resolve().parent, Path(__file__).resolve().parent.parent)
        if (where / "charts" / "nbjobs" / "Chart.yaml").exists()
    ),
    Path(__file__).resolve().parent / "charts" / "nbjobs",
)


class _Values(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Image(_Values):
    """The hub image (nbjobs[all] on z2jh's k8s-hub), which the job service runs from."""

    repository: str
    tag: str = Field(description="empty: the chart's appVersion")
    pullPolicy: Literal["Always", "IfNotPresent", "Never"]
    pullSecrets: list[dict[str, Any]]


class JobService(_Values):
    replicas: int = Field(ge=1, le=2, description="2: a standby takes over through the lease")
    port: int = Field(ge=1, le=65535)
    resources: dict[str, Any]
    nodeSelector: dict[str, str]
    tolerations: list[dict[str, Any]]
    affinity: dict[str, Any]
    podAnnotations: dict[str, str]
    runAsUser: int = Field(ge=1)
    runAsGroup: int = Field(ge=0)
    extraEnv: list[dict[str, Any]]
    extraArgs: list[str]


class Hub(_Values):
    apiUrl: str
    baseUrl: str = Field(pattern=r"^/(.*/)?$")
    existingTokenSecret: str


class Database(_Values):
    existingSecret: str
    secretKey: str


class JobsNamespace(_Values):
    create: bool
    podSecurity: Literal["restricted", "baseline", "privileged"]


class Rbac(_Values):
    readNodes: bool


class ServiceMonitor(_Values):
    enabled: bool
    interval: str
    labels: dict[str, str]


class GrafanaDashboard(_Values):
    enabled: bool
    labels: dict[str, str]


class Metrics(_Values):
    serviceMonitor: ServiceMonitor
    grafanaDashboard: GrafanaDashboard


class ChartValues(_Values):
    """Everything ``charts/nbjobs/values.yaml`` holds."""

    config: NbjobsConfig
    image: Image
    jobService: JobService
    hub: Hub
    database: Database
    jobsNamespace: JobsNamespace
    rbac: Rbac
    metrics: Metrics


def values_schema() -> dict[str, Any]:
    """The chart's values.schema.json: Helm holds the merged values to it at install."""
    schema = ChartValues.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "nbjobs chart values"
    return schema


def merged(*layers: dict[str, Any]) -> dict[str, Any]:
    """Values files merged as Helm merges them: maps key by key, anything else replaced
    by the later file (a null removes the key)."""
    out: dict[str, Any] = {}
    for layer in layers:
        out = _merge(out, layer)
    return out


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def release_values(files: list[Path], chart: Path = CHART) -> dict[str, Any]:
    """The values a release of the chart was installed with: the chart's own, then each of
    ``files`` over them, as ``helm install -f`` merges them."""
    layers = [yaml.safe_load((chart / "values.yaml").read_text()) or {}]
    layers += [yaml.safe_load(f.read_text()) or {} for f in files]
    return merged(*layers)

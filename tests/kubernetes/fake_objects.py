"""The fake API server's objects (tests/kubernetes/fake_apiserver.py): the resources it
serves, quantities as the scheduler compares them, Status bodies, selectors and what a
watch with selectors is told of a change."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

Obj = dict[str, Any]


RESOURCES = {
    "jobs": ("batch", "Job", True),
    "pods": ("", "Pod", True),
    "nodes": ("", "Node", False),
    "events": ("", "Event", True),
    "networkpolicies": ("networking.k8s.io", "NetworkPolicy", True),
    # Kueue's queues, as its controller keeps them (a test writes their status)
    "localqueues": ("kueue.x-k8s.io", "LocalQueue", True),
    "clusterqueues": ("kueue.x-k8s.io", "ClusterQueue", False),
    "workloads": ("kueue.x-k8s.io", "Workload", True),
    # the headless Service of a multi-node Indexed Job (or the one a JobSet makes)
    "services": ("", "Service", True),
    # JobSet's (its controller: reconcile_jobsets, played by the test)
    "jobsets": ("jobset.x-k8s.io", "JobSet", True),
    # what the Helm chart installs (tests/kubernetes/fake_platform.py: discovery, PATCH)
    "namespaces": ("", "Namespace", False),
    "secrets": ("", "Secret", True),
    "configmaps": ("", "ConfigMap", True),
    "serviceaccounts": ("", "ServiceAccount", True),
    "resourcequotas": ("", "ResourceQuota", True),
    "deployments": ("apps", "Deployment", True),
    "roles": ("rbac.authorization.k8s.io", "Role", True),
    "rolebindings": ("rbac.authorization.k8s.io", "RoleBinding", True),
    "clusterroles": ("rbac.authorization.k8s.io", "ClusterRole", False),
    "clusterrolebindings": ("rbac.authorization.k8s.io", "ClusterRoleBinding", False),
    "poddisruptionbudgets": ("policy", "PodDisruptionBudget", True),
    # the Prometheus operator's (a custom resource: not in Kubernetes' own schemas)
    "servicemonitors": ("monitoring.coreos.com", "ServiceMonitor", True),
}
#: the kinds whose names may be DNS subdomains (dots, up to 253 characters), as the real
#: server allows; the others' must be DNS labels
SUBDOMAIN_NAMED = {
    "secrets", "configmaps", "serviceaccounts", "resourcequotas", "deployments", "roles",
    "rolebindings", "clusterroles", "clusterrolebindings", "poddisruptionbudgets",
    "servicemonitors",
}  # fmt: skip
#: the kinds Kubernetes' own schemas (kubernetes-validate) hold every object of to them
#: as the real server's validation does
SCHEMA_CHECKED = {
    "services", "networkpolicies", "namespaces", "secrets", "configmaps", "serviceaccounts",
    "resourcequotas", "deployments", "roles", "rolebindings", "clusterroles",
    "clusterrolebindings", "poddisruptionbudgets",
}  # fmt: skip
#: the version each API group is served at (v1 unless here)
VERSIONS = {"kueue.x-k8s.io": "v1beta1", "jobset.x-k8s.io": "v1alpha2"}
#: where an Indexed Job's pod has its index
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
_SUFFIX = {
    "": 1.0, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
    "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40,
}  # fmt: skip


def _quantity(value: Any) -> float:
    """A resource quantity as the scheduler compares it (``500m``, ``16Gi``, ``4``)."""
    match = re.match(r"^([0-9.]+)([a-zA-Z]*)$", str(value))
    if not match or match.group(2) not in _SUFFIX:
        raise ValueError(f"not a quantity: {value!r}")
    return float(match.group(1)) * _SUFFIX[match.group(2)]


def _requests(pod: Obj) -> dict[str, float]:
    """What a pod's containers request (their limits where they give no request)."""
    total: dict[str, float] = {"pods": 1.0}
    for container in pod["spec"].get("containers") or []:
        resources = container.get("resources") or {}
        for k, v in {
            **(resources.get("limits") or {}),
            **(resources.get("requests") or {}),
        }.items():
            total[k] = total.get(k, 0.0) + _quantity(v)
    return total


_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_TRUE = {"1", "t", "T", "true", "TRUE", "True"}


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_body(code: int, reason: str, message: str, details: Obj | None = None) -> Obj:
    body: Obj = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details is not None:
        body["details"] = details
    return body


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: Obj | None = None):
        super().__init__(message)
        self.body = status_body(code, reason, message, details)


def _has_condition(obj: Obj, kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def _parse_selector(text: str) -> list[Callable[[dict[str, str]], bool]]:
    """Label selector requirements: ``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``,
    ``a notin (x)``, ``a``, ``!a``."""
    rules: list[Callable[[dict[str, str]], bool]] = []
    parts = re.findall(r"[^,(]+(?:\([^)]*\))?", text or "")
    for raw in parts:
        part = raw.strip()
        if not part:
            continue
        m = re.match(r"^(\S+)\s+(in|notin)\s+\(([^)]*)\)$", part)
        if m:
            key, op, values = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",")}
            if op == "in":
                rules.append(lambda labels, k=key, vs=values: labels.get(k) in vs)
            else:
                rules.append(lambda labels, k=key, vs=values: labels.get(k) not in vs)
            continue
        m = re.match(r"^([^!=]+)(==|=|!=)(.*)$", part)
        if m:
            key, op, value = m.group(1).strip(), m.group(2), m.group(3).strip()
            if op == "!=":
                rules.append(lambda labels, k=key, v=value: labels.get(k) != v)
            else:
                rules.append(lambda labels, k=key, v=value: labels.get(k) == v)
            continue
        if part.startswith("!"):
            rules.append(lambda labels, k=part[1:]: k not in labels)
        else:
            rules.append(lambda labels, k=part: k in labels)
    return rules


def _matches(obj: Obj, labels: str, fields: str) -> bool:
    have = (obj.get("metadata") or {}).get("labels") or {}
    if not all(rule(have) for rule in _parse_selector(labels)):
        return False
    for part in [p for p in (fields or "").split(",") if p]:
        key, _, value = part.partition("=")
        key = key.rstrip("=")
        if key == "metadata.name" and obj["metadata"]["name"] != value.lstrip("="):
            return False
        if key == "metadata.namespace" and obj["metadata"].get("namespace") != value.lstrip("="):
            return False
        if key == "spec.nodeName" and (obj.get("spec") or {}).get("nodeName") != value:
            return False
        if key == "status.phase" and (obj.get("status") or {}).get("phase") != value:
            return False
        if key.startswith("involvedObject."):
            field_name = key.split(".", 1)[1]
            if str((obj.get("involvedObject") or {}).get(field_name)) != value.lstrip("="):
                return False
    return True


def _as_seen_by(watcher: _Watcher, kind: str, obj: Obj, before: Obj | None) -> str | None:
    """The event a watch with selectors gets for a change, if any (as the real server:
    leaving the selection is DELETED, entering it ADDED)."""
    now_in = _matches(obj, watcher.labels, watcher.fields)
    if kind != "MODIFIED" or before is None:
        return kind if now_in else None
    was_in = _matches(before, watcher.labels, watcher.fields)
    if now_in and was_in:
        return "MODIFIED"
    if now_in:
        return "ADDED"
    return "DELETED" if was_in else None


@dataclass
class _Watcher:
    resource: str
    namespace: str | None
    labels: str
    fields: str
    queue: asyncio.Queue[Obj | None] = field(default_factory=asyncio.Queue)


def problems(resource: str, body: Obj) -> list[Obj]:
    """What the real server would refuse in ``body``, a ``resource`` to store: its
    causes, as a 422's details list them."""
    causes = []
    if resource == "jobsets":  # the JobSet CRD's schema, and Kubernetes' for its Jobs
        from .jobset_schema import jobset_problems

        causes += [
            {"reason": "FieldValueInvalid", "field": "spec", "message": problem}
            for problem in jobset_problems(body)
        ]
    if resource in SCHEMA_CHECKED:  # what the real server checks: its schema
        import kubernetes_validate

        group, kind, _ = RESOURCES[resource]
        version = f"{group}/{VERSIONS.get(group, 'v1')}" if group else "v1"
        try:
            kubernetes_validate.validate(
                {**body, "apiVersion": version, "kind": kind}, "1.33.0", strict=True
            )
        except kubernetes_validate.ValidationError as exc:
            causes.append({"reason": "FieldValueInvalid", "field": "spec", "message": str(exc)})
    name = body["metadata"].get("name") or ""
    if not name:
        causes.append(
            {
                "reason": "FieldValueRequired",
                "field": "metadata.name",
                "message": "Required value: name or generateName is required",
            }
        )
    elif resource in SUBDOMAIN_NAMED:
        if len(name) > 253 or not all(_DNS_LABEL.match(part) for part in name.split(".")):
            causes.append(
                {
                    "reason": "FieldValueInvalid",
                    "field": "metadata.name",
                    "message": f'Invalid value: "{name}": a lowercase RFC 1123 subdomain '
                    "must consist of lower case alphanumeric characters, '-' or '.'",
                }
            )
    elif not _DNS_LABEL.match(name) or len(name) > 63:
        causes.append(
            {
                "reason": "FieldValueInvalid",
                "field": "metadata.name",
                "message": f'Invalid value: "{name}": a lowercase RFC 1123 label '
                "must consist of lower case alphanumeric characters or '-'",
            }
        )
    if resource == "jobs":
        pod = ((body.get("spec") or {}).get("template") or {}).get("spec") or {}
        if pod.get("restartPolicy") not in ("Never", "OnFailure"):
            causes.append(
                {
                    "reason": "FieldValueNotSupported",
                    "field": "spec.template.spec.restartPolicy",
                    "message": f'Unsupported value: "{pod.get("restartPolicy")}": '
                    'supported values: "OnFailure", "Never"',
                }
            )
        for i, container in enumerate(pod.get("containers") or []):
            resources = container.get("resources") or {}
            requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
            for key in set(requests) | set(limits):
                extended = "/" in key and not key.startswith("kubernetes.io/")
                if extended and requests.get(key, limits.get(key)) != limits.get(key):
                    causes.append(
                        {
                            "reason": "FieldValueInvalid",
                            "field": f"spec.template.spec.containers[{i}]"
                            f".resources.requests[{key}]",
                            "message": f"Invalid value: must be equal to {key} limit",
                        }
                    )
    return causes

"""What the fake API server (tests/kubernetes/fake_apiserver.py) serves for Helm: the kinds
a chart installs, discovery, the server's version, and PATCH as the real server applies it.

Helm (its own code, through helm-sdkpy) asks the server which groups and resources it has
(``/api``, ``/apis``, ``/api/v1``, ``/apis/GROUP/VERSION``; it takes the legacy documents
when the aggregated ones are not offered), its version (``/version``, the chart's
``.Capabilities.KubeVersion``), then GETs, POSTs, PATCHes and DELETEs the objects, and
keeps each release as a Secret. An upgrade PATCHes with a strategic merge patch (the
built-in kinds) or a JSON merge patch (custom resources); server-side apply is a PATCH of
``application/apply-patch+yaml``.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import yaml

from .fake_objects import RESOURCES, VERSIONS, ApiError, Obj

#: the server's version, as ``/version`` says it
KUBE_VERSION = {"major": "1", "minor": "33", "gitVersion": "v1.33.0", "platform": "linux/amd64"}

#: what each kind may be asked, as discovery lists it
_VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


def groups() -> list[str]:
    """Every API group served ("" is the core group)."""
    return sorted({group for group, _, _ in RESOURCES.values()})


def split_path(parts: list[str]) -> tuple[str, list[str]] | None:
    """``/api/v1/...`` or ``/apis/GROUP/VERSION/...``: (group, the rest); None when the path
    names no group this server serves at that version."""
    if parts[:2] == ["api", "v1"]:
        return "", parts[2:]
    served = len(parts) >= 3 and parts[0] == "apis" and parts[1] in groups()
    if served and VERSIONS.get(parts[1], "v1") == parts[2]:
        return parts[1], parts[3:]
    return None


def discovery(parts: list[str]) -> Obj | None:
    """The discovery document at ``parts`` (a path split at ``/``), or None when the path
    is not one."""
    if parts == ["version"]:
        return dict(KUBE_VERSION)
    if parts == ["api"]:
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}],
        }
    if parts == ["apis"]:
        listed = []
        for group in groups():
            if not group:
                continue
            version = {"groupVersion": f"{group}/{VERSIONS.get(group, 'v1')}"}
            version["version"] = VERSIONS.get(group, "v1")
            listed.append({"name": group, "versions": [version], "preferredVersion": version})
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": listed}
    if parts[:2] == ["openapi", "v3"]:
        return _openapi_v3(parts[2:])
    where = split_path(parts)
    if where is None or where[1]:
        return None
    group = where[0]
    version = f"{group}/{VERSIONS.get(group, 'v1')}" if group else "v1"
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": version,
        "resources": [
            {
                "name": resource,
                "singularName": kind.lower(),
                "namespaced": namespaced,
                "kind": kind,
                "verbs": _VERBS,
            }
            for resource, (g, kind, namespaced) in sorted(RESOURCES.items())
            if g == group
        ],
    }


def _openapi_v3(parts: list[str]) -> Obj | None:
    """OpenAPI v3 as far as a client asks it before a write: the index of group-versions,
    and each one's paths, whose PATCH says (``fieldValidation``) that this server checks
    the fields of what it is sent itself (kubectl's and Helm's validation then leave it to
    the server, which holds every object to Kubernetes' own schemas)."""
    if not parts:
        paths = {"api/v1": {"serverRelativeURL": "/openapi/v3/api/v1?hash=fake"}}
        for group in groups():
            if group:
                at = f"apis/{group}/{VERSIONS.get(group, 'v1')}"
                paths[at] = {"serverRelativeURL": f"/openapi/v3/{at}?hash=fake"}
        return {"paths": paths}
    where = split_path(parts)
    if where is None or where[1]:
        return None
    group = where[0]
    version = VERSIONS.get(group, "v1")
    prefix = f"/apis/{group}/{version}" if group else "/api/v1"
    paths = {}
    for resource, (g, kind, namespaced) in sorted(RESOURCES.items()):
        if g != group:
            continue
        at = (
            f"{prefix}/namespaces/{{namespace}}/{resource}/{{name}}"
            if namespaced
            else (f"{prefix}/{resource}/{{name}}")
        )
        paths[at] = {
            "patch": {
                "operationId": f"patch{kind}",
                "x-kubernetes-group-version-kind": {
                    "group": group,
                    "version": version,
                    "kind": kind,
                },
                "parameters": [
                    {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
                    {"name": "fieldManager", "in": "query", "schema": {"type": "string"}},
                ],
                "responses": {"200": {"description": "OK"}},
            }
        }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
    }


# -- PATCH ---------------------------------------------------------------------------

#: the key a strategic merge patch merges a list's items by, where it is not ``name``
_MERGE_KEYS = {"ports": ("containerPort", "port"), "volumeMounts": ("mountPath",)}


def patched(current: Obj, patch: Any, content_type: str) -> Obj:
    """``current`` with ``patch`` applied as the real server applies a PATCH of
    ``content_type``; an unknown one is refused (415) as it refuses it."""
    kind = content_type.split(";")[0].strip()
    if kind == "application/merge-patch+json":
        return _merge(copy.deepcopy(current), patch, strategic=False)
    if kind == "application/strategic-merge-patch+json":
        return _merge(copy.deepcopy(current), patch, strategic=True)
    if kind == "application/apply-patch+yaml":
        applied = yaml.safe_load(patch) if isinstance(patch, str) else patch
        return _merge(copy.deepcopy(current), applied, strategic=True)
    if kind == "application/json-patch+json":
        return _json_patch(copy.deepcopy(current), patch)
    raise ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: "
        f"application/json-patch+json, application/merge-patch+json, "
        f'application/apply-patch+yaml, application/strategic-merge-patch+json (not "{kind}")',
    )


def read_patch(text: str, content_type: str) -> Any:
    if content_type.startswith("application/apply-patch+yaml"):
        return yaml.safe_load(text)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ApiError(400, "BadRequest", f"error decoding patch: {exc}") from None


def _merge(target: Any, patch: Any, strategic: bool) -> Any:
    """RFC 7386 (a null removes a key, a list replaces a list); ``strategic``: lists of
    objects merge item by item on their merge key, and the directives a strategic merge
    patch carries (``$patch``, ``$setElementOrder/…``, ``$retainKeys``,
    ``$deleteFromPrimitiveList/…``) are obeyed or dropped."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    if strategic and patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    retain = patch.get("$retainKeys") if strategic else None
    for key, value in patch.items():
        if strategic and key.startswith("$"):
            if key.startswith("$deleteFromPrimitiveList/"):
                field = key.split("/", 1)[1]
                target[field] = [v for v in target.get(field) or [] if v not in value]
            continue
        if value is None:
            target.pop(key, None)
        elif strategic and isinstance(value, list) and _keyed(key, value, target.get(key)):
            target[key] = _merge_list(key, target.get(key) or [], value)
        else:
            target[key] = _merge(target.get(key), value, strategic)
    if retain is not None:
        for key in [k for k in target if k not in retain]:
            del target[key]
    return target


def _merge_key(field: str, item: Any) -> str | None:
    if not isinstance(item, dict):
        return None
    for key in (*_MERGE_KEYS.get(field, ()), "name"):
        if key in item:
            return key
    return None


def _keyed(field: str, patch: list[Any], current: Any) -> bool:
    return bool(patch) and all(_merge_key(field, item) for item in patch)


def _merge_list(field: str, current: list[Any], patch: list[Any]) -> list[Any]:
    merged = [copy.deepcopy(item) for item in current]
    for item in patch:
        key = _merge_key(field, item)
        at = next(
            (i for i, have in enumerate(merged) if isinstance(have, dict)
             and have.get(key) == item.get(key)),
            None,
        )  # fmt: skip
        if item.get("$patch") == "delete":
            if at is not None:
                del merged[at]
        elif at is None:
            merged.append({k: v for k, v in item.items() if k != "$patch"})
        else:
            merged[at] = _merge(merged[at], item, strategic=True)
    return merged


def _json_patch(target: Obj, operations: list[Obj]) -> Obj:
    """RFC 6902, the operations a client sends to Kubernetes (add, remove, replace)."""
    for op in operations:
        *parents, last = [
            p.replace("~1", "/").replace("~0", "~") for p in op["path"][1:].split("/")
        ]
        node: Any = target
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        if op["op"] == "remove":
            del node[int(last) if isinstance(node, list) else last]
        elif isinstance(node, list):
            index = len(node) if last == "-" else int(last)
            if op["op"] == "add":
                node.insert(index, op["value"])
            else:
                node[index] = op["value"]
        else:
            node[last] = op["value"]
    return target

"""Kubernetes' protobuf bodies, read as the fake API server needs them: a client built on
client-go's typed clientsets (Helm keeping its releases as Secrets) sends Secrets as
``application/vnd.kubernetes.protobuf``, and a real server reads them; its answers may be
JSON (the client asks for either).

The envelope is the four bytes ``k8s\\0`` and a ``runtime.Unknown`` (1: TypeMeta, 2: the
object's own bytes); the field numbers below are those of Kubernetes' ``generated.proto``.
"""

from __future__ import annotations

import base64
from typing import Any

MAGIC = b"k8s\x00"
PROTOBUF = "application/vnd.kubernetes.protobuf"


def _fields(data: bytes) -> list[tuple[int, Any]]:
    """The (field number, value) pairs of a message: varints as ints, length-delimited
    fields as bytes (a nested message, a string, bytes); fixed-width ones as bytes."""
    out: list[tuple[int, Any]] = []
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(data, at)
        elif wire == 2:
            size, at = _varint(data, at)
            value, at = data[at : at + size], at + size
        elif wire == 1:
            value, at = data[at : at + 8], at + 8
        elif wire == 5:
            value, at = data[at : at + 4], at + 4
        else:
            raise ValueError(f"protobuf wire type {wire} is not one Kubernetes sends")
        out.append((number, value))
    return out


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def _map(entries: list[bytes], text: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for entry in entries:
        pair = dict(_fields(entry))
        key = pair.get(1, b"").decode()
        value = pair.get(2, b"")
        out[key] = value.decode() if text else base64.b64encode(value).decode()
    return out


def _time(message: bytes) -> str:
    from datetime import datetime, timezone

    seconds = dict(_fields(message)).get(1, 0)
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _object_meta(message: bytes) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    labels: list[bytes] = []
    annotations: list[bytes] = []
    names = {1: "name", 2: "generateName", 3: "namespace", 5: "uid", 6: "resourceVersion"}
    for number, value in _fields(message):
        if number in names:
            if value:  # Kubernetes' messages carry every string, empty ones too
                meta[names[number]] = value.decode()
        elif number == 7:
            meta["generation"] = value
        elif number == 8:
            meta["creationTimestamp"] = _time(value)
        elif number == 11:
            labels.append(value)
        elif number == 12:
            annotations.append(value)
        elif number == 14:
            meta.setdefault("finalizers", []).append(value.decode())
    if labels:
        meta["labels"] = _map(labels, text=True)
    if annotations:
        meta["annotations"] = _map(annotations, text=True)
    return meta


def _secret(message: bytes) -> dict[str, Any]:
    secret: dict[str, Any] = {}
    data: list[bytes] = []
    string_data: list[bytes] = []
    for number, value in _fields(message):
        if number == 1:
            secret["metadata"] = _object_meta(value)
        elif number == 2:
            data.append(value)
        elif number == 3:
            secret["type"] = value.decode()
        elif number == 4:
            string_data.append(value)
        elif number == 5:
            secret["immutable"] = bool(value)
    if data:
        secret["data"] = _map(data, text=False)
    if string_data:
        secret["stringData"] = _map(string_data, text=True)
    return secret


def _delete_options(message: bytes) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for number, value in _fields(message):
        if number == 1:
            options["gracePeriodSeconds"] = value
        elif number == 4 and value:
            options["propagationPolicy"] = value.decode()
    return options


#: the kinds this fake reads from protobuf, and how
_READERS = {"Secret": _secret, "DeleteOptions": _delete_options}


def read(body: bytes) -> dict[str, Any]:
    """A protobuf body as the JSON object it stands for; a kind this fake cannot read is
    refused with the reason (ValueError)."""
    if not body.startswith(MAGIC):
        raise ValueError("a protobuf body starts with k8s\\0")
    unknown = dict(_fields(body[len(MAGIC) :]))
    type_meta = dict(_fields(unknown.get(1, b"")))
    api_version, kind = type_meta.get(1, b"").decode(), type_meta.get(2, b"").decode()
    reader = _READERS.get(kind)
    if reader is None:
        raise ValueError(f"this fake reads no {kind or 'object'} sent as protobuf")
    obj = reader(unknown.get(2, b""))
    return {"apiVersion": api_version, "kind": kind, **obj}

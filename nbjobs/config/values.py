"""The values nbjobs.yaml is written in: durations, Kubernetes quantities, sizes, task
counts, names; the error a file that does not validate raises; the base of its models."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
)

_DURATION = re.compile(
    r"^\s*(?:(\d+(?:\.\d+)?)\s*d)?\s*(?:(\d+(?:\.\d+)?)\s*h)?\s*"
    r"(?:(\d+(?:\.\d+)?)\s*m)?\s*(?:(\d+(?:\.\d+)?)\s*s)?\s*$"
)
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SCHEDULER = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
#: a queue's name: a Kueue LocalQueue (a DNS name), a KAI or Volcano queue
_QUEUE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$")


def _check_queue(value: str | None) -> str | None:
    if value is not None and not _QUEUE.match(value):
        raise ValueError(
            f"queue {value!r} must be a queue's name: lowercase letters, digits, '-' and "
            "'.', at most 63, like physics-101"
        )
    return value


class ConfigError(ValueError):
    """``nbjobs.yaml`` cannot be used; ``str()`` is the file, line and reason."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None):
        self.path, self.line, self.reason = path, line, message
        where = path or "nbjobs.yaml"
        if line is not None:
            where += f", line {line}"
        super().__init__(f"{where}: {message}")


def parse_duration(value: Any) -> float | None:
    """Seconds from ``90``, ``"90s"``, ``"30m"``, ``"2h"``, ``"1h30m"`` or ``"1d"``."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError("a duration is a number of seconds or text like '2h' or '30m'")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        match = _DURATION.match(str(value))
        if not match or not any(match.groups()):
            raise ValueError(f"{value!r} is not a duration; write seconds or e.g. '90m', '2h'")
        d, h, m, s = (float(g) if g else 0.0 for g in match.groups())
        seconds = d * 86400 + h * 3600 + m * 60 + s
    if seconds <= 0:
        raise ValueError("a duration must be more than zero")
    return seconds


# What the file may hold (the JSON Schema says so) and what the loader makes of it.
Duration = Annotated[
    float | None, BeforeValidator(parse_duration, json_schema_input_type=float | str | None)
]


def _quantity(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value)
    if not _QUANTITY.match(text):
        raise ValueError(f"{value!r} is not a Kubernetes quantity (like 4, 500m, 16Gi)")
    return text


#: Kubernetes quantity suffixes, as multipliers
_SUFFIXES = {
    **{s: 1000**i for i, s in enumerate(["", "k", "M", "G", "T", "P", "E"])},
    **{s: 1024**i for i, s in enumerate(["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"], start=1)},
    "m": 0.001,
}


def quantity_bytes(value: str | None) -> int | None:
    """Bytes from a Kubernetes memory quantity (``2Gi``, ``512M``, ``1073741824``)."""
    if value is None:
        return None
    number = value.rstrip("kKMGTPEim")
    suffix = value[len(number) :]
    return int(float(number) * _SUFFIXES[suffix])


def quantity_cpus(value: str | None) -> float | None:
    """Cores from a Kubernetes CPU quantity (``2``, ``500m``)."""
    if value is None:
        return None
    return float(value[:-1]) / 1000 if value.endswith("m") else float(value)


Quantity = Annotated[
    str | None, BeforeValidator(_quantity, json_schema_input_type=int | float | str | None)
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


_BYTES = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B?|B)?\s*$", re.IGNORECASE)
_BYTE_UNITS = {"": 1, "b": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4}


def parse_size(value: Any) -> int:
    """Bytes from ``1048576``, ``"64KiB"``, ``"16MiB"``, ``"50MB"`` or ``"1GiB"``.

    ``KiB``/``MiB``/``GiB`` count in 1024s, ``KB``/``MB``/``GB`` in 1000s.
    """
    if isinstance(value, bool):
        raise ValueError("a size is a number of bytes or text like '16MiB'")
    if isinstance(value, int | float):
        size = float(value)
    else:
        match = _BYTES.match(str(value))
        if not match:
            raise ValueError(f"{value!r} is not a size; write bytes or e.g. '64KiB', '16MiB'")
        unit = (match.group(2) or "").lower().removesuffix("b")
        binary = unit.endswith("i")
        factor = 1024 ** ("kmgt".index(unit[0]) + 1) if binary else _BYTE_UNITS[unit]
        size = float(match.group(1)) * factor
    if size < 1:
        raise ValueError("a size must be at least 1 byte")
    return int(size)


Size = Annotated[int, BeforeValidator(parse_size, json_schema_input_type=int | str)]

#: the fewest tasks a job or a notebook server may be held to: a runner and its kernel
#: alone hold about 20 processes and threads, and a library may start one thread per core
MIN_TASKS = 64


def _task_count(value: int | None) -> int | None:
    if value is not None and value < MIN_TASKS:
        raise ValueError(
            f"tasks: {value} is too few: a job's runner and kernel alone hold about 20 "
            f"processes and threads, and libraries start one thread per core; give at "
            f"least {MIN_TASKS} (the default is 4096)"
        )
    return value


#: how many processes and threads (tasks) may run at once in one job or notebook server
TaskCount = Annotated[int | None, AfterValidator(_task_count)]

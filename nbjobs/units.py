"""Sizes and budget figures as people read them, for the job service and the ``nbjobs``
command alike (so it imports nothing of nbjobs: the command runs where only the runner's
dependencies are)."""

from __future__ import annotations

import math

#: how long each budget period is, in words: a window that slides with the clock (the
#: last 7 days for ``week``), not a calendar week that starts again on Monday
PERIOD_SPANS = {"day": "24 hours", "week": "7 days", "month": "30 days"}
#: a budget's period wherever nbjobs shows it (messages, the dashboard, ``nbjobs usage``)
PERIOD_WORDS = {name: f"the last {span}" for name, span in PERIOD_SPANS.items()}


def format_size(size: int) -> str:
    """A size to a tenth of its largest binary unit: ``512 B``, ``3.4 KiB``, ``2.9 MiB``,
    ``5.0 GiB`` (what the job service and ``nbjobs storage`` say of job files)."""
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


def figure(value: float, digits: int = 3, against: float | None = None) -> str:
    """A budget figure in words (GPU-hours, GPUs, credits): ``digits`` significant digits,
    never an exponent, no trailing zeros: ``0.0223``, ``12.5``, ``1500``, ``0.000123``.
    More digits where fewer would not be true: a figure that is not zero never reads 0
    (``used 0.0 of your 0.02`` was once said of 0.0223), and one shown beside a limit
    (``against``) never reads as equal to it, or on its other side, when it is not."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    magnitude = math.floor(math.log10(abs(value)))
    text = ""
    for more in range(digits, 16):
        text = f"{value:.{max(0, more - 1 - magnitude)}f}"
        if "." in text:
            text = text.rstrip("0").rstrip(".")
        if against is None or _side(float(text), against) == _side(value, against):
            break
    return text


def limit_figure(value: float) -> str:
    """A limit as configured (a quota, a price) in words: up to six significant digits,
    never an exponent (``0.02``, ``2.5``, ``1500000``)."""
    return figure(value, digits=6)


def _side(value: float, limit: float) -> int:
    return (value > limit) - (value < limit)

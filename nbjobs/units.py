"""Sizes as people read them, for the job service and the ``nbjobs`` command alike (so
it imports nothing: the command runs where only the runner's dependencies are)."""

from __future__ import annotations


def format_size(size: int) -> str:
    """A size to a tenth of its largest binary unit: ``512 B``, ``3.4 KiB``, ``2.9 MiB``,
    ``5.0 GiB`` (what the job service and ``nbjobs storage`` say of job files)."""
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"

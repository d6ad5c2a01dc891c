"""Where a class lives in the hub, and the group lists of ``nbjobs.yaml`` that grant.

A class (``ml101``) is a set of students with budgets and flavors; it grants nothing.
Its JupyterHub group is named in a namespace of its own, ``nbjobs-class-ml101``, and
no list of ``nbjobs.yaml`` that gives a group something (admins, teachers, a flavor,
an approval rule, a quota, credits, a profile, an idle-GPU exemption) may name a group
of that namespace: whatever names an admin gives meaning to later, a class's group is
never one of them. The job service, the hub configuration and the spawners all take
the namespace and the lists from here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nbjobs.config import NbjobsConfig

#: the start of every class's JupyterHub group name
CLASS_GROUP_PREFIX = "nbjobs-class-"


def class_group(name: str) -> str:
    """The JupyterHub group of class ``name``: ``ml101`` -> ``nbjobs-class-ml101``."""
    return CLASS_GROUP_PREFIX + name


def class_of_group(group: str) -> str | None:
    """The class whose hub group ``group`` is; None for a group that is no class's."""
    if group.startswith(CLASS_GROUP_PREFIX) and len(group) > len(CLASS_GROUP_PREFIX):
        return group[len(CLASS_GROUP_PREFIX) :]
    return None


def is_class_group(group: str) -> bool:
    """Whether ``group`` is in the classes' namespace (it then never counts for a grant)."""
    return class_of_group(group) is not None


def granting_groups(
    config: NbjobsConfig,
) -> Iterator[tuple[tuple[str | int, ...], str, str]]:
    """Every group name ``nbjobs.yaml`` gives something to: ``(where in the file, the
    group, what its members get)``, in the file's order."""
    for name in config.admin.groups:
        yield ("admin", "groups"), name, "its members are nbjobs admins"
    for name in config.teachers.groups:
        yield ("teachers", "groups"), name, "its members teach"
    for index, flavor in enumerate(config.flavors):
        for name in flavor.groups:
            yield ("flavors", index, "groups"), name, f"it may use flavor {flavor.name!r}"
        if flavor.approval is not None:
            for name in flavor.approval.groups:
                yield (
                    ("flavors", index, "approval", "groups"),
                    name,
                    f"its jobs on {flavor.name!r} wait for approval",
                )
        if flavor.idle_gpu is not None:
            for name in flavor.idle_gpu.exempt_groups:
                yield (
                    ("flavors", index, "idle_gpu", "exempt_groups"),
                    name,
                    f"its jobs on {flavor.name!r} are never stopped for idle GPUs",
                )
    for index, profile in enumerate(config.profiles):
        for name in profile.groups:
            yield (
                ("profiles", index, "groups"),
                name,
                f"it may use profile {profile.name or profile.slug!r}",
            )
    for name in config.quotas.groups:
        yield ("quotas", "groups", name), name, "it has a quota of its own"
    for name in config.credits.groups:
        yield ("credits", "groups", name), name, "it has a credits account"


def group_meanings(config: NbjobsConfig) -> dict[str, str]:
    """The group names ``nbjobs.yaml`` gives something to, each with what (the first)."""
    meanings: dict[str, str] = {}
    for _, name, meaning in granting_groups(config):
        meanings.setdefault(name, meaning)
    return meanings


def class_group_named(config: NbjobsConfig) -> tuple[tuple[str | int, ...], str] | None:
    """The first place ``nbjobs.yaml`` names a class's group in a list that grants, with
    the sentence refusing it; None when it names none."""
    for where, name, meaning in granting_groups(config):
        cls = class_of_group(name)
        if cls is not None:
            return where, (
                f"{name!r} is the hub group of class {cls!r}; a class grants nothing, so its "
                f"group cannot be given anything here ({meaning}). Name a group "
                f"of your own (not starting with {CLASS_GROUP_PREFIX!r}), or give the class "
                "its flavors and GPU-hours in the class itself"
            )
    return None

"""Classes kept in hub groups named like the class, from before classes had a namespace.

Until classes lived in hub groups named ``nbjobs-class-<class>`` (see
:mod:`nbjobs.class_groups`), a teacher's class ``ml101`` was the hub group ``ml101``,
and a class from ``nbjobs.yaml`` was too. Such a group grants whatever ``nbjobs.yaml``
later gives a group of that name, so the job service, at its start:

* moves every teacher's class still in a bare-named group (one carrying the class
  property) into its namespaced group, members and settings alike, and removes the old
  group;
* never counts a bare-named group that still holds the members of an ``nbjobs.yaml``
  class of that name while ``nbjobs.yaml`` gives that name meaning (the group may be the
  admin's own, so it is left in place, and said);
* says, in its log and on the dashboard, what it did and what the admin should do, and
  names every class whose name is also a group ``nbjobs.yaml`` gives meaning to.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from nbjobs.class_groups import class_group
from nbjobs.config import NbjobsConfig

from .errors import ServiceError

if TYPE_CHECKING:
    from .classes import HubGroups


async def move_to_namespace(
    hub: HubGroups,
    legacy: dict[str, dict[str, Any]],
    existing: set[str],
    meanings: dict[str, str],
    log: logging.Logger,
) -> tuple[set[str], list[str]]:
    """Move each class of ``legacy`` (its bare-named hub group's model, by name) into its
    namespaced group; ``existing``: the hub's group names. Returns the classes moved and
    a sentence for each, for the admin. A class that cannot be moved stays where it is
    (its group still never counts) and is tried again at the next read."""
    moved: set[str] = set()
    notices: list[str] = []
    for name, group in sorted(legacy.items()):
        target = class_group(name)
        users = sorted(str(u) for u in group.get("users") or [])
        try:
            if target in existing:  # a move cut short earlier: finish it
                if users:
                    await hub.add_users(target, users)
            else:
                await hub.create_group(target, users)
            await hub.set_properties(target, dict(group.get("properties") or {}))
            await hub.delete_group(name)
        except (ServiceError, OSError) as exc:
            log.warning(
                "class %s is still in hub group %r and could not be moved to %r (%s); "
                "its group grants nothing meanwhile, and the move is tried again",
                name,
                name,
                target,
                exc.message if isinstance(exc, ServiceError) else exc,
            )
            continue
        moved.add(name)
        meaning = meanings.get(name)
        if meaning:
            notice = (
                f"class {name!r} was the hub group {name!r}, a name nbjobs.yaml gives "
                f"meaning to ({meaning}); its students got nothing of that through it. The "
                f"class now lives in hub group {target!r} and group {name!r} was removed: "
                f"put the people who should have it in a group of that name again (the "
                "hub's Groups page), or name another group in nbjobs.yaml"
            )
            log.warning("%s", notice)
        else:
            notice = (
                f"class {name!r} moved from hub group {name!r} to {target!r} (classes now "
                f"live in groups of their own), with its {len(users)} students; if your own "
                f"hub configuration named group {name!r}, name another group there: a "
                "class's group grants nothing"
            )
            log.info("%s", notice)
        notices.append(notice)
    return moved, notices


def stale_yaml_class_groups(
    config: NbjobsConfig, groups: dict[str, set[str]], meanings: dict[str, str]
) -> dict[str, str]:
    """The bare-named hub groups (``groups``: each group's members) of ``nbjobs.yaml``'s
    classes that still hold some of the class's people while nbjobs.yaml gives that name
    meaning: never counted, each with the sentence telling the admin so."""
    stale: dict[str, str] = {}
    for cls in config.classes:
        meaning = meanings.get(cls.name)
        members = groups.get(cls.name)
        if not meaning or not members:
            continue
        left = sorted(members & (set(cls.students) | set(cls.teachers)))
        if left:
            stale[cls.name] = (
                f"hub group {cls.name!r} still holds people of class {cls.name!r} "
                f"({', '.join(left[:5])}{' and more' if len(left) > 5 else ''}): it was "
                f"the class's group before classes lived in {class_group(cls.name)!r}. "
                f"nbjobs.yaml gives the name meaning ({meaning}), and nbjobs counts that "
                "group for nobody until you take the class's people out of it (the hub's "
                "Groups page) or rename the class"
            )
    return stale


def name_collisions(class_names: set[str], meanings: dict[str, str]) -> list[str]:
    """A sentence for each class whose name is also a group nbjobs.yaml gives meaning to."""
    return [
        f"class {name!r} has the name of a group nbjobs.yaml gives meaning to "
        f"({meanings[name]}); the class is hub group {class_group(name)!r} and its "
        f"students get none of that. Rename the class or the group if that is not what "
        "you meant"
        for name in sorted(class_names & set(meanings))
    ]

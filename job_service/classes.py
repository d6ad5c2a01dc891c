"""Classes: a teacher's roster, its flavors and GPU-hours, kept as JupyterHub groups.

A class ``ml101`` is the JupyterHub group ``nbjobs-class-ml101`` whose ``properties``
hold ``nbjobs_class`` (teachers, flavors, GPU-hours per student and period). That
namespace is what keeps a class from granting anything: ``nbjobs.yaml`` may not give
one of its groups a thing (see :mod:`nbjobs.class_groups`), and the service never
counts one as a caller's group. Classes made before the namespace are moved into it
at start (:mod:`.legacy_classes`). Admins may also declare classes in
``nbjobs.yaml``; those are read-only here.

Why the job service makes the group changes and not the teacher's token
directly: JupyterHub's scopes can be narrowed to one group (``groups!group=ml101``),
but roles can only be defined in the hub's configuration, never through its
API, so a class a teacher creates today cannot get a role of its own until
the hub restarts. The service therefore acts as the class's role: a teacher
(scope ``custom:nbjobs:teach``) calls it with their own hub token, the service
checks that the teacher owns the class (the group's ``nbjobs_class.teachers``),
and only then changes that one group through the hub's REST API with its own
token. Nothing else of the hub is reachable to the teacher this way.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import quote

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

from nbjobs.class_groups import class_group, class_of_group, group_meanings, is_class_group
from nbjobs.config import PERIOD_WORDS, NbjobsConfig
from nbjobs.models import ClassInfo, CreateClass, InvitationInfo, RosterChecked, RosterProblem

from .errors import Caller, Conflict, Forbidden, Invalid, NotFound, ServiceError
from .legacy_classes import move_to_namespace, name_collisions, stale_yaml_class_groups

#: the key of a class's settings in its JupyterHub group's properties
PROPERTY = "nbjobs_class"
CLASS_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
USER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$")


class RosterRefused(ServiceError):
    """A roster with bad entries; nothing was changed. ``problems`` lists each one."""

    status = 400

    def __init__(self, problems: list[RosterProblem]) -> None:
        shown = "; ".join(f"{p.student!r}: {p.reason}" for p in problems[:5])
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        super().__init__(
            f"the roster has {len(problems)} problem(s), nothing was changed: {shown}{more}"
        )
        self.problems = problems


class HubError(ServiceError):
    """The hub refused or failed a change the service asked for."""

    status = 502


class HubGroups:
    """The few JupyterHub REST calls a class needs, with the service's own token."""

    def __init__(self, api_url: str, token: str) -> None:
        self.api_url = api_url.rstrip("/") + "/"
        self.token = token
        self.http = AsyncHTTPClient()

    async def _call(self, method: str, path: str, body: Any = None, ok: Iterable[int] = ()) -> Any:
        request = HTTPRequest(
            self.api_url + path,
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
            body=json.dumps(body) if body is not None else None,
            allow_nonstandard_methods=True,
            request_timeout=30,
        )
        try:
            response = await self.http.fetch(request)
        except HTTPClientError as exc:
            if exc.code in ok:
                return None
            detail = ""
            if exc.response is not None and exc.response.body:
                try:
                    detail = json.loads(exc.response.body).get("message", "")
                except ValueError:
                    detail = ""
            raise HubError(
                f"JupyterHub refused {method} {path} ({exc.code} {detail or exc.message}); "
                "check that the nbjobs service's role grants it (see hub_config)"
            ) from None
        return json.loads(response.body) if response.body else None

    async def groups(self) -> list[dict[str, Any]]:
        result = await self._call("GET", "groups")
        return list(result or [])

    async def users(self) -> dict[str, str]:
        """Every hub user's name and ``created`` time (as the hub writes it), read page by
        page until an empty one (the hub caps a page at its ``api_page_max_limit``)."""
        found: dict[str, str] = {}
        while True:
            page = await self._call("GET", f"users?offset={len(found)}&limit=200")
            before = len(found)
            for model in page or []:
                found[str(model["name"])] = str(model.get("created") or "")
            if len(found) == before:
                return found

    async def user_exists(self, name: str) -> bool:
        return await self.user(name) is not None

    async def user(self, name: str) -> dict[str, Any] | None:
        """The hub's model of a user (``admin``, ``roles``, ``groups``), None if there is none."""
        model = await self._call("GET", f"users/{quote(name, safe='')}", ok=[404])
        return model if isinstance(model, dict) else None

    async def create_users(self, names: list[str]) -> None:
        if names:
            await self._call("POST", "users", {"usernames": names})

    async def delete_user(self, name: str) -> None:
        await self._call("DELETE", f"users/{quote(name, safe='')}", ok=[404])

    async def create_group(self, name: str, users: list[str]) -> None:
        await self._call("POST", f"groups/{quote(name, safe='')}", {"users": users})

    async def set_properties(self, name: str, properties: dict[str, Any]) -> None:
        await self._call("PUT", f"groups/{quote(name, safe='')}/properties", properties)

    async def add_users(self, name: str, users: list[str]) -> None:
        await self._call("POST", f"groups/{quote(name, safe='')}/users", {"users": users})

    async def remove_users(self, name: str, users: list[str]) -> None:
        await self._call("DELETE", f"groups/{quote(name, safe='')}/users", {"users": users})

    async def delete_group(self, name: str) -> None:
        await self._call("DELETE", f"groups/{quote(name, safe='')}", ok=[404])


class ClassRegistry:
    """Every class, from nbjobs.yaml and (in a hub) from the hub's groups.

    Reads are synchronous and served from a cache that :meth:`refresh` fills
    (the API handlers refresh before each request, at most every ``max_age``
    seconds); changes made through this registry update the cache at once.
    """

    def __init__(
        self,
        config: NbjobsConfig,
        hub: HubGroups | None = None,
        log: logging.Logger | None = None,
        max_age: float = 10.0,
    ) -> None:
        self.config = config
        self.hub = hub
        self.log = log or logging.getLogger("nbjobs.job_service")
        self.max_age = max_age
        self._hub_classes: dict[str, ClassInfo] = {}
        #: each hub class's group (its namespaced one, but for a class not yet moved)
        self._group_of: dict[str, str] = {}
        self._all_groups: set[str] = set()
        #: groups outside the classes' namespace that never count either (see
        #: :meth:`uncounted_groups`)
        self._uncounted: frozenset[str] = frozenset()
        #: what the admin should know about classes and groups (log and dashboard)
        self._moves: list[str] = []
        self._stale: list[str] = []
        self._fetched = 0.0
        self._reading = asyncio.Lock()
        #: asks the hub for an invitation to each account a roster created (set by the
        #: service: job_service/invitations.py); None: none are asked for
        self.invite_new: Callable[[list[str]], Awaitable[list[InvitationInfo]]] | None = None

    # -- reading ---------------------------------------------------------------

    async def refresh(self, force: bool = False) -> None:
        """Re-read the hub's groups if the cache is older than ``max_age``."""
        if self.hub is None or (not force and time.monotonic() - self._fetched < self.max_age):
            return
        async with self._reading:  # one read (and move of old classes) at a time
            if force or time.monotonic() - self._fetched >= self.max_age:
                await self._read(self.hub)

    async def _read(self, hub: HubGroups) -> None:
        try:
            groups = await hub.groups()
        except (ServiceError, OSError) as exc:
            # Keep serving the last known classes rather than failing every request.
            why = exc.message if isinstance(exc, ServiceError) else str(exc)
            never = (
                ""
                if self._fetched
                else (
                    "; until it can, nobody is an admin or a teacher through admin.groups or "
                    "teachers.groups (one of them might be a class of old)"
                )
            )
            self.log.warning("cannot read classes from the hub: %s%s", why, never)
            return
        classes: dict[str, ClassInfo] = {}
        group_of: dict[str, str] = {}
        legacy: dict[str, dict[str, Any]] = {}
        for group in groups:
            settings = (group.get("properties") or {}).get(PROPERTY)
            if not isinstance(settings, dict):
                continue
            name = class_of_group(group["name"])
            if name is None:  # a class from before the namespace: moved below
                name = group["name"]
                legacy[name] = group
                if name in classes:
                    continue  # moved already (the move was cut short): the new group wins
            classes[name] = _from_group(name, group.get("users"), settings)
            group_of[name] = group["name"]
        all_groups = {g["name"] for g in groups}
        meanings = group_meanings(self.config)
        if legacy:
            moved, notes = await move_to_namespace(hub, legacy, all_groups, meanings, self.log)
            for name in moved:
                group_of[name] = class_group(name)
                all_groups = (all_groups - {name}) | {class_group(name)}
            self._moves += notes
            legacy = {n: g for n, g in legacy.items() if n not in moved}
        members = {g["name"]: {str(u) for u in g.get("users") or []} for g in groups}
        stale = stale_yaml_class_groups(self.config, members, meanings)
        said = self.notices()
        self._hub_classes, self._group_of, self._all_groups = classes, group_of, all_groups
        self._uncounted = frozenset(legacy) | frozenset(stale)
        self._stale = list(stale.values())
        for line in self.notices():
            if line not in said:
                self.log.warning("%s", line)
        self._fetched = time.monotonic()

    def uncounted_groups(self) -> frozenset[str]:
        """Hub groups outside the classes' namespace that never count as a caller's group:
        a class not yet moved into it, and the old group of an nbjobs.yaml class that still
        holds its people while nbjobs.yaml gives that name meaning. (Groups in the
        namespace never count either: :func:`nbjobs.class_groups.is_class_group`.) Before
        the hub's groups were first read, when any of them might be a class of old: the
        groups of admin.groups and teachers.groups."""
        if self.hub is not None and not self._fetched:
            return frozenset(self.config.admin.groups) | frozenset(self.config.teachers.groups)
        return self._uncounted

    def notices(self) -> list[str]:
        """What the admin should know about classes and groups: the classes moved into
        their own groups since the start, and every name shared by a class and a group
        that nbjobs.yaml gives meaning to."""
        names = {c.name for c in self.all()}
        return [*self._moves, *self._stale, *name_collisions(names, group_meanings(self.config))]

    def counted(self, groups: Iterable[str]) -> set[str]:
        """Those of a user's hub ``groups`` that count for what nbjobs.yaml gives groups."""
        return {g for g in groups if not is_class_group(g) and g not in self._uncounted}

    def _group(self, name: str) -> str:
        """The hub group of the hub class ``name``."""
        return self._group_of.get(name, class_group(name))

    def all(self) -> list[ClassInfo]:
        """Every class, nbjobs.yaml's first."""
        static = [
            ClassInfo(
                name=c.name,
                teachers=list(c.teachers),
                students=list(c.students),
                flavors=list(c.flavors),
                gpu_hours=c.gpu_hours,
                period=c.period,
                queue=c.queue,
                source="nbjobs.yaml",
            )
            for c in self.config.classes
        ]
        names = {c.name for c in static}
        return static + [c for n, c in sorted(self._hub_classes.items()) if n not in names]

    def get(self, name: str) -> ClassInfo | None:
        return next((c for c in self.all() if c.name == name), None)

    def of_student(self, user: str) -> list[ClassInfo]:
        """The classes a user is a student of."""
        return [c for c in self.all() if user in c.students]

    def queue_for(self, user: str, flavor: str) -> str | None:
        """The queue of ``user``'s jobs on ``flavor`` set by their class: the first class
        (nbjobs.yaml's order) they are a student of that lets them use the flavor and
        names a queue; None if none does."""
        for cls in self.of_student(user):
            if cls.queue and (not cls.flavors or flavor in cls.flavors):
                return cls.queue
        return None

    def taught_by(self, user: str) -> list[ClassInfo]:
        """The classes a user teaches."""
        return [c for c in self.all() if user in c.teachers]

    def teaches(self, teacher: str, student: str) -> bool:
        """Whether ``teacher`` teaches a class ``student`` is in."""
        return any(student in c.students for c in self.taught_by(teacher))

    def visible_to(self, caller: Caller) -> list[ClassInfo]:
        return self.all() if caller.admin else self.taught_by(caller.name)

    # -- changing --------------------------------------------------------------

    def _owned(self, caller: Caller, name: str) -> ClassInfo:
        cls = self.get(name)
        if cls is None or not (caller.admin or caller.name in cls.teachers):
            raise NotFound(f"no class {name!r} of yours; `nbjobs class list` shows your classes")
        if cls.source != "hub":
            raise Conflict(f"class {name!r} is defined in nbjobs.yaml; an admin changes it there")
        return cls

    def _need_hub(self) -> HubGroups:
        if self.hub is None:
            raise Conflict(
                "classes are JupyterHub groups, and this job service runs without a hub; "
                "define classes in nbjobs.yaml instead"
            )
        return self.hub

    def _check_may_teach(self, caller: Caller) -> None:
        if not (caller.admin or caller.teacher):
            raise Forbidden(
                "only teachers may provision classes (your hub account lacks the "
                "custom:nbjobs:teach scope); ask your admin to add you to nbjobs.yaml's teachers"
            )

    async def preview_roster(
        self, caller: Caller, students: list[str], class_name: str | None
    ) -> RosterChecked:
        """What :meth:`create` (or :meth:`add_students` to ``class_name``) would do with
        ``students``: every entry it would refuse, and of the others those already in the
        class and those it would make an account for; nothing changes. The roster form
        asks this as the teacher types, so its preview says what each name would do."""
        self._check_may_teach(caller)
        hub = self._need_hub()
        await self.refresh()
        current = self._owned(caller, class_name).students if class_name is not None else []
        problems: list[RosterProblem] = []
        try:
            await self.check_roster(students, class_name or "")
        except RosterRefused as refused:
            problems = refused.problems
        refused_at = {p.index for p in problems}
        taken = [(i, normalize_username(s)) for i, s in enumerate(students) if i not in refused_at]
        joining = [(i, name) for i, name in taken if name not in current]
        exists = await asyncio.gather(*(hub.user_exists(name) for _, name in joining))
        return RosterChecked(
            problems=problems,
            already=[i for i, name in taken if name in current],
            new_accounts=[i for (i, _), there in zip(joining, exists, strict=True) if not there],
        )

    async def check_roster(self, students: list[str], class_name: str) -> list[str]:
        """The roster's names, normalized, or :class:`RosterRefused` naming every bad entry.

        Names are compared as JupyterHub stores them (stripped, lowercase), so
        ``Ada`` and ``ada`` are one student listed twice. A student must be a
        plain user: nobody who administers nbjobs or the hub, teaches (nbjobs.yaml,
        a class, or a hub role), or is a student of another class, since a
        class's teachers see and cancel its students' jobs and choose their
        flavors. Nothing is changed here; the caller changes the hub only when
        this returns.
        """
        problems: list[RosterProblem] = []
        seen: dict[str, int] = {}
        for index, raw in enumerate(students):
            name = normalize_username(raw)
            if not USER_NAME.match(name):
                problems.append(
                    RosterProblem(
                        index=index,
                        student=raw,
                        reason="not a valid user name (letters, digits and . _ @ + -)",
                    )
                )
            elif name in seen:
                first = seen[name]
                spelled = students[first].strip()
                also = ""
                if spelled != raw.strip():
                    also = f", {spelled!r}; names are not case-sensitive"
                problems.append(
                    RosterProblem(
                        index=index,
                        student=raw.strip(),
                        reason=f"listed twice (first as entry {first + 1}{also})",
                    )
                )
            else:
                seen[name] = index
        refusals = await asyncio.gather(
            *(self._why_not_a_student(name, class_name) for name in seen)
        )
        for (name, index), reason in zip(seen.items(), refusals, strict=True):
            if reason:
                problems.append(RosterProblem(index=index, student=name, reason=reason))
        if problems:
            problems.sort(key=lambda p: p.index)
            raise RosterRefused(problems)
        return list(seen)

    async def _why_not_a_student(self, name: str, class_name: str) -> str | None:
        """Why ``name`` may not be a student of ``class_name`` (None: they may)."""
        other = next((c for c in self.of_student(name) if c.name != class_name), None)
        if other is not None:
            return f"already a student of class {other.name!r}"
        refuse = "; a class's students may not be teachers or admins"
        taught = self.taught_by(name)
        admins, teachers = self.config.admin, self.config.teachers
        if name in admins.users:
            return "an nbjobs admin" + refuse
        if name in teachers.users or taught:
            where = f"class {taught[0].name!r}" if taught else "nbjobs.yaml"
            return f"a teacher ({where})" + refuse
        model = await self.hub.user(name) if self.hub is not None else None
        if model is None:
            return None  # a new account: the roster creates it
        if model.get("admin"):
            return "a JupyterHub admin" + refuse
        groups = self.counted(model.get("groups") or [])
        if groups & set(admins.groups):
            return f"in admin group {sorted(groups & set(admins.groups))[0]!r}" + refuse
        if groups & set(teachers.groups):
            return f"in teachers' group {sorted(groups & set(teachers.groups))[0]!r}" + refuse
        # Any hub role beyond every user's may carry admin or teaching scopes.
        roles = sorted(set(model.get("roles") or []) - {"user"})
        if roles:
            return f"holds the JupyterHub role {roles[0]!r}" + refuse
        return None

    async def _may_teach(self, name: str) -> bool:
        """Whether the hub user ``name`` may teach: named a teacher (or admin) in
        nbjobs.yaml, a hub admin, in a teachers' or admins' group, or holding a role
        that teaches."""
        config = self.config
        if name in config.teachers.users or name in config.admin.users:
            return True
        if any(name in cls.teachers for cls in config.classes):
            return True
        model = await self.hub.user(name) if self.hub is not None else None
        if model is None:
            return False
        if model.get("admin"):
            return True
        groups = self.counted(model.get("groups") or [])
        if groups & (set(config.teachers.groups) | set(config.admin.groups)):
            return True
        return bool({"nbjobs-teachers", "nbjobs-admins"} & set(model.get("roles") or []))

    def _check_settings(self, request: CreateClass) -> float | None:
        """The class's GPU-hours per student (the admin's cap when the teacher gave none)."""
        teachers = self.config.teachers
        names = [f.name for f in self.config.flavors]
        allowed = teachers.flavors or names
        bad = [f for f in request.flavors if f not in allowed]
        if bad:
            raise Invalid(
                f"flavor(s) {', '.join(bad)} cannot be given to a class; "
                f"teachers may give: {', '.join(allowed)}"
            )
        cap = teachers.max_gpu_hours
        if cap is not None and request.gpu_hours is not None and request.gpu_hours > cap:
            raise Invalid(
                f"a class may have at most {cap:g} GPU-hours per student in "
                f"{PERIOD_WORDS[request.period]}; "
                f"pass --gpu-hours {cap:g} or less"
            )
        return request.gpu_hours if request.gpu_hours is not None else cap

    async def create(self, caller: Caller, request: CreateClass) -> ClassInfo:
        """Create the class's group with its students; all of it or nothing."""
        self._check_may_teach(caller)
        hub = self._need_hub()
        if not CLASS_NAME.match(request.name):
            raise Invalid(
                f"class name {request.name!r} must be lowercase letters, digits, '-' and '_' "
                "(at most 63), like 'ml101'"
            )
        gpu_hours = self._check_settings(request)
        # The class's group is in the classes' namespace: whatever nbjobs.yaml gives a group
        # named like the class, now or later, its students get none of it.
        group = class_group(request.name)
        await self.refresh(force=True)
        if self.get(request.name) is not None or group in self._all_groups:
            raise Conflict(f"a class named {request.name!r} exists; pick another name")
        students = await self.check_roster(request.students, request.name)
        teachers = sorted({caller.name, *request.teachers} - {"", *students})
        bad_teachers = [t for t in teachers if not USER_NAME.match(t)]
        if bad_teachers:
            raise Invalid(f"not a valid teacher name: {', '.join(bad_teachers)}")
        if not caller.admin:
            co = [t for t in teachers if t != caller.name]
            may = await asyncio.gather(*(self._may_teach(t) for t in co))
            not_teachers = [t for t, ok in zip(co, may, strict=True) if not ok]
            if not_teachers:
                raise Invalid(
                    f"{', '.join(not_teachers)} may not teach here (no teacher role): a class's "
                    "co-teachers must be teachers already; ask an admin to make them one"
                )
        created = await self._ensure_users(hub, [*students, *teachers])
        info = ClassInfo(
            name=request.name,
            teachers=teachers,
            students=students,
            flavors=list(request.flavors),
            gpu_hours=gpu_hours,
            period=request.period,
        )
        try:
            await hub.create_group(group, students)
            await hub.set_properties(group, {PROPERTY: _settings(info)})
        except ServiceError:
            await hub.delete_group(group)
            for name in created:
                await hub.delete_user(name)
            raise
        self._hub_classes[info.name] = info
        self._group_of[info.name] = group
        self._all_groups.add(group)
        self.log.info(
            "class %s created by %s with %d students", info.name, caller.name, len(students)
        )
        return await self._with_invitations(info, created)

    async def add_students(self, caller: Caller, name: str, students: list[str]) -> ClassInfo:
        """Add students (all or none) to a class the caller teaches."""
        hub = self._need_hub()
        await self.refresh(force=True)
        cls = self._owned(caller, name)
        wanted = await self.check_roster(students, name)
        new = [s for s in wanted if s not in cls.students]
        created: list[str] = []
        if new:
            created = await self._ensure_users(hub, new)
            await hub.add_users(self._group(name), new)
        info = cls.model_copy(update={"students": [*cls.students, *new]})
        self._hub_classes[name] = info
        return await self._with_invitations(info, created)

    async def remove_students(self, caller: Caller, name: str, students: list[str]) -> ClassInfo:
        """Take students out of a class the caller teaches (their jobs stay theirs)."""
        hub = self._need_hub()
        await self.refresh(force=True)
        cls = self._owned(caller, name)
        students = [normalize_username(s) for s in students]
        unknown = [s for s in students if s not in cls.students]
        if unknown:
            raise RosterRefused(
                [
                    RosterProblem(index=i, student=s, reason=f"not a student of class {name!r}")
                    for i, s in enumerate(students)
                    if s in unknown
                ]
            )
        await hub.remove_users(self._group(name), students)
        info = cls.model_copy(update={"students": [s for s in cls.students if s not in students]})
        self._hub_classes[name] = info
        return info

    async def delete(self, caller: Caller, name: str) -> None:
        """Delete a class the caller teaches: the group goes, users and jobs stay."""
        hub = self._need_hub()
        await self.refresh(force=True)
        self._owned(caller, name)
        group = self._group(name)
        await hub.delete_group(group)
        self._hub_classes.pop(name, None)
        self._group_of.pop(name, None)
        self._all_groups.discard(group)
        self.log.info("class %s deleted by %s", name, caller.name)

    async def _with_invitations(self, info: ClassInfo, created: list[str]) -> ClassInfo:
        """``info`` with the invitations of the accounts this change ``created`` (its
        answer's: the cache keeps none)."""
        if not created or self.invite_new is None:
            return info
        return info.model_copy(update={"invitations": await self.invite_new(created)})

    async def _ensure_users(self, hub: HubGroups, names: list[str]) -> list[str]:
        """Create the hub accounts a roster names that do not exist yet; return those."""
        missing = [n for n in names if not await hub.user_exists(n)]
        await hub.create_users(missing)
        return missing


def normalize_username(name: str) -> str:
    """A roster's name as JupyterHub stores it: no surrounding blanks, lowercase."""
    return name.strip().lower()


def _settings(info: ClassInfo) -> dict[str, Any]:
    return {
        "teachers": info.teachers,
        "flavors": info.flavors,
        "gpu_hours": info.gpu_hours,
        "period": info.period,
    }


def _from_group(name: str, users: Any, settings: dict[str, Any]) -> ClassInfo:
    period = settings.get("period")
    hours = settings.get("gpu_hours")
    return ClassInfo(
        name=name,
        teachers=[str(t) for t in settings.get("teachers") or []],
        students=[str(u) for u in users or []],
        flavors=[str(f) for f in settings.get("flavors") or []],
        gpu_hours=float(hours) if isinstance(hours, int | float) else None,
        period=period if period in ("day", "week", "month") else "week",
    )

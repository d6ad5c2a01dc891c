"""``nbjobs.yaml``: the one file admins and teachers edit, its schema and its loader.

Shared by the job service, the spawner and the hub config (DESIGN.md: one
schema). A file that does not validate is refused as a whole, with the line
and a sentence saying what is wrong; nothing is half-applied.

A minimal file (everything else has a default)::

    flavors:
      - name: gpu
        gpus: 1

The whole file is :class:`NbjobsConfig` and its loader :func:`parse_config`, here; its
sections' models live by concern (every name importable from ``nbjobs.config``):
:mod:`.values` (durations, quantities, sizes, the models' base), :mod:`.backends`
(storage, database, the local and Kubernetes backends), :mod:`.limits` (request and
output limits, telemetry, credits), :mod:`.services` (network rules, schedules,
notifications), :mod:`.flavors` (flavors, their policies, profiles) and :mod:`.people`
(quotas, classes, teachers, admins, users).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from ..class_groups import class_group_named
from ..engines import SCHEDULERS, scheduler_name

# the models and helpers by section, all importable from nbjobs.config as they always were
from .backends import *  # noqa: F403
from .backends import BackendConfig, DatabaseConfig, StorageConfig
from .flavors import *  # noqa: F403
from .flavors import Flavor, Profile
from .limits import *  # noqa: F403
from .limits import CreditsConfig, LimitsConfig, OutputsConfig, TelemetryConfig
from .people import *  # noqa: F403
from .people import AdminConfig, ClassConfig, QuotaConfig, TeachersConfig, UsersConfig
from .services import *  # noqa: F403
from .services import NetworkConfig, NotificationsConfig, SchedulesConfig
from .values import *  # noqa: F403
from .values import ConfigError, _Model


class NbjobsConfig(_Model):
    """The whole of ``nbjobs.yaml``."""

    #: users' folders: where they are, and how pods mount them
    storage: StorageConfig = StorageConfig()
    #: where the job service keeps its job records
    database: DatabaseConfig = DatabaseConfig()
    #: where jobs run: on this machine, or as Kubernetes Jobs
    backend: BackendConfig = BackendConfig()
    #: what jobs run on; a list here replaces the built-in one, a CPU-only flavor ``cpu``
    flavors: list[Flavor] = [Flavor(name="cpu", display_name="CPU only", gpus=0)]
    #: notebook server sizes offered at spawn on Kubernetes (KubeSpawner's ``profile_list``); a
    #: list here replaces the built-in ``default`` (1 CPU, 2Gi)
    profiles: list[Profile] = [Profile(name="default", display_name="Default", default=True)]
    #: limits per user: by default, by group and for named users
    quotas: QuotaConfig = QuotaConfig()
    #: classes admins declare (teachers cannot change them; teachers' own classes live in the hub)
    classes: list[ClassConfig] = []
    #: who may provision classes, and what they may give them
    teachers: TeachersConfig = TeachersConfig()
    #: who administers nbjobs besides JupyterHub admins
    admin: AdminConfig = AdminConfig()
    #: how big a request, a notebook and its parameters may be, and the output a job keeps
    limits: LimitsConfig = LimitsConfig()
    #: where executed notebooks are written, and in which forms
    outputs: OutputsConfig = OutputsConfig()
    #: limits of job definitions that run on a schedule
    schedules: SchedulesConfig = SchedulesConfig()
    #: mail and webhooks when jobs end or wait long
    notifications: NotificationsConfig = NotificationsConfig()
    #: what each job's runner samples (GPUs, CPU, memory) and how often
    telemetry: TelemetryConfig = TelemetryConfig()
    #: where jobs and notebook servers may connect to, and people sign in from
    network: NetworkConfig = NetworkConfig()
    #: accounts that pay for jobs on priced flavors
    credits: CreditsConfig = CreditsConfig()
    #: what becomes of a deleted hub user's jobs, definitions, settings, folder and account
    users: UsersConfig = UsersConfig()

    @model_validator(mode="after")
    def _consistent(self) -> NbjobsConfig:
        names = [f.name for f in self.flavors]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"flavor names must be unique; repeated: {', '.join(dupes)}")
        unknown = [f for f in self.teachers.flavors if f not in names]
        if unknown:
            raise ValueError(
                f"teachers.flavors lists unknown flavor(s) {', '.join(unknown)}; "
                f"flavors are: {', '.join(names)}"
            )
        for cls in self.classes:
            unknown = [f for f in cls.flavors if f not in names]
            if unknown:
                raise ValueError(
                    f"class {cls.name!r} lists unknown flavor(s) {', '.join(unknown)}; "
                    f"flavors are: {', '.join(names)}"
                )
        email = self.notifications.email
        if email is not None and email.password_env in self.backend.local.pass_env:
            raise ValueError(
                f"backend.local.pass_env lists {email.password_env}, the mail password "
                "(notifications.email.password_env): every job would get it; remove it"
            )
        if self.backend.kind == "kubernetes" and self.backend.kubernetes.kueue is None:
            self._check_queues_have_an_engine()
        if self.credits.enabled:
            for index, flavor in enumerate(self.flavors):
                if flavor.cost_per_gpu_hour and flavor.gpus and flavor.time_limit is None:
                    _refuse_at(
                        ("flavors", index, "time_limit"),
                        f"flavor {flavor.name!r} has a price and no time limit, so with "
                        "credits on no job of it could be paid for before it runs: give "
                        "it a time_limit",
                    )
        if self.backend.kind == "kubernetes":
            self._check_gangs()
        named = class_group_named(self)
        if named is not None:
            _refuse_at(*named)
        if self.backend.kind == "local":
            for kind in ("jobs", "servers"):
                if getattr(self.network, kind).egress is not None:
                    _refuse_at(
                        ("network", kind, "egress"),
                        f"nbjobs cannot enforce egress rules for {kind} on one machine: its "
                        "processes share the machine's network. Remove network."
                        f"{kind}.egress (a firewall of the machine applies to everyone), or "
                        "run on Kubernetes with a network plugin that enforces "
                        "NetworkPolicies (Calico, Cilium)",
                    )
        return self

    def _check_gangs(self) -> None:
        """A multi-node flavor's pods must start together: Kueue admits a whole Job or
        JobSet, KAI Scheduler gangs a JobSet's pods; Volcano gangs only its own PodGroups,
        which nbjobs does not make, and KAI leaves a plain Job's pods apart."""
        multi_node = self.backend.kubernetes.multi_node
        for index, flavor in enumerate(self.flavors):
            if flavor.nodes < 2:
                continue
            scheduler = scheduler_name(flavor.scheduler)
            if scheduler == SCHEDULERS["volcano"]:
                _refuse_at(
                    ("flavors", index, "nodes"),
                    f"flavor {flavor.name!r} runs on {flavor.nodes} nodes with Volcano, which "
                    "starts pods together only in a PodGroup nbjobs does not make: drop "
                    "scheduler: volcano from it (Kueue, if on, then admits all its pods at "
                    "once) or use scheduler: kai",
                )
            if scheduler == SCHEDULERS["kai"] and multi_node != "jobset":
                _refuse_at(
                    ("flavors", index, "nodes"),
                    f"flavor {flavor.name!r} runs on {flavor.nodes} nodes with KAI Scheduler, "
                    "which starts a JobSet's pods together but schedules an Indexed Job's "
                    "one by one: set backend.kubernetes.multi_node: jobset",
                )

    def _check_queues_have_an_engine(self) -> None:
        """A queue means something only to Kueue, KAI or Volcano: refuse one that would
        be ignored (a flavor for the default scheduler, with Kueue off)."""
        for index, flavor in enumerate(self.flavors):
            if flavor.queue and scheduler_name(flavor.scheduler) is None:
                _refuse_at(
                    ("flavors", index, "queue"),
                    f"queue {flavor.queue} needs a queueing engine: set scheduler: kai or "
                    "volcano, or turn on Kueue (backend.kubernetes.kueue)",
                )
        for index, cls in enumerate(self.classes):
            if not cls.queue:
                continue
            flavors = [f for f in self.flavors if not cls.flavors or f.name in cls.flavors]
            if not any(scheduler_name(f.scheduler) for f in flavors):
                _refuse_at(
                    ("classes", index, "queue"),
                    f"class {cls.name!r}: queue {cls.queue} needs a queueing engine: none of "
                    "its flavors sets scheduler: kai or volcano, and Kueue is off "
                    "(backend.kubernetes.kueue)",
                )

    def flavor(self, name: str) -> Flavor | None:
        """The flavor called ``name``, if any."""
        return next((f for f in self.flavors if f.name == name), None)


def _refuse_at(location: tuple[str | int, ...], message: str) -> None:
    """Refuse the file with ``message`` about the setting at ``location`` (so that the
    error names that setting and its line, not the whole file)."""
    error = PydanticCustomError("value_error", "{message}", {"message": message})
    raise ValidationError.from_exception_data(
        "NbjobsConfig", [InitErrorDetails(type=error, loc=location, input=None)]
    )


#: an environment variable whose database URL takes the place of nbjobs.yaml's
#: ``database.url`` (never passed on to a job: see ``is_service_secret``)
DATABASE_URL_ENV = "NBJOBS_DATABASE_URL"


def command_config_path(given: str | None) -> str:
    """The nbjobs.yaml an admin's command reads: the one it was given, else
    ``$NBJOBS_CONFIG``, else ``nbjobs.yaml`` in the current folder."""
    return given or os.environ.get("NBJOBS_CONFIG") or "nbjobs.yaml"


def load_config(path: str | Path | None) -> NbjobsConfig:
    """Read and validate ``nbjobs.yaml``; ``None`` gives the defaults.

    Relative paths in the file (storage root, a SQLite database) are taken
    relative to the file's folder. Raises :class:`ConfigError` with the line.
    """
    if path is None:
        return NbjobsConfig()
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the file: {exc.strerror}", path=str(path)) from None
    config = parse_config(text, source=str(path))
    url = os.environ.get(DATABASE_URL_ENV)
    if url:
        # the URL with its password, from a Secret (the Helm chart's database.existingSecret)
        # rather than the file, which is a ConfigMap on a cluster
        config = config.model_copy(update={"database": DatabaseConfig(url=url)})
    return _anchor_paths(config, path.parent.absolute())


#: libyaml's safe loader where PyYAML was built with it (ten times quicker: the service,
#: every command and every test read nbjobs.yaml), else PyYAML's own
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_config(text: str, source: str = "nbjobs.yaml") -> NbjobsConfig:
    """Validate YAML text; :class:`ConfigError` names the line of the first problem."""
    try:
        try:
            data = yaml.load(text, Loader=_YAML_LOADER)
        except yaml.MarkedYAMLError:
            # PyYAML's own loader points at the line where the mistake was made (libyaml
            # at where it noticed): its words, for the error
            data = yaml.load(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        raise ConfigError(f"not valid YAML: {exc.problem}", path=source, line=line) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            "the file must be a mapping of sections (storage:, flavors:, ...)", path=source, line=1
        )
    try:
        return NbjobsConfig.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        location = tuple(error["loc"])
        # the nodes, with their lines, only for an error to point at
        line = _line_of(yaml.compose(text, Loader=_YAML_LOADER), location)
        where = ".".join(str(p) for p in location)
        reason = _reason(error)
        message = f"{where}: {reason}" if where else reason
        raise ConfigError(message, path=source, line=line) from None


def _reason(error: Any) -> str:
    message = str(error["msg"])
    message = message.removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        return "unknown setting (check its spelling and indentation)"
    if error["type"] == "missing":
        return "required setting is missing"
    return message


def _line_of(node: yaml.Node | None, location: tuple[Any, ...]) -> int | None:
    """The 1-based line of the YAML node at ``location`` (or its nearest parent)."""
    line = node.start_mark.line + 1 if node is not None else None
    for part in location:
        child = None
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if key.value == str(part):
                    child = value
                    break
        elif (
            isinstance(node, yaml.SequenceNode)
            and isinstance(part, int)
            and 0 <= part < len(node.value)
        ):
            child = node.value[part]
        if child is None:
            break
        node = child
        line = node.start_mark.line + 1
    return line


def _anchor_paths(config: NbjobsConfig, base: Path) -> NbjobsConfig:
    storage = config.storage
    if not storage.root.is_absolute():
        storage = storage.model_copy(update={"root": base / storage.root})
    database = config.database
    prefix = "sqlite:///"
    if database.url.startswith(prefix) and not database.url.startswith(prefix + "/"):
        rest = database.url[len(prefix) :]
        if rest and rest != ":memory:":
            database = database.model_copy(update={"url": prefix + str(base / rest)})
    return config.model_copy(update={"storage": storage, "database": database})

"""Sphinx directives that write nbjobs' references from the code at build time.

Each directive builds reStructuredText from what the code says (the nbjobs.yaml
models and their ``#:`` comments, the command lines' argparse parsers, the
runner's exit codes, the job states' transitions, the configurable classes) and
parses it in place, so a reference cannot drift from the code. Something the
code leaves undocumented (a key without a comment, a section nobody claims to
read) is a build warning, and ``scripts/docs.sh`` fails on warnings.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import pkgutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.pycode import ModuleAnalyzer
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

REPO = Path(__file__).resolve().parents[2]
LOG = logging.getLogger(__name__)

#: which parts of nbjobs act on each part of nbjobs.yaml (the longest matching path wins)
READ_BY = {
    "storage": "job service (job folders, outputs), spawners (the user's volume), job pods",
    "database": "job service",
    "backend": "job service",
    "backend.local": "job service (local backend)",
    "backend.kubernetes": "job service (Kubernetes backend)",
    "flavors": "job service (queue, quotas, manifests), Submit dialog (via api/flavors)",
    "flavors[].kernels": "job service (checked at submit), Submit dialog (kernel picker)",
    "profiles": "spawners (the server options form at spawn)",
    "quotas": "job service (queue and quotas)",
    "classes": "hub config (groups and roles), job service (flavors and budgets)",
    "teachers": "hub config (roles), job service (what teachers may do)",
    "admin": "hub config (roles), job service, dashboard",
    "limits": "job service (request and notebook sizes); runner (output it keeps)",
    "outputs": "job service (where results go), Submit dialog (its default)",
    "telemetry": "runner (sampling), job service (hints, idle GPUs, Prometheus)",
    "schedules": "job service (the schedule ticker, definitions API)",
    "notifications": "job service (the outbox: mail and webhooks)",
    "network": "job service (the jobs' NetworkPolicy), nbjobs network-policies (the servers')",
    "network.sign_in": "hub (each login, through Authenticator.post_auth_hook)",
    "credits": "job service (holds at submission, charges at the end, grants, statements)",
    "users": "job service (retiring a user deleted or made again in the hub: records, files)",
}


def _config_module() -> Any:
    import nbjobs.config

    return nbjobs.config


def _attr_docs(module: str) -> dict[tuple[str, str], list[str]]:
    """The ``#:`` comments of a module's attributes, and of its submodules' for a
    package (nbjobs.config keeps its sections' models in modules of their own)."""
    docs = dict(ModuleAnalyzer.for_module(module).find_attr_docs())
    package = importlib.import_module(module)
    for sub in pkgutil.iter_modules(getattr(package, "__path__", [])):
        docs.update(ModuleAnalyzer.for_module(f"{module}.{sub.name}").find_attr_docs())
    return docs


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _model_of(prop: dict[str, Any], defs: dict[str, Any]) -> tuple[str, str] | None:
    """(the model's name, how it nests: "" | "[]" | "{}") when the property holds one."""
    if "$ref" in prop:
        return prop["$ref"].rsplit("/", 1)[1], ""
    for option in prop.get("anyOf", []):
        found = _model_of(option, defs)
        if found:
            return found
    if prop.get("type") == "array" and isinstance(prop.get("items"), dict):
        found = _model_of(prop["items"], defs)
        return (found[0], "[]") if found and not found[1] else None
    extra = prop.get("additionalProperties")
    if prop.get("type") == "object" and isinstance(extra, dict):
        found = _model_of(extra, defs)
        return (found[0], "{}") if found and not found[1] else None
    return None


def _type_text(prop: dict[str, Any], defs: dict[str, Any]) -> str:
    if "$ref" in prop:
        return "mapping (below)"
    if "enum" in prop:
        return "one of " + ", ".join(f"``{json.dumps(v)}``" for v in prop["enum"])
    if "const" in prop:
        return f"``{json.dumps(prop['const'])}``"
    if "anyOf" in prop:
        texts: list[str] = []
        for option in prop["anyOf"]:
            text = _type_text(option, defs)
            if text not in texts:
                texts.append(text)
        return " or ".join(texts)
    kind = prop.get("type")
    if kind == "array":
        items = prop.get("items")
        return "list" + (f" of {_type_text(items, defs)}" if items else "")
    if kind == "object":
        extra = prop.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            return f"mapping of name to {_type_text(extra, defs)}"
        return "mapping"
    words = {"string": "text", "integer": "integer", "number": "number", "boolean": "true/false"}
    if kind == "null":
        return "null"
    return words.get(str(kind), str(kind))


def _yaml(path: Path) -> Any:
    """A YAML file's data, read by libyaml where PyYAML has it: the pure-Python reader
    took a tenth of the site's build on the API's spec alone."""
    return yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _examples() -> dict[str, Any]:
    """The first value each key has in the example nbjobs.yaml files (real, validated)."""
    found: dict[str, Any] = {}

    def walk(value: Any, path: str) -> None:
        if path and path not in found:
            found[path] = value
        if isinstance(value, dict):
            for key, inner in value.items():
                walk(inner, f"{path}.{key}" if path else str(key))
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    walk(item, path + "[]")

    folder = REPO / "hub_config" / "examples"
    for path in sorted(folder.glob("*.yaml")) + sorted((folder / "gpu-sharing").glob("*.yaml")):
        walk(_yaml(path) or {}, "")
    return found


def _placed(path: str, value: Any) -> str:
    """``value`` as YAML, nested where ``path`` (``flavors[].gpus``) puts it."""
    node: Any = value
    for part in reversed(path.split(".")):
        if part.endswith("[]"):
            node = {part[:-2]: [node]}
        elif part.endswith("{}"):
            node = {part[:-2]: {"NAME": node}}
        else:
            node = {part: node}
    return yaml.safe_dump(node, sort_keys=False, default_flow_style=False).rstrip()


def _read_by(path: str) -> str | None:
    key = path.replace("{}", "")
    best = None
    for prefix in READ_BY:
        if (key == prefix or key.startswith(prefix + ".") or key.startswith(prefix + "[")) and (
            best is None or len(prefix) > len(best)
        ):
            best = prefix
    return READ_BY[best] if best else None


def label_of(path: str) -> str:
    """The cross-reference label of a key: ``flavors[].gpus`` -> ``config-flavors-gpus``."""
    return "config-" + path.replace("[]", "").replace("{}", "").replace(".", "-").lower()


def config_keys() -> Iterator[tuple[str, str, dict[str, Any], str, str | None]]:
    """Every key of nbjobs.yaml: (path, the model that has it, its schema, field, model)."""
    config = _config_module()
    schema = config.NbjobsConfig.model_json_schema()
    defs = schema.get("$defs", {})

    def walk(model: str, props: dict[str, Any], prefix: str) -> Iterator[Any]:
        cls = getattr(config, model)
        by_alias = {(f.alias or name): name for name, f in cls.model_fields.items()}
        for key, prop in props.items():
            path = f"{prefix}.{key}" if prefix else key
            inner = _model_of(prop, defs)
            yield path, model, prop, by_alias[key], inner[0] if inner else None
            if inner:
                sub = _resolve({"$ref": f"#/$defs/{inner[0]}"}, defs)
                yield from walk(inner[0], sub.get("properties", {}), path + inner[1])

    yield from walk("NbjobsConfig", schema["properties"], "")


class ConfigReference(SphinxDirective):
    """Every nbjobs.yaml key: type, default, example, what it does, which part reads it."""

    def run(self) -> list[nodes.Node]:
        config = _config_module()
        docs = _attr_docs("nbjobs.config")
        examples = _examples()
        defs = config.NbjobsConfig.model_json_schema().get("$defs", {})
        keys = list(config_keys())
        # ":class:`ProfileOverride`" in a comment: a link to the key that holds one
        where = {}
        for path, _, _, _, inner in keys:
            where.setdefault(inner, path)
        lines: list[str] = []
        for path, model, prop, field, inner in keys:
            top = "." not in path and "[]" not in path and "{}" not in path
            text = docs.get((model, field))
            if not text and inner:
                # the model's own docstring (not one it inherits from pydantic)
                doc = inspect.cleandoc(getattr(config, inner).__dict__.get("__doc__") or "")
                text = doc.split("\n\n")[0].splitlines()
            if not text:
                LOG.warning("nbjobs.yaml key %s (%s.%s) has no #: comment", path, model, field)
                text = []
            lines += [f".. _{label_of(path)}:", ""]
            if top:
                if _read_by(path) is None:
                    LOG.warning("nbjobs.yaml section %s: READ_BY does not say who reads it", path)
                title = f"``{path}``"
                lines += [title, "-" * len(title), ""]
            else:
                lines += [f".. rubric:: ``{path}``", ""]
            said = " ".join(t.strip() for t in text)
            for name, place in where.items():
                if name:
                    said = said.replace(f":class:`{name}`", f":ref:`{place} <{label_of(place)}>`")
            lines += [said, ""]
            rows = [("Type", _type_text(prop, defs))]
            default = prop.get("default")
            if "default" in prop and not inner:
                rows.append(("Default", f"``{json.dumps(default)}``"))
            elif "default" not in prop and not inner:
                rows.append(("Default", "none: required"))
            if top or inner is None:
                rows.append(("Read by", _read_by(path) or "?"))
            lines += [".. list-table::", "   :class: nbjobs-reference", "   :widths: 15 85", ""]
            for name, value in rows:
                lines += [f"   * - {name}", f"     - {value}"]
            lines.append("")
            example = examples.get(path)
            if example is None and not inner and default not in (None, [], {}, ""):
                example = default
            if example is not None and not (inner and isinstance(example, dict | list)):
                lines += [".. code-block:: yaml", ""]
                lines += ["   " + line for line in _placed(path, example).splitlines()]
                lines.append("")
        return _parse(self, lines)


def _parse(directive: SphinxDirective, lines: list[str]) -> list[nodes.Node]:
    # Titles made here become sections of the page: parsed with the page's own state.
    holder = nodes.section()
    holder.document = directive.state.document
    content = StringList(lines, source=directive.get_source_info()[0])
    nested_parse_with_titles(directive.state, content, holder)
    return list(holder.children)


# -- the command line ----------------------------------------------------------------


def _cli_slug(name: str) -> str:
    return name.replace(" ", "-")


class CliReference(SphinxDirective):
    """``nbjobs`` and each of its commands, from their argparse parsers."""

    def run(self) -> list[nodes.Node]:
        from nbjobs.cli import COMMANDS, command_parsers, usage
        from nbjobs.client.cli import EXIT_CODES

        module = sys.modules[__name__]
        lines = [".. code-block:: text", ""]
        lines += ["   " + line for line in usage().splitlines()]
        lines += ["", ".. _cli-exit-codes:", "", "Exit codes", "-" * 10, ""]
        lines += ["The commands that talk to the job service exit with:", ""]
        lines += [".. list-table::", "   :header-rows: 1", "   :widths: 10 90", ""]
        lines += ["   * - code", "     - means"]
        for code, text in EXIT_CODES.items():
            lines += [f"   * - {code}", f"     - {text}"]
        lines.append("")
        for name, command in COMMANDS.items():
            group = command_parsers(name)
            title = f"nbjobs {name}"
            lines += [f".. _cli-{_cli_slug(name)}:", "", title, "-" * len(title), ""]
            lines += [command.help[0].upper() + command.help[1:] + ".", ""]
            if name == "service":
                lines += [
                    "A traitlets application: every option below is also a setting in a",
                    "config file (``--config`` names the nbjobs.yaml). All its configurable",
                    "traits are in :ref:`service-options`.",
                    "",
                    ".. nbjobs-service-flags::",
                    "",
                ]
            if not group and name != "service":
                LOG.warning("nbjobs %s: no parser named in nbjobs.cli.COMMANDS", name)
            for sub in group:  # each built afresh when asked (its help is escaped in place)
                attr = "parser_" + _cli_slug(sub).replace("-", "_")
                made = lambda name=name, sub=sub: _plain_help(command_parsers(name)[sub])  # noqa: E731
                setattr(module, attr, made)
                if sub != name:
                    title = f"nbjobs {sub}"
                    lines += [f".. _cli-{_cli_slug(sub)}:", "", title, "~" * len(title), ""]
                lines += [
                    ".. argparse::",
                    f"   :module: {__name__}",
                    f"   :func: {attr}",
                    f"   :prog: nbjobs {sub}",
                    "   :noepilog:",
                    "",
                ]
        return _parse(self, lines)


def _escaped(text: str | None) -> str | None:
    """Help text as reStructuredText reads it literally (``'0 2 * * *'`` is no emphasis)."""
    if not text:
        return text
    for char in ("\\", "*", "`", "|"):
        text = text.replace(char, "\\" + char)
    return text


def _plain_help(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The parser with its help texts escaped for sphinx-argparse (which reads them as
    reStructuredText), its sub-commands' too."""
    parser.description = _escaped(parser.description)
    for action in parser._actions:
        action.help = _escaped(action.help)
        if isinstance(action, argparse._SubParsersAction):
            for choice in action.choices.values():
                _plain_help(choice)
            for pseudo in action._choices_actions:
                pseudo.help = _escaped(pseudo.help)
    return parser


class ServiceFlags(SphinxDirective):
    """``nbjobs service``'s command-line aliases and flags (traitlets)."""

    def run(self) -> list[nodes.Node]:
        from nbjobs.job_service.app import JobServiceApp

        lines = [".. list-table::", "   :header-rows: 1", "   :widths: 30 70", ""]
        lines += ["   * - option", "     - sets"]
        for alias, target in sorted(JobServiceApp.aliases.items()):
            trait = target[0] if isinstance(target, tuple) else target
            lines += [f"   * - ``--{alias}=VALUE``", f"     - ``{trait}``"]
        for flag, (_settings, help_text) in sorted(JobServiceApp.flags.items()):
            lines += [f"   * - ``--{flag}``", f"     - {help_text}"]
        lines += [
            "   * - ``--Class.trait=VALUE``",
            "     - any configurable trait, e.g. ``--JobServiceApp.port=8787``",
            "",
        ]
        return _parse(self, lines)


# -- the runner ------------------------------------------------------------------------


class RunnerExitCodes(SphinxDirective):
    """``python -m nbjobs.job_runner``'s exit codes and the job state each one means."""

    def run(self) -> list[nodes.Node]:
        from nbjobs.job_runner.errors import STATE_FOR_EXIT_CODE, ExitCode

        docs = _attr_docs("nbjobs.job_runner.errors")
        lines = [".. list-table::", "   :header-rows: 1", "   :widths: 8 18 16 58", ""]
        lines += ["   * - code", "     - name", "     - job state", "     - means"]
        for code in ExitCode:
            text = " ".join(docs.get(("ExitCode", code.name), []))
            if not text:
                LOG.warning("ExitCode.%s has no #: comment", code.name)
            lines += [
                f"   * - {int(code)}",
                f"     - ``{code.name}``",
                f"     - ``{STATE_FOR_EXIT_CODE[code]}``",
                f"     - {text}",
            ]
        lines.append("")
        return _parse(self, lines)


class LiteralText(SphinxDirective):
    """A module's text constant as a literal block: ``module:NAME``."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        module, name = self.arguments[0].split(":")
        text = str(getattr(__import__(module, fromlist=[name]), name))
        return [nodes.literal_block(text, text)]


# -- REST API bodies -----------------------------------------------------------------


def _api_type(prop: dict[str, Any]) -> str:
    if "$ref" in prop:
        name = prop["$ref"].rsplit("/", 1)[1]
        return f":ref:`{name} <api-schema-{name.lower()}>`"
    if "enum" in prop:
        return "one of " + ", ".join(f"``{json.dumps(v)}``" for v in prop["enum"])
    for key in ("anyOf", "oneOf", "allOf"):
        if key in prop:
            return " or ".join(dict.fromkeys(_api_type(option) for option in prop[key]))
    kinds = prop.get("type", "any")
    texts = []
    for kind in kinds if isinstance(kinds, list) else [kinds]:
        if kind == "array":
            texts.append("list of " + _api_type(prop.get("items", {})))
        elif kind == "object" and isinstance(prop.get("additionalProperties"), dict):
            texts.append("mapping of name to " + _api_type(prop["additionalProperties"]))
        else:
            texts.append(str(kind))
    text = " or ".join(texts)
    if prop.get("format"):
        text += f" ({prop['format']})"
    return text


class ApiSchemas(SphinxDirective):
    """Every request and response body of api/openapi.yaml, property by property."""

    def run(self) -> list[nodes.Node]:
        spec = _yaml(REPO / "api" / "openapi.yaml")
        lines: list[str] = []
        for name, schema in spec["components"]["schemas"].items():
            lines += [f".. _api-schema-{name.lower()}:", "", name, "~" * len(name), ""]
            if schema.get("description"):
                lines += [_escaped(" ".join(schema["description"].split())) or "", ""]
            props = schema.get("properties")
            if not props:
                lines += [f"Type: {_api_type(schema)}", ""]
                continue
            required = set(schema.get("required", []))
            lines += [".. list-table::", "   :header-rows: 1", "   :widths: 22 28 50", ""]
            lines += ["   * - property", "     - type", "     - description"]
            for key, prop in props.items():
                mark = " (required)" if key in required else ""
                said = _escaped(" ".join(str(prop.get("description", "")).split())) or ""
                lines += [f"   * - ``{key}``{mark}", f"     - {_api_type(prop)}", f"     - {said}"]
            lines.append("")
        return _parse(self, lines)


# -- job states ------------------------------------------------------------------------


class JobStates(SphinxDirective):
    """The job states, and every move between them with its cause."""

    def run(self) -> list[nodes.Node]:
        from nbjobs.models import FINAL_STATES, TRANSITIONS, JobState

        lines = [".. list-table::", "   :header-rows: 1", "   :widths: 22 10 68", ""]
        lines += ["   * - state", "     - over?", "     - reached when"]
        for state in JobState:
            causes = [
                f"from ``{a}``: {why}" if a else why for a, b, why in TRANSITIONS if b is state
            ]
            if not causes:
                LOG.warning("job state %s: no transition in nbjobs.models.TRANSITIONS", state)
            lines += [
                f"   * - ``{state}``",
                f"     - {'yes' if state in FINAL_STATES else 'no'}",
                "     - " + "; ".join(causes),
            ]
        lines += ["", ".. code-block:: text", ""]
        for a, b, _ in TRANSITIONS:
            lines.append(f"   {str(a) if a else '(submit)':>18} -> {b}")
        lines.append("")
        return _parse(self, lines)


# -- configurable classes ------------------------------------------------------------


#: the configurable classes of nbjobs, by page section: (title, label, classes)
CONFIGURABLES = (
    (
        "The job service",
        "service-options",
        (
            "nbjobs.job_service.app.JobServiceApp",
            "nbjobs.job_service.auth.HubTokenAuth",
            "nbjobs.job_service.auth.StaticTokenAuth",
            "nbjobs.job_service.backends.local.LocalBackend",
            "nbjobs.job_service.backends.kubernetes.KubernetesBackend",
        ),
    ),
    (
        "The spawners",
        "spawner-options",
        ("nbjobs.spawner.kubernetes.NbjobsKubeSpawner", "nbjobs.spawner.local.LocalCPUSpawner"),
    ),
    (
        "The hub's login (nbjobs install)",
        "hub-login-options",
        ("nbjobs.hub_config.first_login.InvitationAuthenticator",),
    ),
)


def own_traits(path: str) -> dict[str, Any]:
    """The configurable traits a class of nbjobs defines itself (not those it inherits
    from JupyterHub, kubespawner or traitlets)."""
    module, name = path.rsplit(".", 1)
    cls = getattr(__import__(module, fromlist=[name]), name)
    inherited: set[str] = set()
    for base in cls.__mro__[1:]:
        if not base.__module__.startswith("nbjobs") and hasattr(base, "class_traits"):
            inherited |= set(base.class_traits(config=True))
    return {k: v for k, v in cls.class_traits(config=True).items() if k not in inherited}


class ConfigurableOptions(SphinxDirective):
    """Each configurable class of nbjobs with its own traits (autodoc-traits)."""

    def run(self) -> list[nodes.Node]:
        lines: list[str] = []
        for title, label, classes in CONFIGURABLES:
            lines += [f".. _{label}:", "", title, "-" * len(title), ""]
            for path in classes:
                name = path.rsplit(".", 1)[1]
                lines += [name, "~" * len(name), ""]
                # autoclass with the class's own traits as members (autoconfigurable would
                # list every trait it inherits from JupyterHub and kubespawner too)
                traits = sorted(own_traits(path))
                lines += [f".. autoclass:: {path}", f"   :members: {', '.join(traits)}", ""]
        return _parse(self, lines)


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("nbjobs-config", ConfigReference)
    app.add_directive("nbjobs-cli", CliReference)
    app.add_directive("nbjobs-service-flags", ServiceFlags)
    app.add_directive("nbjobs-runner-exit-codes", RunnerExitCodes)
    app.add_directive("nbjobs-job-states", JobStates)
    app.add_directive("nbjobs-literal", LiteralText)
    app.add_directive("nbjobs-api-schemas", ApiSchemas)
    app.add_directive("nbjobs-options", ConfigurableOptions)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

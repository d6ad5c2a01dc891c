"""The documentation site builds with no warning, offline, and its references are complete.

The site is built once, by the real ``scripts/docs.sh`` (the command a newcomer types),
into a temporary folder; the tests read the HTML it wrote.
"""

from __future__ import annotations

import argparse
import html
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from docutils.nodes import make_id
from nbjobs.job_runner.__main__ import build_parser
from nbjobs.job_runner.errors import ExitCode

from nbjobs.cli import COMMANDS, all_parsers
from nbjobs.models import JobState

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

import nbjobs_docs  # noqa: E402


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [str(ROOT / "scripts" / "docs.sh"), str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # -W makes warnings errors; this also catches one printed without failing the build
    assert "WARNING" not in done.stdout + done.stderr
    return out


def text_of(page: Path) -> str:
    """A page's visible words, tags dropped and entities decoded."""
    body = re.sub(r"<script.*?</script>|<style.*?</style>", "", page.read_text(), flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", body))


def anchors_of(page: Path) -> set[str]:
    return set(re.findall(r'id="([^"]+)"', page.read_text()))


def test_every_nbjobs_yaml_key_has_its_entry(site):
    page = site / "reference" / "config.html"
    words, anchors = text_of(page), anchors_of(page)
    keys = [path for path, *_ in nbjobs_docs.config_keys()]
    assert len(keys) > 150  # the walk reached nested sections, list items and mappings
    # the HTML id of a label is docutils' make_id of it (underscores become hyphens)
    missing = [k for k in keys if k not in words or make_id(nbjobs_docs.label_of(k)) not in anchors]
    assert missing == []
    # a key with a default shows it; one from an example file shows that example
    start = words.index("flavors[].time_limit")
    assert "Default" in words[start : start + 600]
    assert "14400.0" in words[start : start + 600]


def test_every_key_of_the_published_schema_is_in_the_reference(site):
    """The JSON schema shipped for editors, walked on its own: no key the reference skips."""
    import json

    schema = json.loads((ROOT / "hub_config" / "nbjobs.schema.json").read_text())
    words = text_of(site / "reference" / "config.html")

    def names(node: dict, seen: set[str]) -> None:
        node = nbjobs_docs._resolve(node, schema["$defs"])
        for key, prop in node.get("properties", {}).items():
            seen.add(key)
            for inner in [prop, prop.get("items") or {}, prop.get("additionalProperties") or {}]:
                if isinstance(inner, dict):
                    names(inner, seen)
            for option in prop.get("anyOf", []):
                names(option, seen)

    every: set[str] = set()
    names(schema, every)
    missing = sorted(k for k in every if not re.search(rf"[.\]}}]?{re.escape(k)}\b", words))
    assert missing == []


def test_every_command_and_option_is_in_the_cli_reference(site):
    page = site / "reference" / "cli.html"
    words, anchors = text_of(page), anchors_of(page)
    for name in COMMANDS:
        assert f"nbjobs {name}" in words
        assert make_id(f"cli-{name}") in anchors
    parsers = all_parsers()
    assert set(parsers) >= set(COMMANDS) - {"service", "schedule"}
    assert {name for name in parsers if name.startswith("schedule ")} == {
        f"schedule {verb}"
        for verb in ("create", "list", "pause", "resume", "delete", "run", "runs")
    }
    for name, parser in parsers.items():
        assert make_id(f"cli-{name.replace(' ', '-')}") in anchors, name
        for action in parser._actions:
            for flag in action.option_strings:
                assert flag in words, f"nbjobs {name} {flag}"
    assert "--StaticTokenAuth" in words or "JobServiceApp" in words  # nbjobs service


def test_every_argument_says_what_it_is():
    """sphinx-argparse shows each argument's help: an argument without one is a bare name."""
    bare = []

    def walk(name: str, parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            if action.help is None and not isinstance(action, argparse._HelpAction):
                bare.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
            if isinstance(action, argparse._SubParsersAction):
                for sub, inner in action.choices.items():
                    walk(f"{name} {sub}", inner)

    for name, parser in all_parsers().items():
        walk(f"nbjobs {name}", parser)
    walk("python -m nbjobs.job_runner", build_parser())
    assert bare == []


def test_every_configurable_trait_is_in_the_options_reference(site):
    words = text_of(site / "reference" / "options.html")
    for _, _, classes in nbjobs_docs.CONFIGURABLES:
        for path in classes:
            name = path.rsplit(".", 1)[1]
            traits = nbjobs_docs.own_traits(path)
            assert traits, path
            for trait in traits:
                assert f"c.{name}.{trait}" in words, f"{name}.{trait}"


def test_the_configurables_listed_are_all_there_are():
    """A new configurable class of nbjobs must be added to the options reference."""
    import importlib
    import inspect

    from traitlets.config import Configurable

    listed = {path for _, _, classes in nbjobs_docs.CONFIGURABLES for path in classes}
    found = set()
    for part in ("job_service", "spawner", "server_extension", "hub_config", "nbjobs"):
        for source in (ROOT / part).rglob("*.py"):
            if "config=True" not in source.read_text() or source.name == "jupyterhub_config.py":
                continue
            relative = source.relative_to(ROOT).with_suffix("")
            name = ".".join(relative.parts if part == "nbjobs" else ("nbjobs", *relative.parts))
            module = importlib.import_module(name)
            for cls_name, cls in inspect.getmembers(module, inspect.isclass):
                path = f"{name}.{cls_name}"
                if (
                    issubclass(cls, Configurable)
                    and cls.__module__ == name
                    and nbjobs_docs.own_traits(path)
                ):
                    found.add(path)
    assert found  # the scan reached the configurables
    # Bases never configured themselves (their traits show on their subclasses)
    bases = {"nbjobs.job_service.auth.Authenticator", "nbjobs.job_service.backends.base.Backend"}
    assert found - bases - listed == set()


def test_every_endpoint_and_body_is_in_the_rest_reference(site):
    page = site / "reference" / "rest-api.html"
    words, anchors = text_of(page), anchors_of(page)
    spec = yaml.safe_load((ROOT / "api" / "openapi.yaml").read_text())
    for path, operations in spec["paths"].items():
        for method in operations:
            if method in ("get", "post", "put", "patch", "delete"):
                assert f"{method.upper()} {path}" in words.replace("\n", " "), (method, path)
    for name, schema in spec["components"]["schemas"].items():
        assert make_id(f"api-schema-{name.lower()}") in anchors
        for prop in schema.get("properties", {}):
            assert prop in words, f"{name}.{prop}"


def test_runner_options_exit_codes_and_job_states(site):
    runner = text_of(site / "reference" / "runner.html")
    for action in build_parser()._actions:
        if isinstance(action, argparse._HelpAction):
            continue  # sphinx-argparse leaves --help out
        for flag in action.option_strings:
            assert flag in runner
    for code in ExitCode:
        assert code.name in runner
    states = text_of(site / "reference" / "job-states.html")
    for state in JobState:
        assert state.value in states


def test_the_site_needs_no_network(site):
    """Offline: every script, style sheet, font and image comes from the site itself."""
    remote = re.compile(r'<(?:script|link|img)[^>]+(?:src|href)="(?:https?:)?//[^"]+"')
    offenders = [
        f"{page.relative_to(site)}: {match.group(0)[:120]}"
        for page in site.rglob("*.html")
        for match in remote.finditer(page.read_text())
    ]
    assert offenders == []


def test_screenshots_are_the_browser_tests_own():
    """Every image in the guides is one a browser test takes (refreshed by docs.sh
    --screenshots), and every image a page shows is there."""
    test_sources = "\n".join(
        path.read_text() for path in (ROOT / "tests").rglob("*.py") if "docs" not in path.parts
    )
    images = sorted((ROOT / "docs" / "images").glob("*.png"))
    assert images
    strangers = [p.name for p in images if p.stem not in test_sources]
    assert strangers == []
    shown = set()
    for page in (ROOT / "docs").rglob("*.md"):
        if "_build" in page.parts:
            continue
        for name in re.findall(r"images/([\w.-]+\.png)", page.read_text()):
            shown.add(name)
            assert (ROOT / "docs" / "images" / name).is_file(), f"{page}: {name}"
    assert shown, "the guides show no screenshot"


def test_the_readme_is_a_short_front_door():
    readme = (ROOT / "README.md").read_text()
    first = readme.split("\n## ")[0]
    assert "./scripts/demo.sh" in first
    assert "./scripts/test.sh" in first
    assert "scripts/docs.sh" in readme
    assert len(readme.splitlines()) < 120


def test_the_monitoring_guide_lists_every_metric():
    from nbjobs.job_service.metrics import METRICS

    guide = (ROOT / "docs" / "admin" / "monitoring.md").read_text()
    # counters are exposed (and listed) with their _total suffix
    missing = [m for m in METRICS if m not in guide]
    assert missing == []


def test_the_z2jh_values_in_the_guide_are_what_the_command_prints():
    """The z2jh values the Kubernetes guide shows are what `nbjobs z2jh-values` makes for
    the guide's release (nbjobs in nbjobs, the hub image of Step 2), key for key."""
    from nbjobs.chart import CHART, ChartValues, release_values
    from nbjobs.z2jh import z2jh_values

    guide = (ROOT / "docs" / "admin" / "kubernetes.md").read_text()
    step = guide[guide.index("## Step 4") :]
    block = step[step.index("```yaml\n") + len("```yaml\n") :]
    shown = yaml.safe_load(block[: block.index("```")])
    values = release_values([])
    values["image"] = {**values["image"], "repository": "registry.example.org/nbjobs-hub"}
    version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    printed = z2jh_values(ChartValues.model_validate(values), "nbjobs", "nbjobs", version)
    assert shown == printed


def test_the_manifests_in_the_guides_are_the_example_files():
    """Every object of the example rbac.yaml is in the guides as it is in the file (an
    admin copying from the page applies what the tests validate)."""
    pages = (ROOT / "docs" / "admin" / name for name in ("kubernetes.md", "rbac.md"))
    shown = [
        doc
        for page in pages
        for block in re.findall(r"```yaml\n(.*?)```", page.read_text(), re.S)
        for doc in yaml.safe_load_all(block)
        if isinstance(doc, dict) and "kind" in doc
    ]
    for name in ("rbac.yaml",):
        text = (ROOT / "hub_config" / "examples" / "kubernetes" / name).read_text()
        for doc in filter(None, yaml.safe_load_all(text)):
            assert doc in shown, f"{name}: {doc['kind']} {doc['metadata']['name']}"

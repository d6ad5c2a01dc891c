"""The ``nbjobs`` console script: one entry point, one sub-command per task.

Each sub-command lives with the part it belongs to and parses its own
arguments; this module only dispatches, importing the part lazily so that
``nbjobs submit`` does not pay for importing JupyterHub, and a minimal
(runner-only) install still answers ``nbjobs --version``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from nbjobs.job_runner.lean_imports import decline_format_checkers
from nbjobs.version import package_version


@dataclass(frozen=True)
class Command:
    """One ``nbjobs NAME``: the module it lives in (imported only when it runs), its
    function (it takes the remaining argv and returns the exit code), its one line of
    help, and the function of the same module that builds its argument parser, for the
    CLI reference the docs generate: ``None`` for ``nbjobs service``, a traitlets
    application whose options are its configurable traits; with ``subcommands``, that
    function returns each sub-command's parser by its name."""

    module: str
    function: str
    help: str
    parser: str | None
    subcommands: bool = False


CLIENT = "nbjobs.client.cli"
REPORTS = "nbjobs.client.reports"
#: every command, in the order ``nbjobs --help`` lists them
COMMANDS: dict[str, Command] = {
    "demo": Command("nbjobs.programs.demo", "main", "start the single-machine demo", "demo_parser"),
    "service": Command("nbjobs.job_service.app", "main", "run the job service", None),
    "submit": Command(CLIENT, "submit", "submit a notebook as a job", "submit_parser"),
    "list": Command(CLIENT, "list_jobs", "list your jobs", "list_parser"),
    "flavors": Command(
        REPORTS, "flavors", "the flavors you may use, and what is free now", "flavors_parser"
    ),
    "status": Command(CLIENT, "status", "show one job", "status_parser"),
    "logs": Command(CLIENT, "logs", "print (or follow) a job's log", "logs_parser"),
    "metrics": Command(
        REPORTS, "metrics", "what a job's GPUs, CPU and memory did", "metrics_parser"
    ),
    "usage": Command(
        REPORTS,
        "usage_report",
        "GPU-hours allocated and busy by user, group, class, flavor or node",
        "usage_parser",
    ),
    "storage": Command(
        REPORTS,
        "storage_report",
        "the space nbjobs keeps for your jobs, and for how long",
        "storage_parser",
    ),
    "credits": Command(
        "nbjobs.client.credits",
        "main",
        "credit accounts, a statement, grants (teachers, admins)",
        "credits_parser",
    ),
    "users": Command(
        "nbjobs.client.users",
        "main",
        "the users deleted and what became of their things; delete one (admins)",
        "users_parser",
    ),
    "cancel": Command(CLIENT, "cancel", "cancel a job", "cancel_parser"),
    "rerun": Command(CLIENT, "rerun", "run a finished job again", "rerun_parser"),
    "delete": Command(
        CLIENT, "delete", "delete ended jobs and their files in .nbjobs", "delete_parser"
    ),
    "schedule": Command(
        "nbjobs.client.schedule",
        "main",
        "job definitions that run on a schedule",
        "parsers",
        subcommands=True,
    ),
    "notify": Command(
        "nbjobs.client.notify",
        "main",
        "be told by email or webhook when jobs end",
        "notify_parser",
    ),
    "class": Command(
        "nbjobs.hub_config.classes", "main", "provision a class (teachers)", "class_parser"
    ),
    "invite": Command(
        "nbjobs.hub_config.classes",
        "invite",
        "a one-time link for a new user to choose their password (admins, teachers)",
        "invite_parser",
    ),
    "check-config": Command(
        "nbjobs.check", "main", "check an nbjobs.yaml before you use it (admins)", "check_parser"
    ),
    "install": Command(
        "nbjobs.programs.install",
        "install",
        "set up a class on this GPU server as root: hub, job service, accounts (admins)",
        "install_parser",
    ),
    "uninstall": Command(
        "nbjobs.programs.install",
        "uninstall",
        "remove what nbjobs install made (admins)",
        "uninstall_parser",
    ),
    "copy-database": Command(
        "nbjobs.job_service.dbcopy",
        "main",
        "copy the job records into a new database, e.g. SQLite to PostgreSQL (admins)",
        "copy_parser",
    ),
    "z2jh-values": Command(
        "nbjobs.z2jh",
        "main",
        "print the zero-to-jupyterhub values for a release of nbjobs' Helm chart (admins)",
        "z2jh_parser",
    ),
    "network-policies": Command(
        "nbjobs.network",
        "main",
        "print the NetworkPolicies of nbjobs.yaml's network rules, for kubectl (admins)",
        "policies_parser",
    ),
}


def command_parsers(name: str) -> dict[str, argparse.ArgumentParser]:
    """The argument parsers of ``nbjobs NAME``: ``{"NAME": parser}``, or for a command
    with sub-commands ``{"NAME SUB": parser, ...}``; none for ``nbjobs service``."""
    command = COMMANDS[name]
    if command.parser is None:
        return {}
    made = getattr(importlib.import_module(command.module), command.parser)()
    if command.subcommands:
        return {f"{name} {sub}": parser for sub, parser in made.items()}
    return {name: made}


def all_parsers() -> dict[str, argparse.ArgumentParser]:
    """Every command line's argument parser, by what follows ``nbjobs``."""
    return {full: parser for name in COMMANDS for full, parser in command_parsers(name).items()}


def usage() -> str:
    """The top-level help text."""
    width = max(len(name) for name in COMMANDS)
    lines = ["usage: nbjobs COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name.ljust(width)}  {command.help}" for name, command in COMMANDS.items()]
    lines += ["", "Run `nbjobs COMMAND --help` for a command's options."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch to a sub-command and return its exit code."""
    decline_format_checkers()  # the service checks notebooks with nbformat: over a second sooner
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return 0 if args else 2
    if args[0] == "--version":
        print(f"nbjobs {package_version()}")
        return 0
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"nbjobs: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    command = COMMANDS[name]
    try:
        module = importlib.import_module(command.module)
    except ImportError as exc:
        print(
            f"nbjobs {name}: this install lacks what the command needs ({exc}). "
            'Install the full distribution: pip install "nbjobs[all]"',
            file=sys.stderr,
        )
        return 2
    result: int = getattr(module, command.function)(rest)
    return result


if __name__ == "__main__":
    sys.exit(main())

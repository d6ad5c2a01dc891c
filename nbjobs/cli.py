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
from importlib.metadata import PackageNotFoundError, version

from nbjobs.job_runner.lean_imports import decline_format_checkers

# name -> (module, function, one-line help). The function takes the remaining
# argv and returns the process exit code.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "demo": ("nbjobs.demo", "main", "start the single-machine demo"),
    "service": ("nbjobs.job_service.app", "main", "run the job service"),
    "submit": ("nbjobs.client.cli", "submit", "submit a notebook as a job"),
    "list": ("nbjobs.client.cli", "list_jobs", "list your jobs"),
    "flavors": ("nbjobs.client.cli", "flavors", "the flavors you may use, and what is free now"),
    "status": ("nbjobs.client.cli", "status", "show one job"),
    "logs": ("nbjobs.client.cli", "logs", "print (or follow) a job's log"),
    "metrics": ("nbjobs.client.cli", "metrics", "what a job's GPUs, CPU and memory did"),
    "usage": (
        "nbjobs.client.cli",
        "usage_report",
        "GPU-hours allocated and busy by user, group, class, flavor or node",
    ),
    "storage": (
        "nbjobs.client.cli",
        "storage_report",
        "the space nbjobs keeps for your jobs, and for how long",
    ),
    "credits": (
        "nbjobs.client.credits",
        "main",
        "credit accounts, a statement, grants (teachers, admins)",
    ),
    "users": (
        "nbjobs.client.users",
        "main",
        "the users deleted and what became of their things; delete one (admins)",
    ),
    "cancel": ("nbjobs.client.cli", "cancel", "cancel a job"),
    "rerun": ("nbjobs.client.cli", "rerun", "run a finished job again"),
    "delete": ("nbjobs.client.cli", "delete", "delete ended jobs and their files in .nbjobs"),
    "schedule": ("nbjobs.client.schedule", "main", "job definitions that run on a schedule"),
    "notify": ("nbjobs.client.notify", "main", "be told by email or webhook when jobs end"),
    "class": ("nbjobs.hub_config.classes", "main", "provision a class (teachers)"),
    "invite": (
        "nbjobs.hub_config.classes",
        "invite",
        "a one-time link for a new user to choose their password (admins, teachers)",
    ),
    "check-config": ("nbjobs.check", "main", "check an nbjobs.yaml before you use it (admins)"),
    "install": (
        "nbjobs.install",
        "install",
        "set up a class on this GPU server as root: hub, job service, accounts (admins)",
    ),
    "uninstall": ("nbjobs.install", "uninstall", "remove what nbjobs install made (admins)"),
    "copy-database": (
        "nbjobs.job_service.dbcopy",
        "main",
        "copy the job records into a new database, e.g. SQLite to PostgreSQL (admins)",
    ),
    "network-policies": (
        "nbjobs.network",
        "main",
        "print the NetworkPolicies of nbjobs.yaml's network rules, for kubectl (admins)",
    ),
}

#: every command line's argument parser, for the CLI reference the docs generate:
#: "nbjobs NAME" -> (module, function, arguments); the function returns the parser.
#: ``nbjobs service`` is a traitlets application: its options are its configurable traits.
PARSERS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "demo": ("nbjobs.demo", "demo_parser", ()),
    "install": ("nbjobs.install", "install_parser", ()),
    "uninstall": ("nbjobs.install", "uninstall_parser", ()),
    "submit": ("nbjobs.client.cli", "submit_parser", ()),
    "list": ("nbjobs.client.cli", "list_parser", ()),
    "flavors": ("nbjobs.client.cli", "flavors_parser", ()),
    "status": ("nbjobs.client.cli", "status_parser", ()),
    "logs": ("nbjobs.client.cli", "logs_parser", ()),
    "metrics": ("nbjobs.client.cli", "metrics_parser", ()),
    "usage": ("nbjobs.client.cli", "usage_parser", ()),
    "storage": ("nbjobs.client.cli", "storage_parser", ()),
    "credits": ("nbjobs.client.credits", "credits_parser", ()),
    "users": ("nbjobs.client.users", "users_parser", ()),
    "cancel": ("nbjobs.client.cli", "cancel_parser", ()),
    "rerun": ("nbjobs.client.cli", "rerun_parser", ()),
    "delete": ("nbjobs.client.cli", "delete_parser", ()),
    "schedule create": ("nbjobs.client.schedule", "create_parser", ()),
    "schedule list": ("nbjobs.client.schedule", "list_parser", ()),
    **{
        f"schedule {verb}": ("nbjobs.client.schedule", "action_parser", (verb,))
        for verb in ("pause", "resume", "delete", "run")
    },
    "schedule runs": ("nbjobs.client.schedule", "runs_parser", ()),
    "notify": ("nbjobs.client.notify", "notify_parser", ()),
    "class": ("nbjobs.hub_config.classes", "class_parser", ()),
    "invite": ("nbjobs.hub_config.classes", "invite_parser", ()),
    "check-config": ("nbjobs.check", "check_parser", ()),
    "copy-database": ("nbjobs.job_service.dbcopy", "copy_parser", ()),
    "network-policies": ("nbjobs.network", "policies_parser", ()),
}


def command_parser(name: str) -> argparse.ArgumentParser:
    """The argument parser of ``nbjobs NAME`` (a key of :data:`PARSERS`)."""
    module, function, args = PARSERS[name]
    parser: argparse.ArgumentParser = getattr(importlib.import_module(module), function)(*args)
    return parser


def package_version() -> str:
    """The installed distribution's version, or "unknown" from a bare checkout."""
    try:
        return version("nbjobs")
    except PackageNotFoundError:
        return "unknown"


def usage() -> str:
    """The top-level help text."""
    width = max(len(name) for name in COMMANDS)
    lines = ["usage: nbjobs COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name.ljust(width)}  {help_}" for name, (_, _, help_) in COMMANDS.items()]
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
    module_name, func_name, _ = COMMANDS[name]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        print(
            f"nbjobs {name}: this install lacks what the command needs ({exc}). "
            'Install the full distribution: pip install "nbjobs[all]"',
            file=sys.stderr,
        )
        return 2
    result: int = getattr(module, func_name)(rest)
    return result


if __name__ == "__main__":
    sys.exit(main())

"""``nbjobs check-config``: is this nbjobs.yaml one the hub and the job service accept?

It reads the file exactly as they do (the same loader and schema), so an admin can
check an edit before restarting anything; a file with a mistake names its line.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .config import ConfigError, NbjobsConfig, command_config_path, load_config


def check_parser() -> argparse.ArgumentParser:
    """The argument parser of ``nbjobs check-config``."""
    parser = argparse.ArgumentParser(
        prog="nbjobs check-config",
        description="Check an nbjobs.yaml the way the hub and the job service read it; exit 0 "
        "when they would accept it, 2 (with the line and the reason) when not.",
    )
    parser.add_argument(
        "file",
        nargs="?",
        help="the file (default: $NBJOBS_CONFIG, else nbjobs.yaml in this folder)",
    )
    return parser


def summary(config: NbjobsConfig) -> str:
    """What the file sets up, in a few lines (for a person to glance over)."""
    flavors = ", ".join(f.name for f in config.flavors) or "none (no job can be submitted)"
    database = config.database.url.split(":", 1)[0]
    lines = [
        f"backend:  {config.backend.kind}",
        f"database: {database}",
        f"storage:  {config.storage.root}",
        f"flavors:  {flavors}",
    ]
    if config.classes:
        lines.append(f"classes:  {', '.join(c.name for c in config.classes)}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = check_parser().parse_args(list(argv) if argv is not None else None)
    path = command_config_path(args.file)
    try:
        config = load_config(path)
    except ConfigError as exc:
        print(f"nbjobs check-config: {exc}", file=sys.stderr)
        return 2
    print(f"{path}: valid\n{summary(config)}")
    return 0

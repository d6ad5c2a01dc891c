"""The source layout the design names, and imports that work in both install modes."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PARTS = ["job_runner", "job_service", "server_extension", "spawner", "hub_config", "client"]
BARE_IMPORT = re.compile(rf"^\s*(from|import)\s+({'|'.join(PARTS)})\b", re.MULTILINE)


def python_files():
    for folder in ["nbjobs", *PARTS]:
        yield from (ROOT / folder).rglob("*.py") if (ROOT / folder).is_dir() else ()


def test_parts_are_imported_through_the_nbjobs_package():
    # `import job_runner` works in a checkout but not from the wheel, where the
    # folder is nbjobs/job_runner; every import must go through nbjobs.
    offenders = [
        f"{path.relative_to(ROOT)}: {match.group(0).strip()}"
        for path in python_files()
        for match in BARE_IMPORT.finditer(path.read_text())
    ]
    assert offenders == []


def test_the_runner_has_its_own_folder_and_entry_point():
    assert (ROOT / "job_runner" / "__main__.py").is_file()
    assert not (ROOT / "nbjobs" / "job_runner").exists()

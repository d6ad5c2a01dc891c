"""The rules the Lab extension and the dashboard need as values (final states, list
scopes, the longest search, the events' names) come from the Python that enforces them:
labextension/src/contract.ts is generated, and a stale one fails here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_typescript_contract_is_the_one_the_service_generates():
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "update_contract.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


#: how a copy of a contract value by hand reads (the ones contract.ts replaced)
COPIED = ["MAX_SEARCH_CHARS = ", "'mine' | 'classes'", "new Set<JobState>([\n"]


def test_the_typescript_copies_no_contract_value():
    folders = [ROOT / "labextension" / "src", ROOT / "job_service" / "dashboard" / "ui"]
    copies = [
        f"{path.relative_to(ROOT)}: {copy!r}"
        for folder in folders
        for path in folder.glob("*.ts")
        if path.name != "contract.ts"
        for copy in COPIED
        if copy in path.read_text()
    ]
    assert copies == []

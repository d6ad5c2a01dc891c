"""The Lab extension's TypeScript unit tests (vitest), run as part of the Python suite."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_typescript_unit_tests_pass():
    jlpm = shutil.which("jlpm")
    assert jlpm, "jlpm (from jupyterlab) is needed to run the TypeScript tests"

    done = subprocess.run(
        [jlpm, "test"], cwd=ROOT, capture_output=True, text=True, timeout=240, check=False
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert " passed" in done.stdout, done.stdout
    assert "failed" not in done.stdout, done.stdout

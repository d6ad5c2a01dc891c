"""What `nbjobs service` checks before it serves: its database and its tokens.

Each refusal is one sentence on the console and exit code 2, never a traceback,
and a good start serves the tokens given in a file or the environment (never on
the command line, where `ps` shows them to every local user).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import requests
import yaml

from tests.waiting import wait_until_answering

from .conftest import free_port


def _config(root: Path) -> Path:
    config = root / "nbjobs.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "storage": {"root": str(root / "home")},
                "database": {"url": f"sqlite:///{root / 'jobs.sqlite'}"},
                "backend": {"local": {"gpus": [], "cpu_slots": 1}},
            }
        )
    )
    return config


def _start(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "nbjobs.cli", "service", f"--config={_config(root)}"]
    return subprocess.Popen(
        [*command, f"--port={free_port()}", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
    )


def _refusal(root: Path, *args: str, env: dict[str, str] | None = None) -> str:
    proc = _start(root, *args, env=env)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2, out
    assert "Traceback" not in out, out
    return out


def test_empty_database_file_is_refused_not_started_empty(tmp_path):
    (tmp_path / "jobs.sqlite").write_bytes(b"")
    out = _refusal(tmp_path)
    assert "is empty (0 bytes)" in out, out
    assert "restore it from a backup" in out, out
    assert (tmp_path / "jobs.sqlite").stat().st_size == 0  # left as found


def test_damaged_database_file_is_a_sentence(tmp_path):
    (tmp_path / "jobs.sqlite").write_bytes(b"this is not a database" * 100)
    out = _refusal(tmp_path)
    assert "cannot use the job database" in out, out
    assert "damaged" in out, out


def test_database_folder_that_cannot_be_made_is_a_sentence(tmp_path):
    (tmp_path / "taken").write_text("a file where the database's folder should be")
    config = _config(tmp_path)
    data = yaml.safe_load(config.read_text())
    data["database"]["url"] = f"sqlite:///{tmp_path / 'taken' / 'jobs.sqlite'}"
    config.write_text(yaml.safe_dump(data))
    command = [sys.executable, "-m", "nbjobs.cli", "service", f"--config={config}"]
    proc = subprocess.run(
        [*command, f"--port={free_port()}"], capture_output=True, text=True, timeout=60
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "Traceback" not in out, out
    assert "cannot make the folder of the job database" in out, out


def test_token_file_that_is_not_a_mapping_is_a_sentence(tmp_path):
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text("- just\n- a list\n")
    out = _refusal(tmp_path, f"--StaticTokenAuth.tokens_file={tokens}")
    assert "must map each token to a user name" in out, out


def test_missing_token_file_is_a_sentence(tmp_path):
    out = _refusal(tmp_path, f"--StaticTokenAuth.tokens_file={tmp_path / 'nope.yaml'}")
    assert "cannot read the token file" in out, out


def test_tokens_env_that_is_not_json_is_a_sentence(tmp_path):
    out = _refusal(tmp_path, env={"NBJOBS_SERVICE_TOKENS": "ada=secret"})
    assert "$NBJOBS_SERVICE_TOKENS is not JSON" in out, out


def test_tokens_from_a_file_and_the_environment_work_and_stay_out_of_ps(tmp_path):
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text("file-secret-token: ada\n")
    tokens.chmod(0o644)  # readable by others: works, with a warning
    port = free_port()
    command = [sys.executable, "-m", "nbjobs.cli", "service", f"--config={_config(tmp_path)}"]
    log = (tmp_path / "service.log").open("w")
    proc = subprocess.Popen(
        [*command, f"--port={port}", f"--StaticTokenAuth.tokens_file={tokens}"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "NBJOBS_SERVICE_TOKENS": json.dumps({"env-secret-token": "bob"})},
    )
    url = f"http://127.0.0.1:{port}/api/health"
    try:
        wait_until_answering(url, process=proc, timeout=30)
        who = {
            token: requests.get(url, headers={"Authorization": f"token {token}"}, timeout=5)
            for token in ("file-secret-token", "env-secret-token", "wrong")
        }
        argv = Path(f"/proc/{proc.pid}/cmdline").read_bytes().decode()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
    assert who["file-secret-token"].json()["user"] == "ada"
    assert who["env-secret-token"].json()["user"] == "bob"
    assert who["wrong"].status_code == 401
    assert "secret-token" not in argv
    text = (tmp_path / "service.log").read_text()
    assert "may be read by other users (mode 644); chmod 600 it" in text, text


def test_a_new_database_file_is_readable_by_the_service_alone(tmp_path):
    from nbjobs.job_service.db import connect

    sessions = connect(f"sqlite:///{tmp_path / 'new.sqlite'}")
    with sessions() as db:
        db.connection()  # open it, as the service does
    assert (tmp_path / "new.sqlite").stat().st_mode & 0o777 == 0o600

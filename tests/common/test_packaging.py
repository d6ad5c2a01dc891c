"""The wheel a user installs: the parts inside one `nbjobs` package, the Lab extension built."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (path,) = out.glob("nbjobs-*.whl")
    return path


def test_parts_are_subpackages_not_top_level_modules(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert tops == {"nbjobs", f"{dist_prefix(wheel)}.dist-info", f"{dist_prefix(wheel)}.data"}
    assert "nbjobs/job_runner/__main__.py" in names
    assert "nbjobs/server_extension/__init__.py" in names
    assert "nbjobs/examples/hello.ipynb" in names  # what `nbjobs demo` runs
    assert "nbjobs/programs/demo.py" in names  # `nbjobs demo` itself
    # the dashboard's page: its built script and style, not its TypeScript
    assert {"nbjobs/dashboard_static/dashboard.js", "nbjobs/dashboard_static/dashboard.css"} <= set(
        names
    )
    assert not any(n.startswith("nbjobs/job_service/dashboard/ui/") for n in names)


def test_the_lab_extension_and_server_config_are_installed_where_jupyter_looks(wheel):
    data = f"{dist_prefix(wheel)}.data/data/"
    names = zipfile.ZipFile(wheel).namelist()
    lab = data + "share/jupyter/labextensions/nbjobs/"
    assert lab + "package.json" in names
    assert lab + "install.json" in names
    assert any(n.startswith(lab + "static/remoteEntry.") for n in names)
    config = data + "etc/jupyter/jupyter_server_config.d/nbjobs.json"
    enabled = json.loads(zipfile.ZipFile(wheel).read(config))
    assert enabled["ServerApp"]["jpserver_extensions"] == {"nbjobs.server_extension": True}


def test_the_lab_extension_ships_its_settings_schema(wheel):
    # The schema declares the notebook toolbar's Submit Job button and the file
    # browser's context menu item: without it both silently vanish.
    lab = f"{dist_prefix(wheel)}.data/data/share/jupyter/labextensions/nbjobs/"
    schema = json.loads(zipfile.ZipFile(wheel).read(lab + "schemas/nbjobs/plugin.json"))
    (button,) = schema["jupyter.lab.toolbars"]["Notebook"]
    assert button["command"] == "nbjobs:submit"
    assert [item["command"] for item in schema["jupyter.lab.menus"]["context"]] == ["nbjobs:submit"]
    package = json.loads(zipfile.ZipFile(wheel).read(lab + "package.json"))
    assert package["jupyterlab"]["_build"]["load"].startswith("static/remoteEntry.")


def test_jupyter_lists_the_installed_lab_extension_enabled_and_ok(wheel, tmp_path):
    # Installing a wheel puts its .data/data/ under the environment's prefix;
    # here under a prefix of our own, which Jupyter is told to look in first.
    prefix = tmp_path / "prefix"
    data = f"{dist_prefix(wheel)}.data/data/"
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if name.startswith(data) and not name.endswith("/"):
                target = prefix / name.removeprefix(data)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(zf.read(name))
    env = {
        **os.environ,
        "JUPYTER_PATH": str(prefix / "share" / "jupyter"),
        "JUPYTER_CONFIG_PATH": str(prefix / "etc" / "jupyter"),
        "JUPYTER_DATA_DIR": str(tmp_path / "data"),
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "NO_COLOR": "1",
    }
    done = subprocess.run(
        [sys.executable, "-m", "jupyter", "labextension", "list"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    listing = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)
    ours = str(prefix / "share" / "jupyter" / "labextensions")
    assert ours in listing, listing
    section = listing.split(ours, 1)[1].split("\n/", 1)[0]
    line = next(ln for ln in section.splitlines() if ln.strip().startswith("nbjobs "))
    assert re.search(r"\bnbjobs v\S+ enabled\s+OK\b", line), listing
    assert "(python, nbjobs)" in line  # install.json: pip installed it, pip removes it


def test_the_runner_imports_from_the_wheel_alone(wheel, tmp_path):
    zipfile.ZipFile(wheel).extractall(tmp_path)
    # -S: no site hooks, so the checkout's editable install cannot answer instead;
    # the dependencies come from site-packages, nbjobs only from the wheel.
    out = subprocess.run(
        [sys.executable, "-S", "-c", "import nbjobs.job_runner as r; print(r.__file__)"],
        env={"PYTHONPATH": f"{tmp_path}:{sysconfig.get_paths()['purelib']}"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert Path(out.strip()).is_relative_to(tmp_path)


def dist_prefix(wheel: Path) -> str:
    name, version = wheel.name.split("-")[:2]
    return f"{name}-{version}"


def test_the_typescript_build_writes_only_inside_its_checkout(tmp_path):
    """tsc's incremental build info once landed in the folder that holds the checkout;
    a second clone beside it then built no lib/ and its install failed. Where tsc writes
    is the checkout's tsconfig.json's doing, whatever the sources: each clone here has a
    source of two lines (the extension's own, compiled twice, took 20 s of CPU; the
    linters compile them in every run)."""
    tsc = ROOT / "node_modules" / ".bin" / "tsc"
    assert tsc.exists(), "run jlpm install first (scripts/install.sh --dev does)"
    parent = tmp_path / "clones"
    clones = [parent / "one", parent / "two"]
    for clone in clones:
        (clone / "labextension" / "src").mkdir(parents=True)
        (clone / "labextension" / "src" / "index.ts").write_text(
            "export const greeting: string = 'built here';\nexport default greeting;\n"
        )
        (clone / "tsconfig.json").write_text((ROOT / "tsconfig.json").read_text())
        (clone / "node_modules").symlink_to(ROOT / "node_modules")
    for clone in clones:
        subprocess.run([str(tsc), "-p", "tsconfig.json"], cwd=clone, check=True, timeout=300)
        assert (clone / "lib" / "index.js").exists()  # each clone builds its own lib/
    assert sorted(p.name for p in parent.iterdir()) == ["one", "two"]  # nothing beside them

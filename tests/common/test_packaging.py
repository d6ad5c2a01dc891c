"""The wheel a user installs: the parts inside one `nbjobs` package, the Lab extension built."""

from __future__ import annotations

import json
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

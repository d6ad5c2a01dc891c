"""Where results go (beside the notebook or in an outputs folder, with an HTML copy on
request) and which kernel a job runs on (checked at submit against what the flavor has).

Real service, real runner processes, real kernels and a real nbconvert.
"""

from __future__ import annotations

import os
import re

import nbformat
import pytest

from nbjobs.config import ConfigError, parse_config

from .conftest import BASE_CONFIG, start_service, stop_all

pytestmark = pytest.mark.timeout(180)

#: what a result is called: the notebook's name, the minute it was submitted, a short id
RESULT_NAME = r"p\.\d{4}-\d\d-\d\dT\d{4}\.[0-9a-f]{8}\.ipynb"


async def test_results_go_beside_the_notebook_by_default_without_an_html_copy(svc):
    svc.write("ada", "work/p.ipynb", "print('hi')")
    job = await svc.submit("ada", "work/p.ipynb")
    assert re.fullmatch(r"work/" + RESULT_NAME, job["output_path"]), job["output_path"]
    assert job["html_path"] is None
    done = await svc.wait("ada", job["id"])
    assert done["state"] == "succeeded", done
    assert (svc.home("ada") / job["output_path"]).is_file()
    assert not list((svc.home("ada") / "work").glob("*.html"))


async def test_an_outputs_folder_and_an_html_copy_asked_for_at_submit(svc):
    svc.write("ada", "work/p.ipynb", "print('shown in the copy')")
    job = await svc.submit("ada", "work/p.ipynb", outputs="folder", html=True)
    assert re.fullmatch(r"work/nbjobs-outputs/" + RESULT_NAME, job["output_path"])
    assert job["html_path"] == job["output_path"].removesuffix(".ipynb") + ".html"
    done = await svc.wait("ada", job["id"])
    assert done["state"] == "succeeded", done
    home = svc.home("ada")
    result = nbformat.read(home / job["output_path"], as_version=4)
    nbformat.validate(result)
    html = (home / job["html_path"]).read_text()
    assert "shown in the copy" in html
    assert html.lstrip().lower().startswith("<!doctype html")
    # the notebook's folder holds the notebook alone; the results are in their folder
    assert sorted(p.name for p in (home / "work").iterdir()) == ["nbjobs-outputs", "p.ipynb"]


async def test_nbjobs_yaml_sets_the_defaults_a_submission_may_override(tmp_path):
    svc = await start_service(
        tmp_path, {"outputs": {"location": "folder", "folder": "results", "html": True}}
    )
    try:
        svc.write("ada", "p.ipynb", "1")
        default = await svc.submit("ada", "p.ipynb")
        beside = await svc.submit("ada", "p.ipynb", outputs="beside", html=False)
        async with svc.client("ada") as c:
            me = (await c.get("me")).json()
        for job in (default, beside):
            assert (await svc.wait("ada", job["id"]))["state"] == "succeeded"
    finally:
        await stop_all(svc)
    where = me["outputs"].pop("where")
    free = me["outputs"].pop("free_bytes")
    assert me["outputs"] == {"location": "folder", "folder": "results", "html": True}
    # where results go, as ada knows it on one machine: her folder, and the room left there
    assert where == str(svc.home("ada"))
    room = os.statvfs(svc.home("ada"))
    assert abs(free - room.f_bavail * room.f_frsize) < 256 * 1024**2
    assert re.fullmatch(r"results/" + RESULT_NAME, default["output_path"])
    assert default["html_path"] is not None
    assert (svc.home("ada") / default["html_path"]).is_file()
    assert re.fullmatch(RESULT_NAME, beside["output_path"])
    assert beside["html_path"] is None


async def test_a_rerun_keeps_where_the_result_went_and_its_kernel(svc):
    svc.write("ada", "p.ipynb", "print(1)")
    job = await svc.submit("ada", "p.ipynb", outputs="folder", html=True, kernel="python3")
    await svc.wait("ada", job["id"])
    async with svc.client("ada") as c:
        again = (await c.post(f"jobs/{job['id']}/rerun")).json()
    assert again["output_path"].startswith("nbjobs-outputs/")
    assert again["html_path"] is not None
    assert again["kernel"] == "python3"
    assert (await svc.wait("ada", again["id"]))["state"] == "succeeded"


async def test_flavors_name_the_kernels_their_jobs_have(svc):
    async with svc.client("ada") as c:
        flavors = (await c.get("flavors")).json()
    cpu = next(f for f in flavors if f["name"] == "cpu")
    assert "python3" in cpu["kernels"]


async def test_a_notebook_on_a_kernel_the_flavor_lacks_is_refused_at_submit(svc):
    path = svc.write("ada", "j.ipynb", "println(1)")
    nb = nbformat.read(path, as_version=4)
    nb.metadata["kernelspec"] = {"name": "julia-1.10", "display_name": "Julia 1.10"}
    nbformat.write(nb, path)
    async with svc.client("ada") as c:
        refused = await c.post("jobs", json={"path": "j.ipynb", "flavor": "cpu"})
        unknown = await c.post(
            "jobs", json={"path": "j.ipynb", "flavor": "cpu", "kernel": "julia-1.10"}
        )
        listed = (await c.get("jobs")).json()
    assert refused.status_code == 400
    message = refused.json()["message"]
    assert message.startswith("'j.ipynb' runs on kernel 'julia-1.10', which flavor 'cpu'")
    assert "python3" in message
    assert "Kernel field" in message
    assert unknown.status_code == 400
    assert unknown.json()["message"].startswith("kernel 'julia-1.10' is not available on")
    assert listed["jobs"] == []  # nothing queued, no job folder left behind
    assert not list((svc.home("ada") / ".nbjobs" / "jobs").glob("*"))


async def test_a_kernel_chosen_at_submit_runs_the_notebook(svc):
    """The notebook names a kernel the job side lacks; the user picks one it has."""
    path = svc.write("ada", "k.ipynb", "import sys; print(sys.version_info[0])")
    nb = nbformat.read(path, as_version=4)
    nb.metadata["kernelspec"] = {"name": "conda-env-old-py", "display_name": "Old"}
    nbformat.write(nb, path)
    job = await svc.submit("ada", "k.ipynb", kernel="PYTHON3")  # names compare as Jupyter's
    done = await svc.wait("ada", job["id"])
    assert done["state"] == "succeeded", done
    result = nbformat.read(svc.home("ada") / job["output_path"], as_version=4)
    assert result.metadata["nbjobs"]["kernel"]["name"] == "PYTHON3"
    assert result.cells[-1].outputs[0]["text"] == "3\n"


@pytest.mark.parametrize(
    ("folder", "words"),
    [
        ("a/b", "one folder name"),
        ("..", "one folder name"),
        (".results", "may not start with '.'"),
    ],
)
def test_an_outputs_folder_that_is_not_one_plain_name_is_refused(folder, words):
    import yaml

    text = yaml.safe_dump({**BASE_CONFIG, "outputs": {"folder": folder}})
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    assert "outputs.folder" in str(caught.value)
    assert words in str(caught.value)

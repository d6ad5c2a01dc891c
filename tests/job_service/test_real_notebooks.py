"""Notebooks as people have them, through the service: what the runner runs, submit takes."""

from __future__ import annotations

import json

import nbformat


async def test_a_notebook_jupyter_tolerates_is_taken_run_and_its_repairs_said(svc):
    # nbformat 4.2 with a stream output missing its name: the schema refuses it, Jupyter
    # opens and runs it (the submit used to be a 400 "not a valid notebook")
    data = {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": 4,
                "metadata": {},
                "outputs": [{"output_type": "stream", "text": "old\n"}],
                "source": ["print('ran')"],
            }
        ],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
        "nbformat": 4,
        "nbformat_minor": 2,
    }
    (svc.home("ada") / "old.ipynb").write_text(json.dumps(data))

    job = await svc.submit("ada", "old.ipynb")
    done = await svc.wait("ada", job["id"])

    assert done["state"] == "succeeded", done["message"]
    out = svc.home("ada") / done["output_path"]
    nb = nbformat.read(out, as_version=4)
    nbformat.validate(nb)
    assert nb.nbformat_minor == 5
    assert nb.cells[0].outputs[0]["text"] == "ran\n"
    assert any("saved outputs" in r for r in nb.metadata["nbjobs"]["repairs"])


async def test_what_cannot_be_read_is_still_refused_at_submit(svc):
    (svc.home("ada") / "v2.ipynb").write_text(json.dumps({"nbformat": 2, "worksheets": []}))
    async with svc.client("ada") as c:
        r = await c.post("jobs", json={"path": "v2.ipynb", "flavor": "cpu"})
    assert r.status_code == 400
    assert (
        "is not a valid notebook (it is not a notebook Jupyter can run (nbformat 2"
        in (r.json()["message"])
    )

"""nbjobs.yaml ``limits`` bound what a job run by the service keeps: the admin's
``cell_output``, ``notebook_output`` and ``log_output`` reach the runner as its
``--max-*-output`` options. Real service, local backend, real runner and kernel."""

from __future__ import annotations

import json

from .conftest import start_service, stop_all

LOUD_CELL = "for i in range(200):\n    print(f'line {i:03d} ' + 'x' * 92)"


async def test_the_admins_output_limits_bound_the_notebook_and_the_log(tmp_path):
    limits = {"cell_output": "4KiB", "notebook_output": "64KiB", "log_output": "1KiB"}
    svc = await start_service(tmp_path, {"limits": limits})
    try:
        svc.write("ada", "loud.ipynb", LOUD_CELL, "print('the end')")
        job = await svc.submit("ada", "loud.ipynb")
        done = await svc.wait("ada", job["id"])
        async with svc.client("ada") as client:
            log = (await client.get(f"jobs/{job['id']}/logs")).text
    finally:
        await stop_all(svc)

    assert done["state"] == "succeeded", done
    output = json.loads((svc.home("ada") / done["output_path"]).read_text())
    kept = output["metadata"]["nbjobs"]["output"]
    assert kept["limits"] == {"cell": 4096, "notebook": 65536, "log": 1024}
    # the loud cell keeps its start and its end, with the runner's note between
    loud = next(c for c in output["cells"] if "".join(c["source"]) == LOUD_CELL)
    texts = ["".join(o["text"]) for o in loud["outputs"] if o["output_type"] == "stream"]
    whole = "".join(texts)
    assert whole.startswith("line 000 ")
    assert whole.rstrip().endswith("line 199 " + "x" * 92)
    assert any(
        t.startswith("[nbjobs] ")
        and "were left out here: this cell reached the output limit (4 KiB a cell, 64 KiB a "
        "notebook)"
        in t
        for t in texts
    )
    assert len(whole) < 4096 + 1024  # the cell's limit and the note
    assert kept["cells_with_dropped_output"] == [0]
    # the log: 1 KiB of cell output, then one line saying so; the runner's own lines go on
    assert "[nbjobs] the log reached its limit (1,024 characters)" in log
    assert "line 199" not in log
    assert log.count("[nbjobs] running loud.ipynb") == 1  # one writer: no line twice
    assert "[nbjobs] done: succeeded" in log

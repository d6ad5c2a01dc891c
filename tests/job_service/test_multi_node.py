"""Multi-node jobs on one machine: a flavor with ``nodes: N`` runs N local ranks that
start together, meet over a real TCP rendezvous on localhost (the variables torchrun
reads), each with its own GPUs and log; one failing stops the rest; quotas and GPU-hours
count every rank's GPUs."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess

import psutil
import pytest

from tests.machine import job_tmp

from .conftest import BASE_CONFIG, start_service, stop_all

pytestmark = pytest.mark.timeout(180)

#: every rank connects to rank 0 at MASTER_ADDR:MASTER_PORT and sends its rank and GPUs;
#: rank 0 answers each with the sum of all ranks' values, as an all-reduce would
EXCHANGE = r"""
import json, os, socket, sys, time
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
assert os.environ["NODE_RANK"] == os.environ["PET_NODE_RANK"] == str(rank)
assert os.environ["PET_NNODES"] == str(world)
mine = {"rank": rank, "value": 10 * (rank + 1), "gpus": os.environ["CUDA_VISIBLE_DEVICES"],
        "pid": os.getpid()}
if rank == 0:
    server = socket.create_server((addr, port))
    peers, values = [], [mine]
    while len(peers) < world - 1:
        conn, _ = server.accept()
        values.append(json.loads(conn.makefile().readline()))
        peers.append(conn)
    total = sum(v["value"] for v in values)
    for conn in peers:
        conn.sendall(f"{total}\n".encode())
        conn.close()
    print("rank 0 gathered", json.dumps(sorted(values, key=lambda v: v["rank"])))
    print("sum", total)
else:
    for _ in range(200):  # rank 0 may not listen yet
        try:
            conn = socket.create_connection((addr, port))
            break
        except OSError:
            time.sleep(0.05)
    conn.sendall((json.dumps(mine) + "\n").encode())
    print(f"rank {rank} of {world} got sum", conn.makefile().readline().strip())
"""


def multi_node_config(tmp_path, **quota):
    flavors = [
        *BASE_CONFIG["flavors"],
        {"name": "pair", "gpus": 1, "nodes": 2, "time_limit": "10m"},
        {"name": "trio", "gpus": 1, "nodes": 3},
        {"name": "cpu-pair", "gpus": 0, "nodes": 2, "time_limit": "10m"},
    ]
    quotas = {
        "default": {"max_running_gpus": 2, "max_queued_jobs": 300, **quota},
        "users": {"root": {}},
    }
    return {"flavors": flavors, "quotas": quotas}


@pytest.fixture
async def svc(tmp_path):
    s = await start_service(tmp_path, multi_node_config(tmp_path))
    try:
        yield s
    finally:
        await stop_all(s)


def write(svc, user, relpath, text):
    path = svc.home(user) / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


async def test_two_ranks_meet_at_rank_zero_each_on_its_own_gpu(svc):
    write(svc, "ada", "dist/exchange.py", EXCHANGE)
    job = await svc.submit("ada", "dist/exchange.py", flavor="pair")
    assert job["nodes"] == 2
    done = await svc.wait("ada", job["id"])
    assert done["state"] == "succeeded", done
    assert sorted(done["gpus"]) == ["0", "1"]  # the job holds both ranks' GPUs

    async with svc.client("ada") as c:
        rank0 = (await c.get(f"jobs/{job['id']}/logs")).text
        rank1 = (await c.get(f"jobs/{job['id']}/logs", params={"rank": 1})).text
        wrong = await c.get(f"jobs/{job['id']}/logs", params={"rank": 2})
    assert "sum 30" in rank0  # 10 from rank 0 + 20 from rank 1, over the socket
    assert "rank 1 of 2 got sum 30" in rank1
    assert "rank 1 of 2 nodes; rank 0 writes the job's result" in rank1
    assert "got sum" not in rank0  # a log per rank
    assert "gathered" not in rank1
    gathered = next(line for line in rank0.splitlines() if line.startswith("rank 0 gathered"))
    gpus = {v["rank"]: v["gpus"] for v in json.loads(gathered.split(" ", 3)[3])}
    assert sorted(gpus.values()) == ["0", "1"]  # each rank sees its own GPU, not both
    assert wrong.status_code == 400
    assert "runs on 2 nodes: its ranks are 0 to 1, not 2" in wrong.json()["message"]

    # the result is rank 0's, next to the script; rank 1's output stays in the job's folder
    result = (svc.home("ada") / done["output_path"]).read_text()
    assert "sum 30" in result
    assert "got sum" not in result
    job_dir = svc.home("ada") / ".nbjobs" / "jobs" / job["id"]
    assert "got sum 30" in (job_dir / "output-rank-1.log").read_text()
    assert (job_dir / "status-rank-1.json").exists()


async def test_a_rank_that_fails_stops_the_others_and_the_job_says_which(svc):
    write(
        svc,
        "ada",
        "fails.py",
        "import os, sys, time\n"
        "if os.environ['RANK'] == '1':\n"
        "    print('rank 1 cannot find its shard', flush=True); sys.exit(3)\n"
        "print('rank 0 waits', flush=True); time.sleep(120)\n",
    )
    job = await svc.submit("ada", "fails.py", flavor="pair")
    done = await svc.wait("ada", job["id"], timeout=60)
    assert done["state"] == "failed", done
    assert done["message"] == (
        "rank 1 of 2 failed (fails.py exited with code 3: rank 1 cannot find its shard); "
        "the other ranks were stopped; see the log of rank 1"
    )
    async with svc.client("ada") as c:
        assert (
            "cannot find its shard"
            in (await c.get(f"jobs/{job['id']}/logs", params={"rank": 1})).text
        )
    # both GPUs are free again at once
    async with svc.client("ada") as c:
        flavors = {f["name"]: f for f in (await c.get("flavors")).json()}
    assert flavors["pair"]["available"] == 1
    assert flavors["gpu"]["available"] == 2


async def test_cancel_stops_every_rank(svc):
    write(
        svc,
        "ada",
        "pids.py",
        "import os, time\nprint('pid', os.getpid(), flush=True)\ntime.sleep(120)\n",
    )
    job = await svc.submit("ada", "pids.py", flavor="cpu-pair")
    await svc.wait("ada", job["id"], lambda j: j["state"] == "running")
    backend = svc.service.backend
    ranks = backend.running[job["id"]].ranks  # type: ignore[attr-defined]
    assert len(ranks) == 2
    pids = [r.pid for r in ranks]
    async with svc.client("ada") as c:
        assert (await c.post(f"jobs/{job['id']}/cancel")).status_code == 200
    done = await svc.wait("ada", job["id"], timeout=60)
    assert done["state"] == "cancelled"
    for _ in range(50):
        if not any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie" for p in pids):
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError(f"a rank outlived its cancel: {pids}")


async def test_capacity_and_quotas_count_every_rank(tmp_path):
    svc = await start_service(tmp_path, multi_node_config(tmp_path, max_running_gpus=1))
    try:
        async with svc.client("ada") as c:
            flavors = {f["name"]: f for f in (await c.get("flavors")).json()}
            assert (flavors["pair"]["nodes"], flavors["gpu"]["nodes"]) == (2, 1)
            # two nodes x one GPU is two GPUs: over ada's quota of one at a time
            r = await c.post("jobs", json={"path": "x.py", "flavor": "pair"})
            assert r.status_code == 403, r.text
            assert "needs 2 GPU(s) at once" in r.json()["message"]
            # three ranks of one GPU never fit a machine of two
            r = await c.post("jobs", json={"path": "x.py", "flavor": "trio"})
            assert r.status_code == 409, r.text
            assert "needs 3 ranks x 1 GPU(s) and this machine has 2 GPUs" in r.json()["message"]
            # --nodes says what the submitter expects: another span is refused, naming flavors
            r = await c.post("jobs", json={"path": "x.py", "flavor": "gpu", "nodes": 2})
            assert r.status_code == 400, r.text
            assert r.json()["message"] == (
                "flavor 'gpu' runs a job on 1 node, not 2; your flavors on 2 nodes: pair, cpu-pair"
            )
        write(svc, "root", "hold.py", "import time\ntime.sleep(120)\n")
        job = await svc.submit("root", "hold.py", flavor="pair")
        await svc.wait("root", job["id"], lambda j: j["state"] == "running")
        async with svc.client("root") as c:
            flavors = {f["name"]: f for f in (await c.get("flavors")).json()}
        # the pair holds both GPUs: nothing else with a whole GPU fits
        assert flavors["gpu"]["available"] == 0
        assert flavors["pair"]["available"] == 0
        record = svc.service.backend.running[job["id"]]  # type: ignore[attr-defined]
        assert [r.gpus for r in record.ranks] == [["0"], ["1"]]
    finally:
        await stop_all(svc)


async def test_a_restarted_service_adopts_every_rank(tmp_path, start):
    svc = await start_service(tmp_path, multi_node_config(tmp_path))
    marker = tmp_path / "go"
    write(
        svc,
        "ada",
        "wait.py",
        "import os, time\n"
        f"while not os.path.exists({str(marker)!r}): time.sleep(0.1)\n"
        "print('rank', os.environ['RANK'], 'done')\n",
    )
    job = await svc.submit("ada", "wait.py", flavor="cpu-pair")
    await svc.wait("ada", job["id"], lambda j: j["state"] == "running")
    await svc.service.stop()  # the service goes; the ranks go on
    svc.server.stop()
    again = await start(multi_node_config(tmp_path))
    try:
        adopted = again.service.backend.running[job["id"]]  # type: ignore[attr-defined]
        assert len(adopted.ranks) == 2
        marker.touch()
        done = await again.wait("ada", job["id"], timeout=60)
        assert done["state"] == "succeeded", done
        async with again.client("ada") as c:
            assert "rank 1 done" in (await c.get(f"jobs/{job['id']}/logs", params={"rank": 1})).text
    finally:
        await stop_all(again)


async def test_the_time_limit_stops_every_rank(svc):
    write(
        svc,
        "ada",
        "forever.py",
        "import os, time\nprint('rank', os.environ['RANK'], 'sleeps', flush=True)\n"
        "time.sleep(120)\n",
    )
    job = await svc.submit("ada", "forever.py", flavor="cpu-pair", time_limit=2)
    await svc.wait("ada", job["id"], lambda j: j["state"] == "running")
    ranks = svc.service.backend.running[job["id"]].ranks  # type: ignore[attr-defined]
    pids = [r.pid for r in ranks]
    done = await svc.wait("ada", job["id"], timeout=60)
    assert done["state"] == "timed_out", done
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie" for p in pids)
    async with svc.client("ada") as c:
        log1 = (await c.get(f"jobs/{job['id']}/logs", params={"rank": 1})).text
    assert "rank 1 sleeps" in log1
    # stopped at the limit, or by the service when rank 0 reached it first: saying so
    assert "[nbjobs] done: " in log1


async def test_a_rank_that_died_while_the_service_was_away_takes_the_others_down(tmp_path, start):
    svc = await start_service(tmp_path, multi_node_config(tmp_path))
    write(svc, "ada", "wait.py", "import time\ntime.sleep(120)\n")
    job = await svc.submit("ada", "wait.py", flavor="cpu-pair")
    await svc.wait("ada", job["id"], lambda j: j["state"] == "running")
    ranks = svc.service.backend.running[job["id"]].ranks  # type: ignore[attr-defined]
    survivor, lost = ranks[0].pid, ranks[1].pid
    await svc.service.stop()  # the service goes; the ranks go on
    svc.server.stop()
    os.killpg(lost, signal.SIGKILL)  # rank 1 dies meanwhile (its node lost, say)
    again = await start(multi_node_config(tmp_path))
    try:
        done = await again.wait("ada", job["id"], timeout=60)
        assert done["state"] == "failed", done
        assert job["id"] not in again.service.backend.running  # type: ignore[attr-defined]
        for _ in range(50):  # rank 0 alone could only wait for rank 1: it is stopped
            if not psutil.pid_exists(survivor) or psutil.Process(survivor).status() == "zombie":
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("rank 0 outlived the rank it needs")
    finally:
        await stop_all(again)


async def test_a_rank_that_cannot_start_takes_back_the_ranks_started_and_their_folders(
    svc, monkeypatch
):
    """Every rank starts, or none: rank 1 refused (its runner could not be started), rank
    0, started a moment before, is stopped, and neither leaves its temporary folder."""
    from nbjobs.job_service.backends import local

    started: list[int] = []
    real_start = local.start_runner

    def start_one(*args, **kwargs):
        if started:
            raise subprocess.SubprocessError("no more processes for this test")
        process = real_start(*args, **kwargs)
        started.append(process.pid)
        return process

    monkeypatch.setattr(local, "start_runner", start_one)
    write(svc, "ada", "pair.py", "import time\ntime.sleep(120)\n")
    job = await svc.submit("ada", "pair.py", flavor="cpu-pair")
    done = await svc.wait("ada", job["id"], timeout=60)

    assert done["state"] == "failed", done
    assert "the runner could not start" in done["message"]
    assert len(started) == 1
    assert not psutil.pid_exists(started[0])  # rank 0's runner: stopped, and reaped
    assert not job_tmp(job["id"], 0).exists()
    assert not job_tmp(job["id"], 1).exists()

"""The user CLI against a real `nbjobs service` process."""

from __future__ import annotations

import http.server
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest
import requests
import yaml

from nbjobs.storage import escape_username

from .conftest import free_port, notebook


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    config = root / "nbjobs.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "storage": {"root": "home"},
                "database": {"url": "sqlite:///jobs.sqlite"},
                "backend": {"local": {"gpus": [], "cpu_slots": 3}},
                "flavors": [
                    {"name": "cpu", "gpus": 0},
                    {"name": "gpu", "gpus": 1},
                    {"name": "short", "gpus": 0, "time_limit": 2},
                    {"name": "listing", "gpus": 0},
                    {"name": "pair", "gpus": 0, "nodes": 2, "time_limit": "10m"},
                ],
            }
        )
    )
    port = free_port()
    log = (root / "service.log").open("w")
    command = [sys.executable, "-m", "nbjobs.cli", "service", f"--config={config}"]
    command += [f"--port={port}", "--StaticTokenAuth.tokens={'t-ada': 'ada'}"]
    proc = subprocess.Popen(
        command,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 30
    while True:
        # The port first, with a socket closed here and now: a refused or reset HTTP
        # request leaves its socket to the garbage collector, whose ResourceWarning
        # then surfaces in whichever test runs next.
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                pass
            with requests.Session() as session:
                session.get(url + "api/health", timeout=5)  # any answer: it is up
            break
        except (OSError, requests.RequestException):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError((root / "service.log").read_text()) from None
            time.sleep(0.1)
    home = root / "home" / escape_username("ada")
    home.mkdir(parents=True)
    yield url, home
    proc.terminate()
    proc.wait(timeout=30)
    log.close()


def cli(service, *args, token="t-ada"):
    url, home = service
    env = {**os.environ, "NBJOBS_URL": url, "NBJOBS_TOKEN": token, "NBJOBS_ROOT": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "nbjobs.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=home,
    )


def write(service, name, *cells):
    path = Path(service[1]) / name
    nbformat.write(notebook(*cells), path)
    return path


def test_submit_wait_exits_like_the_job_and_prints_where_the_output_is(service):
    write(service, "ok.ipynb", "print('from the job')")
    write(service, "bad.ipynb", "1/0")

    ok = cli(service, "submit", "ok.ipynb", "--flavor", "cpu", "--wait")
    bad = cli(service, "submit", "bad.ipynb", "--flavor", "cpu", "--wait")

    assert ok.returncode == 0, ok.stderr
    assert "state:     succeeded" in ok.stdout
    output = next(line.split()[-1] for line in ok.stdout.splitlines() if line.startswith("output:"))
    assert (service[1] / output).exists()
    assert bad.returncode == 1
    assert "raised ZeroDivisionError" in bad.stdout


def test_json_output_for_scripts_and_the_other_commands(service):
    write(service, "p.ipynb", "print(n * 2)")

    submitted = cli(service, "submit", "p.ipynb", "-f", "cpu", "-p", "n", "21", "--json")

    assert submitted.returncode == 0, submitted.stderr
    job = json.loads(submitted.stdout)
    assert job["parameters"] == {"n": 21}
    logs = cli(service, "logs", job["id"], "-f")
    assert "42" in logs.stdout
    shown = json.loads(cli(service, "status", job["id"], "--json").stdout)
    assert shown["state"] == "succeeded"
    listed = cli(service, "list")
    assert job["id"] in listed.stdout
    assert "succeeded" in listed.stdout
    # the author's code cells, counted as the panel counts them (not the injected one)
    assert "1 of 1 code cells done" in listed.stdout
    again = cli(service, "rerun", job["id"], "--wait", "--json")
    assert again.returncode == 0
    assert json.loads(again.stdout)["rerun_of"] == job["id"]


def test_submit_names_the_job_picks_a_kernel_and_where_the_result_goes(service):
    write(service, "q.ipynb", "print('q')")

    done = cli(
        service,
        *("submit", "q.ipynb", "-f", "cpu", "--name", "nightly"),
        *("--kernel", "python3", "--outputs", "folder", "--html", "--wait"),
    )
    refused = cli(service, "submit", "q.ipynb", "-f", "cpu", "--kernel", "julia-1.10")

    assert done.returncode == 0, done.stderr
    shown = dict(line.split(":", 1) for line in done.stdout.splitlines() if ":" in line)
    assert shown["output"].strip().startswith("nbjobs-outputs/q.")
    assert shown["html copy"].strip().endswith(".html")
    assert (service[1] / shown["html copy"].strip()).is_file()
    assert shown["kernel"].strip() == "python3"
    assert refused.returncode == 5
    assert "kernel 'julia-1.10' is not available on flavor 'cpu'" in refused.stderr


def test_list_searches_by_words_and_refuses_everyone_to_a_student(service):
    (service[1] / "needle-study.py").write_text("1\n")  # a script: the subject is the list
    job = json.loads(cli(service, "submit", "needle-study.py", "-f", "cpu", "--json").stdout)

    found = cli(service, "list", "--search", "NEEDLE study", "--json")
    none = cli(service, "list", "--search", "haystack", "--json")
    everyone = cli(service, "list", "--scope", "all")

    assert [j["id"] for j in json.loads(found.stdout)["jobs"]] == [job["id"]]
    assert json.loads(none.stdout)["jobs"] == []
    assert everyone.returncode == 5
    assert "only nbjobs admins may see" in everyone.stderr


def test_submit_runs_a_script_or_a_command_and_exits_like_it(service):
    home = service[1]
    (home / "prep.sh").write_text("echo preparing $NBJOBS_PARAM_SIZE\n")

    script = cli(service, "submit", "prep.sh", "-f", "cpu", "-p", "size", "9", "--wait")
    command = cli(service, "submit", "--command", "echo nope; exit 4", "-f", "cpu", "--wait")
    nothing = cli(service, "submit", "-f", "cpu")

    assert script.returncode == 0, script.stderr
    output = next(
        line.split()[-1] for line in script.stdout.splitlines() if line.startswith("output:")
    )
    assert output.endswith(".log")
    assert (home / output).read_text() == "preparing 9\n"
    assert command.returncode == 1
    assert "the command exited with code 4: nope" in command.stdout
    assert nothing.returncode == 2  # a usage error: nothing was sent
    assert "give a notebook or script to run, or --command" in nothing.stderr


def test_logs_tail_prints_only_the_end_of_a_long_log(service):
    (service[1] / "chatty.py").write_text("for i in range(5000):\n    print(f'line {i:04d}')\n")
    job = json.loads(cli(service, "submit", "chatty.py", "-f", "cpu", "--wait", "--json").stdout)

    whole = cli(service, "logs", job["id"])
    tail = cli(service, "logs", job["id"], "--tail", "1K")
    bad = cli(service, "logs", job["id"], "--tail", "lots")

    assert "line 0000" in whole.stdout
    assert tail.returncode == 0, tail.stderr
    assert len(tail.stdout.encode()) == 1024
    assert whole.stdout.endswith(tail.stdout)
    assert "line 0000" not in tail.stdout
    assert bad.returncode == 2
    assert "not a size" in bad.stderr


def test_cancel_from_the_terminal(service):
    (service[1] / "long.py").write_text("import time; time.sleep(60)\n")  # no kernel to start
    job = json.loads(cli(service, "submit", "long.py", "-f", "cpu", "--json").stdout)

    done = cli(service, "cancel", job["id"])

    assert done.returncode == 0
    assert done.stdout.strip() in (f"{job['id']}: cancelled", f"{job['id']}: running")
    assert json.loads(cli(service, "status", job["id"], "--json").stdout)["state"] == "cancelled"


@pytest.mark.parametrize(
    ("args", "token", "expected"),
    [
        (["submit", "missing.ipynb", "-f", "cpu"], "t-ada", "does not exist in your folder"),
        (["submit", "/etc/hosts", "-f", "cpu"], "t-ada", "is not inside your folder"),
        (
            ["submit", "ok.ipynb", "-f", "gpu"],
            "t-ada",
            "needs 1 GPU(s) and this machine has 0 GPUs",
        ),
        (["status", "0123456789ab"], "t-ada", "no job '0123456789ab' of yours"),
        (["list"], "wrong", "send a JupyterHub API token"),
    ],
)
def test_refusals_exit_5_with_the_reason(service, args, token, expected):
    write(service, "ok.ipynb", "1")

    proc = cli(service, *args, token=token)

    assert proc.returncode == 5
    assert expected in proc.stderr


def test_with_json_a_refusal_is_a_json_object_on_stderr(service):
    proc = cli(service, "status", "0123456789ab", "--json")

    assert proc.returncode == 5
    assert proc.stdout == ""
    error = json.loads(proc.stderr)
    assert "no job '0123456789ab' of yours" in error["error"]
    assert error["status"] == 404
    assert error["exit_code"] == 5


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (["list", "--limit", "many"], {}, "invalid int value: 'many'"),
        (["status"], {}, "the following arguments are required: job"),
        (["list"], {"NBJOBS_URL": ""}, "pass --url or set NBJOBS_URL"),
        (["list"], {"NBJOBS_TOKEN": "", "JUPYTERHUB_API_TOKEN": ""}, "no token"),
    ],
)
def test_usage_errors_exit_2_and_send_nothing(service, args, env, expected):
    url, home = service
    base = {**os.environ, "NBJOBS_URL": url, "NBJOBS_TOKEN": "t-ada", "NBJOBS_ROOT": str(home)}

    def run(*extra):
        return subprocess.run(
            [sys.executable, "-m", "nbjobs.cli", *args, *extra],
            capture_output=True,
            text=True,
            env={**base, **env},
            timeout=60,
        )

    plain, as_json = run(), run("--json")

    assert plain.returncode == 2
    assert expected in plain.stderr
    assert as_json.returncode == 2
    assert expected in json.loads(as_json.stderr)["error"]


def run_cli(url, *args):
    env = {**os.environ, "NBJOBS_URL": url, "NBJOBS_TOKEN": "x"}
    return subprocess.run(
        [sys.executable, "-m", "nbjobs.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_an_unreachable_service_says_where_it_looked():
    url = f"http://127.0.0.1:{free_port()}/"  # nothing listens there

    proc = run_cli(url, "list")
    as_json = run_cli(url, "list", "--json")

    assert proc.returncode == 6
    assert f"cannot reach the job service at {url}api/" in proc.stderr
    assert as_json.returncode == 6
    assert f"cannot reach the job service at {url}api/" in json.loads(as_json.stderr)["error"]


@pytest.fixture
def proxy_error_page():
    """A hub proxy whose service is down: an HTML error page instead of the API."""

    class Down(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"<html><body><h1>503: Service Unavailable</h1></body></html>"
            self.send_response(503)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Down)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/services/nbjobs/"
    httpd.shutdown()
    httpd.server_close()


def test_a_service_that_fails_exits_6_not_like_a_refusal(proxy_error_page):
    proc = run_cli(proxy_error_page, "status", "0123456789ab")

    assert proc.returncode == 6
    assert "answered 503 Service Unavailable, not as the job service does" in proc.stderr
    assert "<html>" not in proc.stderr


def test_submit_wait_exits_3_when_the_job_times_out(service):
    write(service, "slow.ipynb", "import time; time.sleep(60)")

    proc = cli(service, "submit", "slow.ipynb", "-f", "short", "--wait", "--json")

    assert proc.returncode == 3, proc.stderr
    assert json.loads(proc.stdout)["state"] == "timed_out"


def test_submit_wait_exits_4_when_another_terminal_cancels_the_job(service):
    url, home = service
    write(service, "endless.ipynb", "import time; time.sleep(120)")
    env = {**os.environ, "NBJOBS_URL": url, "NBJOBS_TOKEN": "t-ada", "NBJOBS_ROOT": str(home)}
    waiting = subprocess.Popen(
        [sys.executable, "-m", "nbjobs.cli", "submit", "endless.ipynb", "-f", "cpu", "--wait"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=home,
    )
    try:
        # The job's id comes at once, so that another terminal can cancel it.
        first = waiting.stderr.readline()
        job_id = first.split()[1].rstrip(";")
        assert first.startswith(f"submitted {job_id}; waiting"), first

        cancelled = cli(service, "cancel", job_id, "--json")
        out, err = waiting.communicate(timeout=60)
    finally:
        waiting.kill()

    assert cancelled.returncode == 0, cancelled.stderr
    assert json.loads(cancelled.stdout)["id"] == job_id
    assert json.loads(cancelled.stdout)["state"] in ("cancelled", "running")
    assert waiting.returncode == 4, err
    assert "state:     cancelled" in out


def test_list_shows_a_table_and_pages_filtered_by_state_and_flavor(service):
    write(service, "listed.ipynb", "print(1)")
    ids = []
    for _ in range(3):
        done = cli(service, "submit", "listed.ipynb", "-f", "listing", "--wait", "--json")
        assert done.returncode == 0, done.stderr
        ids.append(json.loads(done.stdout)["id"])
    newest_first = ids[::-1]

    table = cli(service, "list", "--flavor", "listing")
    first = cli(service, "list", "--flavor", "listing", "--limit", "2")
    second = cli(service, "list", "--flavor", "listing", "--limit", "2", "--offset", "2")
    as_json = cli(service, "list", "--flavor", "listing", "--state", "succeeded", "--json")
    none_running = cli(service, "list", "--flavor", "listing", "--state", "queued,running")

    lines = table.stdout.splitlines()
    assert lines[0].split() == ["ID", "NAME", "STATE", "FLAVOR", "PROGRESS", "SUBMITTED"]
    assert [line.split()[0] for line in lines[1:]] == newest_first
    assert all(line.split()[2:4] == ["succeeded", "listing"] for line in lines[1:])
    assert all("1 of 1 code cells done" in line for line in lines[1:])
    # aligned: every row's STATE starts where the header's does
    column = lines[0].index("STATE")
    assert all(line[column:].startswith("succeeded") for line in lines[1:])
    assert [line.split()[0] for line in first.stdout.splitlines()[1:3]] == newest_first[:2]
    assert first.stdout.splitlines()[-1] == "(jobs 1-2 of 3; --offset 2 for more)"
    assert second.stdout.splitlines()[1].split()[0] == ids[0]
    assert second.stdout.splitlines()[-1] == "(jobs 3-3 of 3)"
    page = json.loads(as_json.stdout)
    assert [job["id"] for job in page["jobs"]] == newest_first
    assert (page["total"], page["limit"], page["offset"]) == (3, 20, 0)
    assert none_running.stdout.strip() == "no jobs"


def test_list_of_an_unknown_state_is_refused_with_the_states(service):
    proc = cli(service, "list", "--state", "done")

    assert proc.returncode == 5
    assert "unknown state 'done'" in proc.stderr


def test_usage_prints_a_table_by_flavor_and_a_csv_by_day(service):
    _, home = service
    nbformat.write(notebook("1 + 1"), home / "u.ipynb")
    assert cli(service, "submit", "u.ipynb", "--flavor", "cpu", "--wait").returncode == 0
    today = time.strftime("%Y-%m-%d", time.gmtime())
    table = cli(service, "usage", "--by", "flavor", "--since", today)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    # the caller's own use in their budget's period first (no budget here), then the range
    said = r"you: 0 GPU-hours in the last 7 days \(no budget\), \d+ jobs?"
    assert re.fullmatch(said, lines[0]), lines[0]
    assert lines[2] == f"{today} to {today} (whole UTC days), by flavor"
    header = ["FLAVOR", "JOBS", "GPU-H", "ALLOCATED", "GPU-H", "BUSY", "BUSY", "%", "COST"]
    assert lines[3].split() == header
    cpu = next(line.split() for line in lines if line.startswith("cpu "))
    assert cpu[2:] == ["0.00", "0.00", "-", "-"]  # a CPU job holds no GPU
    assert int(cpu[1]) >= 1
    assert lines[-1].split()[0] == "total"
    as_csv = cli(service, "usage", "--csv", "--since", today)
    assert as_csv.returncode == 0, as_csv.stderr
    assert as_csv.stdout.splitlines()[0] == "user,date,gpu_hours_allocated,gpu_hours_busy"
    refused = cli(service, "usage", "--since", "yesterday")
    assert refused.returncode == 5
    assert "since must be a date like 2026-11-16, not 'yesterday'" in refused.stderr


def test_usage_text_and_csv_show_hours_busy_percent_and_cost():
    from nbjobs.client.reports import usage_csv, usage_text

    line = {
        "name": "ada",
        "jobs": 2,
        "gpu_hours_allocated": 6.0,
        "gpu_hours_busy": 2.0,
        "busy_percent": 33.3,
        "cost": 9.0,
        "days": [
            {"date": "2026-11-23", "gpu_hours_allocated": 4.0, "gpu_hours_busy": 2.0},
            {"date": "2026-11-24", "gpu_hours_allocated": 2.0, "gpu_hours_busy": 0.0},
        ],
    }
    body = {
        "range_since": "2026-11-23",
        "range_until": "2026-11-24",
        "by": "user",
        "breakdown": [line],
        "total": {**line, "name": "total"},
    }
    assert usage_text(body).splitlines()[2].split() == ["ada", "2", "6.00", "2.00", "33.3", "9.00"]
    assert usage_csv(body).splitlines() == [
        "user,date,gpu_hours_allocated,gpu_hours_busy",
        "ada,2026-11-23,4.0,2.0",
        "ada,2026-11-24,2.0,0.0",
    ]
    assert usage_text({**body, "breakdown": [], "total": None}).endswith(
        "no GPU time in this range"
    )


def test_status_shows_a_jobs_warning():
    from nbjobs.client.cli import _details

    job = {
        "id": "abc",
        "state": "running",
        "path": "t.ipynb",
        "output_path": "t.out.ipynb",
        "flavor": "gpu",
        "submitted_at": "2026-11-25T09:00:00Z",
        "warning": "its GPUs have been idle (below 5 %) for 30 min; if it does not need them, "
        "cancel it",
    }
    assert _details(job).splitlines()[-1] == (
        "warning:   its GPUs have been idle (below 5 %) for 30 min; if it does not need them, "
        "cancel it"
    )


def test_status_says_a_running_job_runs_on_borrowed_gpus():
    from nbjobs.client.cli import _details

    words = (
        "running while its queue team-a uses 1 GPU(s) borrowed from the cohort teaching: "
        "Kueue may take them back for the queue that lent them, and this job would then be "
        "queued again"
    )
    job = {
        "id": "abc",
        "state": "running",
        "path": "t.ipynb",
        "output_path": "t.out.ipynb",
        "flavor": "gpu",
        "submitted_at": "2026-11-25T09:00:00Z",
        "borrowing": words,
    }
    assert _details(job).splitlines()[-1] == f"borrowing: {words}"


def test_flavors_lists_what_a_user_may_use_and_why_one_cannot_run(service):
    shown = cli(service, "flavors")
    as_json = cli(service, "flavors", "--json")

    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].split() == ["NAME", "GIVES", "FREE", "NOW", "QUEUED", "TIME", "LIMIT"]
    cpu = next(line for line in lines if line.startswith("cpu "))
    assert "no GPU" in cpu
    assert "4 h" in cpu  # the default time limit
    short = next(line for line in lines if line.startswith("short "))
    assert "2 s" in short
    # this service has no GPU: the gpu flavor says why no job of it could start
    gpu_note = next(line for line in lines if line.startswith("gpu: "))
    assert "GPU" in gpu_note
    assert {f["name"] for f in json.loads(as_json.stdout)} == {
        "cpu",
        "gpu",
        "short",
        "listing",
        "pair",
    }
    # a multi-node flavor says how many nodes a job of it spans
    pair = next(line for line in lines if line.startswith("pair "))
    assert "2 nodes, no GPU" in pair
    assert "nodes" not in cpu


def test_flavors_text_shows_what_each_node_of_a_multi_node_flavor_gives():
    from nbjobs.client.reports import flavors_text

    common = {"queued": 0, "available": 1, "time_limit": 600}
    offered = [
        {"name": "pair", "gpus": 1, "nodes": 2, "gpu_type": "A100", "cpu": 8, **common},
        {"name": "duo", "gpus": 4, "nodes": 2, **common},
        {"name": "cpus", "gpus": 0, "nodes": 3, "cpu": 4, **common},
        {"name": "one", "gpus": 1, "nodes": 1, **common},
    ]
    rows = {line.split()[0]: line for line in flavors_text(offered).splitlines()[1:]}
    assert "2 nodes x (1 GPU, A100, 8 CPU)" in rows["pair"]
    assert "2 nodes x 4 GPU" in rows["duo"]
    assert "3 nodes x 4 CPU, no GPU" in rows["cpus"]
    assert "nodes" not in rows["one"]


#: each rank says who it is; the service runs it once per rank, each with its own log
RANKS = 'import os\nprint("I am rank", os.environ["RANK"], "of", os.environ["WORLD_SIZE"])\n'


def test_submit_nodes_refuses_a_flavor_spanning_another_number(service):
    (service[1] / "ranks.py").write_text(RANKS)

    refused = cli(service, "submit", "ranks.py", "-f", "cpu", "--nodes", "2")
    as_json = cli(service, "submit", "ranks.py", "-f", "cpu", "--nodes", "2", "--json")
    zero = cli(service, "submit", "ranks.py", "-f", "cpu", "--nodes", "0")
    agreed = cli(service, "submit", "ranks.py", "-f", "pair", "--nodes", "2", "--json")

    assert refused.returncode == 5
    assert (
        "flavor 'cpu' runs a job on 1 node, not 2; your flavors on 2 nodes: pair" in refused.stderr
    )
    assert json.loads(as_json.stderr)["status"] == 400
    assert zero.returncode == 2  # a usage error: nothing was sent
    assert "it must be 1 or more" in zero.stderr
    assert agreed.returncode == 0, agreed.stderr
    assert json.loads(agreed.stdout)["nodes"] == 2


def test_logs_rank_reads_the_log_of_each_rank_of_a_multi_node_job(service):
    (service[1] / "ranks.py").write_text(RANKS)
    done = cli(service, "submit", "ranks.py", "-f", "pair", "--wait")
    assert done.returncode == 0, done.stdout + done.stderr
    job_id = next(line.split()[-1] for line in done.stdout.splitlines() if line.startswith("job:"))

    rank0 = cli(service, "logs", job_id)
    rank1 = cli(service, "logs", job_id, "--rank", "1")
    followed = cli(service, "logs", job_id, "--rank", "1", "-f", "--tail", "16")
    missing = cli(service, "logs", job_id, "--rank", "2")
    negative = cli(service, "logs", job_id, "--rank", "-1")
    shown = cli(service, "status", job_id)

    assert rank0.returncode == 0, rank0.stderr
    assert "I am rank 0 of 2" in rank0.stdout
    assert "I am rank 1" not in rank0.stdout
    assert rank1.returncode == 0, rank1.stderr
    assert "I am rank 1 of 2" in rank1.stdout
    assert "I am rank 0" not in rank1.stdout
    assert followed.returncode == 0, followed.stderr
    assert len(followed.stdout.encode()) == 16
    assert rank1.stdout.endswith(followed.stdout)
    assert missing.returncode == 5
    assert "runs on 2 nodes: its ranks are 0 to 1, not 2" in missing.stderr
    assert negative.returncode == 2
    assert "a rank cannot be negative" in negative.stderr
    assert f"nodes:     2 (logs of each rank: nbjobs logs {job_id} --rank N)" in shown.stdout
    assert "\nnodes:" in done.stdout  # --wait prints the same details
    # a job on one node says nothing of nodes
    single = json.loads(cli(service, "submit", "ranks.py", "-f", "cpu", "--wait", "--json").stdout)
    assert "nodes:" not in cli(service, "status", single["id"]).stdout


@pytest.mark.parametrize(
    ("state", "progress", "words"),
    [
        (
            "running",
            {"cells_done": 0, "cells_total": 5, "current_cell": None},
            "starting the kernel",
        ),
        ("running", {"cells_done": 2, "cells_total": 5, "current_cell": 4}, "code cell 3 of 5"),
        (
            "cancelled",
            {"cells_done": 1, "cells_total": 4, "current_cell": 2},
            "1 of 4 code cells done",
        ),
        (
            "succeeded",
            {"cells_done": 4, "cells_total": 4, "current_cell": None},
            "4 of 4 code cells done",
        ),
    ],
)
def test_the_cli_names_a_jobs_cells_as_the_panel_and_the_log_do(state, progress, words):
    """The panel says "code cell 3 of 5" while two are done, as the runner's log names the
    cell it starts; nbjobs list and status say it the same way (they said "2/5 cells")."""
    from nbjobs.client.cli import _details, _progress

    job = {"id": "j1", "state": state, "progress": progress, "path": "a.ipynb"}
    assert _progress(job) == words
    job |= {"flavor": "cpu", "output_path": "a.out.ipynb", "submitted_at": "-"}
    assert f"progress:  {words}" in _details(job)

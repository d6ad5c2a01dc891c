"""Teachers provision classes through a real JupyterHub configured by hub_config.

The hub runs hub_config's ``configure()`` on an nbjobs.yaml (its roles, custom
scopes and the managed job service); teachers run the real ``nbjobs class``
command with their own hub tokens; the outcome is read back from the hub's
own REST API.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
import requests
import yaml

from nbjobs.storage import escape_username
from tests.machine import this_runs

from .hubproc import basics, free_port, nbjobs_here, run_nbjobs, running_hub

HUB_CONFIG = """
from nbjobs.hub_config import configure
configure(c, {config!r}, service_port={service_port})
c.Authenticator.allowed_users = {{"tess", "tom", "ada", "bob", "eve", "root", "rita", "sam"}}
c.Authenticator.admin_users = {{"root"}}
c.JupyterHub.load_groups["staff"] = {{"users": ["sam"]}}
c.JupyterHub.load_roles.append({{"name": "auditor", "users": ["rita"], "scopes": ["read:users"]}})
c.JupyterHub.services.append({{"name": "test-admin", "api_token": {admin_token!r}}})
c.JupyterHub.load_roles.append(
    {{"name": "token-maker", "services": ["test-admin"],
      "scopes": ["tokens", "admin:users", "admin:groups", "read:groups", "list:groups"]}}
)
"""

NBJOBS = {
    "backend": {"kind": "local", "local": {"gpus": [], "cpu_slots": 2}},
    "flavors": [
        {"name": "cpu", "gpus": 0},
        {"name": "lab-cpu", "gpus": 0, "groups": ["nobody"]},
        {"name": "big-cpu", "gpus": 0, "groups": ["nobody"]},
    ],
    "teachers": {"users": ["tess", "tom"], "flavors": ["cpu", "lab-cpu"], "max_gpu_hours": 5},
    "admin": {"groups": ["staff"]},
}


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("classes")
    port, hub_port, service_port = free_port(), free_port(), free_port()
    admin_token = secrets.token_hex(16)
    config = dict(NBJOBS)
    config["storage"] = {"root": str(tmp / "home")}
    config["database"] = {"url": f"sqlite:///{tmp}/jobs.sqlite"}
    (tmp / "nbjobs.yaml").write_text(yaml.safe_dump(this_runs(config)))
    hub_config = HUB_CONFIG.format(
        config=str(tmp / "nbjobs.yaml"),
        service_port=service_port,
        admin_token=admin_token,
    )
    with running_hub(tmp, basics(tmp, port, hub_port) + hub_config, port) as url:
        yield Hub(url, tokens_for(url, admin_token), {"Authorization": f"token {admin_token}"}, tmp)


def tokens_for(url: str, admin_token: str) -> dict[str, str]:
    admin = {"Authorization": f"token {admin_token}"}
    tokens = {}
    for user in ("tess", "tom", "ada", "bob", "eve", "sam"):
        r = requests.post(
            f"{url}/hub/api/users/{user}/tokens", headers=admin, json={"note": "t"}, timeout=30
        )
        r.raise_for_status()
        tokens[user] = r.json()["token"]
    return tokens


class Hub:
    def __init__(self, url: str, tokens: dict[str, str], admin: dict[str, str], tmp: Path):
        self.url, self.tokens, self.admin, self.tmp = url, tokens, admin, tmp
        self.service = f"{url}/services/nbjobs/"

    def nbjobs(self, user: str, *args: str) -> subprocess.CompletedProcess[str]:
        """Run the real `nbjobs` command as ``user`` (their token, the service's URL),
        its main in this process (what it says and does; the first test runs it as a
        process of its own, as a teacher does)."""
        return nbjobs_here(self.service, self.tokens[user], *args, cwd=self.tmp)

    def nbjobs_process(self, user: str, *args: str) -> subprocess.CompletedProcess[str]:
        """``nbjobs ARGS`` as ``user`` in a process of its own, as a teacher types it."""
        return run_nbjobs(self.service, self.tokens[user], *args, cwd=self.tmp)

    def api(self, user: str, method: str, path: str, **kwargs) -> requests.Response:
        headers = {"Authorization": f"token {self.tokens[user]}"}
        return requests.request(
            method, self.service + "api/" + path, headers=headers, timeout=60, **kwargs
        )

    def group(self, name: str) -> dict | None:
        r = requests.get(f"{self.url}/hub/api/groups/{name}", headers=self.admin, timeout=30)
        return r.json() if r.status_code == 200 else None

    def klass(self, name: str) -> dict | None:
        """The hub group of class ``name`` (classes live in groups of their own)."""
        return self.group(f"nbjobs-class-{name}")

    def user_exists(self, name: str) -> bool:
        r = requests.get(f"{self.url}/hub/api/users/{name}", headers=self.admin, timeout=30)
        return r.status_code == 200

    def roster(self, name: str, text: str) -> str:
        path = self.tmp / name
        path.write_text(text)
        return str(path)


def test_a_teacher_creates_a_class_from_a_roster(hub):
    roster = hub.roster("ml101.csv", "username,full name\nada,Ada L.\n\n# late\ndora,Dora E.\n")

    done = hub.nbjobs_process(
        "tess", "class", "create", "ml101", "--roster", roster, "--flavors", "lab-cpu",
        "--gpu-hours", "3",
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert "created class ml101" in done.stdout
    group = hub.klass("ml101")
    assert group is not None
    assert sorted(group["users"]) == ["ada", "dora"]
    assert group["properties"]["nbjobs_class"]["teachers"] == ["tess"]
    assert group["properties"]["nbjobs_class"]["gpu_hours"] == 3
    # dora had never logged in: the roster created her hub account
    assert hub.user_exists("dora")
    # Students see the class's flavors and no others; everyone else sees the open ones.
    assert [f["name"] for f in hub.api("ada", "GET", "flavors").json()] == ["lab-cpu"]
    assert [f["name"] for f in hub.api("bob", "GET", "flavors").json()] == ["cpu"]
    listed = hub.nbjobs("tess", "class", "list")
    assert listed.returncode == 0
    assert "ml101" in listed.stdout
    assert "2 students" in listed.stdout


def test_a_bad_roster_names_every_line_and_changes_nothing(hub):
    assert hub.nbjobs("tess", "class", "create", "first", "bob").returncode == 0
    roster = hub.roster(
        "bad.csv", "carol\nnot a name\ncarol\nbob\nfrank\n"
    )  # line 2 invalid, 3 duplicate, 4 in another class

    refused = hub.nbjobs("tom", "class", "create", "second", "--roster", roster)

    assert refused.returncode == 5
    assert "nothing was changed" in refused.stderr
    assert "bad.csv, line 2: 'not a name': not a valid user name" in refused.stderr
    assert "bad.csv, line 3: 'carol': listed twice" in refused.stderr
    assert "bad.csv, line 4: 'bob': already a student of class 'first'" in refused.stderr
    assert hub.klass("second") is None
    assert not hub.user_exists("carol")
    assert not hub.user_exists("frank")


def test_a_roster_is_checked_before_it_is_sent_and_nothing_changes(hub):
    assert hub.nbjobs("tess", "class", "create", "checked", "gil").returncode == 0
    names = ["hal", "Not A Name", "HAL", "gil", "ivy"]

    r = hub.api("tom", "POST", "roster-check", json={"students": names})

    assert r.status_code == 200, r.text
    problems = {p["index"]: p["reason"] for p in r.json()["problems"]}
    assert sorted(problems) == [1, 2, 3]  # hal and ivy would be taken
    assert "not a valid user name" in problems[1]
    assert "listed twice" in problems[2]
    assert "already a student of class 'checked'" in problems[3]
    # of those it would take, hal and ivy have no account yet: they would be made, invited
    assert (r.json()["new_accounts"], r.json()["already"]) == ([0, 4], [])
    assert not hub.user_exists("hal")  # a preview makes nobody
    assert not hub.user_exists("ivy")
    # into her own class gil is no problem, only no change; another teacher's class is not
    # hers to check
    mine = hub.api(
        "tess",
        "POST",
        "roster-check",
        json={"students": ["Gil", "jo"], "class_name": "checked"},
    )
    assert mine.json() == {"problems": [], "already": [0], "new_accounts": [1]}
    theirs = hub.api(
        "tom", "POST", "roster-check", json={"students": ["x"], "class_name": "checked"}
    )
    assert theirs.status_code == 404
    # students do not provision classes
    assert hub.api("ada", "POST", "roster-check", json={"students": ["x"]}).status_code == 403


def test_a_class_belongs_to_its_teachers(hub):
    created = hub.nbjobs("tess", "class", "create", "owned", "eve", "--json")
    # without --gpu-hours the class gets the most the admin allows
    assert json.loads(created.stdout)["gpu_hours"] == 5

    other = hub.nbjobs("tom", "class", "add", "owned", "zed")
    student = hub.nbjobs("eve", "class", "create", "mine", "bob")

    assert other.returncode == 5
    assert "no class 'owned' of yours" in other.stderr
    assert "zed" not in hub.klass("owned")["users"]
    assert student.returncode == 5
    assert "lacks the custom:nbjobs:teach scope" in student.stderr
    assert hub.klass("mine") is None
    assert hub.nbjobs("tom", "class", "list", "owned").returncode == 5


def test_teachers_may_not_exceed_what_the_admin_allows(hub):
    too_much = hub.nbjobs("tess", "class", "create", "greedy", "zoe", "--gpu-hours", "50")
    wrong_flavor = hub.nbjobs("tess", "class", "create", "greedy", "zoe", "--flavors", "big-cpu")

    assert too_much.returncode == 5
    assert "at most 5 GPU-hours per student" in too_much.stderr
    assert wrong_flavor.returncode == 5
    assert "teachers may give: cpu, lab-cpu" in wrong_flavor.stderr
    assert hub.klass("greedy") is None


def test_a_teacher_names_only_teachers_as_co_teachers(hub):
    """The attack: a teacher makes a student co-teacher, who then manages the class."""
    student = hub.nbjobs("tess", "class", "create", "c2", "newkid", "--teacher", "ada")
    teacher = hub.nbjobs("tess", "class", "create", "c3", "newkid2", "--teacher", "tom")

    assert student.returncode == 5
    assert (
        "ada may not teach here (no teacher role): a class's co-teachers must be teachers "
        "already; ask an admin to make them one"
    ) in student.stderr
    assert hub.klass("c2") is None
    assert not hub.user_exists("newkid")  # nothing was created
    assert teacher.returncode == 0, teacher.stderr
    assert hub.klass("c3")["properties"]["nbjobs_class"]["teachers"] == ["tess", "tom"]
    assert hub.nbjobs("tess", "class", "delete", "c3").returncode == 0


@pytest.mark.parametrize(
    ("name", "meaning"),
    [("nobody", "it may use flavor 'lab-cpu'"), ("staff", "its members are nbjobs admins")],
)
def test_a_class_named_like_a_group_that_grants_something_grants_nothing(hub, name, meaning):
    """The attack: a class named after the group a restricted flavor names (or admins'),
    so that its students get that flavor (or become admins). The class is made, in a hub
    group of its own, and its student gets nothing that group name is given."""
    made = hub.api("tess", "POST", "classes", json={"name": name, "students": [f"zed-{name}"]})
    assert made.status_code == 201, made.text
    token = requests.post(
        f"{hub.url}/hub/api/users/zed-{name}/tokens", headers=hub.admin, json={}, timeout=30
    ).json()["token"]
    as_zed = {"Authorization": f"token {token}"}
    flavors = requests.get(hub.service + "api/flavors", headers=as_zed, timeout=60)
    everyone = requests.get(
        hub.service + "api/jobs", headers=as_zed, params={"scope": "all"}, timeout=60
    )
    notices = hub.api("sam", "GET", "dashboard/overview").json()["class_notices"]  # an admin
    hub.api("tess", "DELETE", f"classes/{name}")

    assert hub.group(name) is None or f"zed-{name}" not in hub.group(name)["users"]
    assert (
        f"class {name!r} has the name of a group nbjobs.yaml gives meaning to ({meaning}); the "
        f"class is hub group 'nbjobs-class-{name}' and its students get none of that. Rename "
        "the class or the group if that is not what you meant"
    ) in notices
    assert [f["name"] for f in flavors.json()] == ["cpu"]
    assert everyone.status_code == 403, everyone.text


def test_a_class_whose_name_gained_a_meaning_later_grants_nothing_of_it(hub):
    """A class made before an admin named a group like it in nbjobs.yaml (here: big-cpu's
    group "nobody"): its students are in a hub group of that name, and still get nothing
    that group is given. Made as nbjobs makes a class (a group with the class property),
    by the hub's API, since creating one of that name through nbjobs is refused now."""
    assert hub.nbjobs("tess", "class", "create", "early", "zed2").returncode == 0
    settings = hub.klass("early")["properties"]
    assert hub.nbjobs("tess", "class", "delete", "early").returncode == 0
    api = f"{hub.url}/hub/api"
    made = requests.post(
        f"{api}/groups/nobody", headers=hub.admin, json={"users": ["zed2"]}, timeout=30
    )
    assert made.status_code in (201, 409), made.text
    requests.post(
        f"{api}/groups/nobody/users", headers=hub.admin, json={"users": ["zed2"]}, timeout=30
    ).raise_for_status()
    requests.put(
        f"{api}/groups/nobody/properties", headers=hub.admin, json=settings, timeout=30
    ).raise_for_status()
    token = requests.post(
        f"{api}/users/zed2/tokens", headers=hub.admin, json={"note": "t"}, timeout=30
    ).json()["token"]
    headers = {"Authorization": f"token {token}"}
    try:
        # the service reads the hub's classes at most every 10 s (and at its start, which
        # is when a name given meaning in nbjobs.yaml takes effect)
        deadline = time.monotonic() + 30
        while "nobody" not in [c["name"] for c in hub.api("sam", "GET", "classes").json()]:
            assert time.monotonic() < deadline, "the service never read the class"
            time.sleep(0.5)
        flavors = requests.get(hub.service + "api/flavors", headers=headers, timeout=60)
        submit = requests.post(
            hub.service + "api/jobs",
            headers=headers,
            json={"path": "x.ipynb", "flavor": "big-cpu"},
            timeout=60,
        )
        classes = hub.api("sam", "GET", "classes")  # sam: an nbjobs admin (group staff)
    finally:
        requests.delete(f"{api}/groups/nobody", headers=hub.admin, timeout=30)

    assert "zed2" in hub_group_users(settings, classes.json(), "nobody")
    assert [f["name"] for f in flavors.json()] == ["cpu"]
    assert submit.status_code == 403, submit.text
    assert submit.json()["message"] == ("you may not use flavor 'big-cpu'; your flavors are: cpu")


def hub_group_users(settings: dict, classes: list[dict], name: str) -> list[str]:
    """The students of class ``name`` as the job service lists it (it is a class)."""
    assert settings.get("nbjobs_class"), settings
    return next(c["students"] for c in classes if c["name"] == name)


def test_add_remove_and_delete_keep_students_and_their_work(hub):
    assert hub.nbjobs("tess", "class", "create", "cv", "gus").returncode == 0

    # students named after an option count as well as before it
    added = hub.nbjobs("tess", "class", "add", "cv", "hal", "--json", "ivy")
    again = hub.nbjobs("tess", "class", "add", "cv", "hal", "hal")
    removed = hub.nbjobs("tess", "class", "remove", "cv", "gus")
    not_there = hub.nbjobs("tess", "class", "remove", "cv", "nobody")

    assert added.returncode == 0, added.stderr
    assert again.returncode == 5
    assert "command line: 'hal': listed twice" in again.stderr
    assert removed.returncode == 0
    assert sorted(hub.klass("cv")["users"]) == ["hal", "ivy"]
    assert not_there.returncode == 5
    assert "not a student of class 'cv'" in not_there.stderr

    deleted = hub.nbjobs("tess", "class", "delete", "cv")

    assert deleted.returncode == 0
    assert "accounts, files and jobs are kept" in deleted.stdout
    assert hub.klass("cv") is None
    assert hub.user_exists("hal")


def test_a_teacher_sees_the_class_jobs_and_cancels_but_does_not_rerun(hub):
    # ada is in ml101 (tess's) from the first test; tom teaches nothing of hers.
    if hub.klass("ml101") is None:
        hub.nbjobs("tess", "class", "create", "ml101", "ada", "--flavors", "lab-cpu")
    home = hub.tmp / "home" / escape_username("ada")
    home.mkdir(parents=True, exist_ok=True)
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nb.cells = [nbformat.v4.new_code_cell("import time; time.sleep(60)")]
    nbformat.write(nb, home / "train.ipynb")
    job = hub.api("ada", "POST", "jobs", json={"path": "train.ipynb", "flavor": "lab-cpu"})
    assert job.status_code == 201, job.text
    job_id = job.json()["id"]

    listed = hub.nbjobs("tess", "list", "--class", "ml101", "--json")
    seen_by_tom = hub.api("tom", "GET", f"jobs/{job_id}")
    tom_lists = hub.api("tom", "GET", "jobs", params={"class": "ml101"})
    rerun = hub.api("tess", "POST", f"jobs/{job_id}/rerun")
    cancelled = hub.api("tess", "POST", f"jobs/{job_id}/cancel")

    assert listed.returncode == 0, listed.stderr
    assert [j["id"] for j in json.loads(listed.stdout)["jobs"]] == [job_id]
    assert seen_by_tom.status_code == 404
    assert tom_lists.status_code == 404
    # the teacher sees the job, so is told why not rather than that it does not exist
    assert rerun.status_code == 403
    assert rerun.json()["message"] == (
        f"job {job_id} belongs to ada: only its owner (or an admin) does that"
    )
    assert cancelled.status_code == 200
    assert cancelled.json()["state"] == "cancelled"


@pytest.mark.parametrize(
    ("student", "reason"),
    [
        ("root", "'root': a JupyterHub admin; a class's students may not be teachers or admins"),
        ("tom", "'tom': a teacher (nbjobs.yaml); a class's students may not be"),
        ("sam", "'sam': in admin group 'staff'; a class's students may not be"),
        ("rita", "'rita': holds the JupyterHub role 'auditor'; a class's students may not be"),
        ("Tom", "'tom': a teacher (nbjobs.yaml)"),
    ],
)
def test_a_teacher_may_not_enrol_admins_or_teachers(hub, student, reason):
    """A class's teachers see and cancel its students' jobs: privileged users never join one."""
    before = requests.get(f"{hub.url}/hub/api/users", headers=hub.admin, timeout=30).json()
    ok = f"grab-{student.lower()}-ok"
    assert hub.nbjobs("tess", "class", "create", ok, "pia").returncode == 0
    roster = hub.roster("grab.csv", f"pia2\n{student}\n")

    created = hub.nbjobs("tess", "class", "create", f"grab-{student.lower()}", "--roster", roster)
    added = hub.nbjobs("tess", "class", "add", ok, student)

    assert created.returncode == 5
    assert f"grab.csv, line 2: {reason}" in created.stderr
    assert hub.klass(f"grab-{student.lower()}") is None
    assert not hub.user_exists("pia2")
    assert added.returncode == 5
    assert f"command line: {reason}" in added.stderr
    assert hub.klass(ok)["users"] == ["pia"]
    hub.nbjobs("tess", "class", "delete", ok)
    after = requests.get(f"{hub.url}/hub/api/users", headers=hub.admin, timeout=30).json()
    assert {u["name"]: u["admin"] for u in after} == {
        **{u["name"]: u["admin"] for u in before},
        "pia": False,
    }


def test_the_teacher_of_another_class_is_not_a_student(hub):
    # an admin may name anyone co-teacher (a teacher may name only teachers)
    made = hub.nbjobs("sam", "class", "create", "cotaught", "ula", "--teacher", "cora")
    assert made.returncode == 0, made.stderr

    refused = hub.nbjobs("tess", "class", "create", "takeover", "cora")

    assert refused.returncode == 5
    assert "'cora': a teacher (class 'cotaught')" in refused.stderr
    assert hub.klass("takeover") is None


def test_names_differing_only_in_case_are_one_student(hub):
    roster = hub.roster("cases.csv", "Zara\n  Yuri \nzara\n")

    refused = hub.nbjobs("tess", "class", "create", "cases", "--roster", roster)
    made = hub.nbjobs("tess", "class", "create", "cases", "Quinn", " Yuri ")

    assert refused.returncode == 5
    assert (
        "cases.csv, line 3: 'zara': listed twice (first as entry 1, 'Zara'; "
        "names are not case-sensitive)" in refused.stderr
    )
    assert not hub.user_exists("zara")
    assert made.returncode == 0, made.stderr
    # stored as JupyterHub stores names: the hub account is the one its owner logs in as
    assert sorted(hub.klass("cases")["users"]) == ["quinn", "yuri"]
    assert hub.nbjobs("tess", "class", "remove", "cases", "QUINN").returncode == 0
    assert hub.klass("cases")["users"] == ["yuri"]


def test_adding_bad_students_names_each_and_changes_nothing(hub):
    assert hub.nbjobs("tess", "class", "create", "mine-a", "wes").returncode == 0
    assert hub.nbjobs("tom", "class", "create", "theirs", "xia").returncode == 0
    roster = hub.roster("more.csv", "username\nvic\nnot a name\nxia\n")

    refused = hub.nbjobs("tess", "class", "add", "mine-a", "--roster", roster)

    assert refused.returncode == 5
    assert "more.csv, line 3: 'not a name': not a valid user name" in refused.stderr
    assert "more.csv, line 4: 'xia': already a student of class 'theirs'" in refused.stderr
    assert hub.klass("mine-a")["users"] == ["wes"]
    assert hub.klass("theirs")["users"] == ["xia"]
    assert not hub.user_exists("vic")


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('ada\n"bob\ncarl\n', "line 2: not valid CSV (unexpected end of data)"),
        ('"ada"x,y\n', "line 1: not valid CSV"),
        ("", "names no students; put one user name per line"),
        ("username\n# nobody yet\n\n", "names no students"),
        (b"PK\x03\x04\xff\xfe spreadsheet", "is not UTF-8 text; save it as CSV"),
    ],
)
def test_a_roster_that_is_not_a_csv_list_of_names_is_refused(hub, content, expected):
    path = hub.tmp / "odd.csv"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())

    created = hub.nbjobs("tess", "class", "create", "odd", "--roster", str(path))
    added = hub.nbjobs("tess", "class", "add", "odd", "--roster", str(path))

    assert created.returncode == 5
    assert expected in created.stderr
    assert added.returncode == 5
    assert expected in added.stderr
    assert hub.klass("odd") is None


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["add", "ml101", "--url", "http://127.0.0.1:1/"], 2, "name students, or give --roster"),
        (["list", "--url", ""], 2, "pass --url or set NBJOBS_URL"),
        (["list", "--url", f"http://127.0.0.1:{free_port()}/"], 6, "cannot reach"),
    ],
    ids=["no-students", "no-url", "unreachable"],
)
def test_class_commands_exit_like_the_rest_of_nbjobs(args, code, words):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NBJOBS")}
    env["NBJOBS_TOKEN"] = "some-token"

    done = subprocess.run(
        [sys.executable, "-m", "nbjobs.cli", "class", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == code, done.stderr
    assert words in done.stderr

"""Classes an admin declares in nbjobs.yaml: their flavors, GPU-hours and teachers.

(Classes teachers create through the hub are tested with a real hub in tests/hub.)
"""

from __future__ import annotations

from .conftest import stop_service

CLASSES = {
    "classes": [
        {
            "name": "ml101",
            "teachers": ["eve"],
            "students": ["ada"],
            "flavors": ["slice", "cpu"],
            "gpu_hours": 0,
        }
    ],
}


async def test_a_student_gets_the_class_flavors_and_budget(start):
    svc = await start(CLASSES)
    try:
        svc.write("ada", "h.ipynb", "1")
        async with svc.client("ada") as c:
            flavors = [f["name"] for f in (await c.get("flavors")).json()]
            over = await c.post("jobs", json={"path": "h.ipynb", "flavor": "slice"})
            other = await c.post("jobs", json={"path": "h.ipynb", "flavor": "gpu"})
        async with svc.client("bob") as c:
            bobs = [f["name"] for f in (await c.get("flavors")).json()]

        # The class names its flavors; the open "gpu" flavor is not among them.
        assert flavors == ["cpu", "slice"]
        assert over.status_code == 429
        assert "of your 0 GPU-hours in the last 7 days" in over.json()["message"]
        assert other.status_code == 403
        assert "your flavors are: cpu, slice" in other.json()["message"]
        # bob is in no class: the open flavors, and the usual budget
        assert "gpu" in bobs
    finally:
        await stop_service(svc)


async def test_the_teacher_sees_the_class_jobs_and_nobody_else_does(start):
    svc = await start(CLASSES)
    try:
        svc.write("ada", "h.ipynb", "1")
        job = await svc.submit("ada", "h.ipynb", flavor="cpu")
        async with svc.client("eve") as c:
            listed = await c.get("jobs", params={"class": "ml101"})
            one = await c.get(f"jobs/{job['id']}")
            classes = await c.get("classes")
            create = await c.post("classes", json={"name": "ml102", "students": ["bob"]})
        async with svc.client("bob") as c:
            hidden = await c.get(f"jobs/{job['id']}")
            not_his = await c.get("jobs", params={"class": "ml101"})

        assert [j["id"] for j in listed.json()["jobs"]] == [job["id"]]
        assert one.status_code == 200
        assert [c["name"] for c in classes.json()] == ["ml101"]
        assert classes.json()[0]["source"] == "nbjobs.yaml"
        # eve is not among nbjobs.yaml's teachers, so she may not make new classes
        assert create.status_code == 403
        assert hidden.status_code == 404
        assert not_his.status_code == 404
    finally:
        await stop_service(svc)


async def test_without_a_hub_new_classes_are_refused_with_the_way_out(start):
    svc = await start({**CLASSES, "teachers": {"users": ["eve"]}})
    try:
        async with svc.client("eve") as c:
            create = await c.post("classes", json={"name": "ml102", "students": ["bob"]})
            change = await c.post("classes/ml101/students", json={"students": ["bob"]})

        assert create.status_code == 409
        assert "define classes in nbjobs.yaml instead" in create.json()["message"]
        assert change.status_code == 409
    finally:
        await stop_service(svc)

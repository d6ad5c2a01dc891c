"""``POST api/invitations`` on a job service without a hub: refused in words, for
everyone (there is no hub login to invite anyone to)."""

from __future__ import annotations


async def test_a_service_without_a_hub_makes_no_invitations(svc):
    async with svc.client("root") as admin, svc.client("ada") as ada:
        by_admin = await admin.post("invitations", json={"user": "bob"})
        by_user = await ada.post("invitations", json={"user": "bob"})
        empty = await admin.post("invitations", json={"user": ""})

    assert by_admin.status_code == 409
    assert by_admin.json()["message"] == (
        "this job service runs without a hub, so there is no hub login to invite anyone to; "
        "its users are the tokens file's"
    )
    assert by_user.status_code == 409
    assert empty.status_code == 400

"""nbjobs.yaml may not give a class's hub group anything: a class grants nothing."""

from __future__ import annotations

import pytest

from nbjobs.config import ConfigError, parse_config

FLAVORS = "flavors:\n- name: cpu\n  gpus: 0\n"


@pytest.mark.parametrize(
    ("text", "line", "setting", "meaning"),
    [
        (
            "admin:\n  groups: [staff, nbjobs-class-ml101]\n",
            2,
            "admin.groups",
            "its members are nbjobs admins",
        ),
        ("teachers:\n  groups: [nbjobs-class-ml101]\n", 2, "teachers.groups", "its members teach"),
        (
            FLAVORS + "  groups: [nbjobs-class-ml101]\n",
            4,
            "flavors.0.groups",
            "it may use flavor 'cpu'",
        ),
        (
            FLAVORS + "  approval:\n    groups: [nbjobs-class-ml101]\n",
            5,
            "flavors.0.approval.groups",
            "its jobs on 'cpu' wait for approval",
        ),
        (
            "quotas:\n  groups:\n    nbjobs-class-ml101: {max_queued_jobs: 99}\n",
            3,
            "quotas.groups.nbjobs-class-ml101",
            "it has a quota of its own",
        ),
        (
            "profiles:\n- name: big\n  groups: [nbjobs-class-ml101]\n",
            3,
            "profiles.0.groups",
            "it may use profile 'big'",
        ),
    ],
)  # fmt: skip
def test_a_class_group_named_where_groups_are_given_something_is_refused(
    text, line, setting, meaning
):
    with pytest.raises(ConfigError) as refused:
        parse_config(text)

    assert str(refused.value) == (
        f"nbjobs.yaml, line {line}: {setting}: 'nbjobs-class-ml101' is the hub group of class "
        f"'ml101'; a class grants nothing, so its group cannot be given anything here "
        f"({meaning}). Name a group of your own (not starting with 'nbjobs-class-'), or give "
        "the class its flavors and GPU-hours in the class itself"
    )

"""The Job nbjobs creates for a submission, as a plain dict, validated against Kubernetes 1.37."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
from nbjobs.job_service.backends.base import JobFilesRoom, LaunchSpec
from nbjobs.job_service.backends.kubernetes_capacity import (
    node_accepts,
)
from nbjobs.job_service.backends.kubernetes_objects import (
    ManifestError,
    job_name,
    job_name_of,
    make_job,
    owner_label,
)

from nbjobs.config import (
    Flavor,
    KubernetesBackendConfig,
    KueueConfig,
    LimitsConfig,
    StorageConfig,
    TelemetryConfig,
)
from nbjobs.storage import user_folder

STORAGE = StorageConfig(
    root=Path("/srv/nbjobs"),
    user_dir="home/{username}",
    mount_path="/home/jovyan",
    volume={"nfs": {"server": "nfs.example.org", "path": "/export/nbjobs"}},
    uid=1000,
    gid=100,
)
SETTINGS = KubernetesBackendConfig(namespace="gpu-jobs", default_image="example.org/nb:1")
A100 = Flavor(
    name="a100-1",
    gpus=1,
    cpu="8",
    memory="32Gi",
    image="example.org/torch:2.4",
    time_limit=3600,
    node_selector={"gpu": "a100"},
    tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    priority_class="students",
    env={"HF_HOME": "/home/jovyan/.cache/hf"},
)


def spec(flavor: Flavor = A100, user: str = "ada", **extra) -> LaunchSpec:
    home = user_folder(STORAGE, user)
    jobdir = home / ".nbjobs/jobs/0123456789ab"
    return LaunchSpec(
        job_id="0123456789ab",
        user=user,
        flavor=flavor,
        snapshot_file=jobdir / "input.ipynb",
        output_file=extra.pop("output_file", home / "work/train.2026-01-01T0930.01234567.ipynb"),
        status_file=jobdir / "status.json",
        log_file=jobdir / "log.txt",
        cwd=home / "work",
        **extra,
    )


def valid(manifest: dict) -> dict:
    kubernetes_validate.validate(manifest, "1.37.0", strict=True)
    return manifest


def test_a_gpu_job_is_one_locked_down_batch_job_running_the_runner():
    job = valid(make_job(spec(parameters={"lr": 0.1}, time_limit=3600), STORAGE, SETTINGS))
    labels = {
        "app.kubernetes.io/managed-by": "nbjobs",
        "nbjobs.io/job-id": "0123456789ab",
        "nbjobs.io/flavor": "a100-1",
        "nbjobs.io/owner": "ada",
    }
    resources = {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"}
    identity = {"runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 100}
    assert job == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "nbjobs-0123456789ab",
            "namespace": "gpu-jobs",
            "labels": labels,
            "annotations": {"nbjobs.io/owner": "ada"},
        },
        "spec": {
            "backoffLimit": 0,
            "ttlSecondsAfterFinished": 3600,
            "activeDeadlineSeconds": 3600 + 120,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "terminationGracePeriodSeconds": 30,
                    "securityContext": {
                        **identity,
                        "fsGroup": 100,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "nodeSelector": {"gpu": "a100"},
                    "tolerations": [
                        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
                    ],
                    "priorityClassName": "students",
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {
                                                "key": "nbjobs.io/drain",
                                                "operator": "NotIn",
                                                "values": ["true"],
                                            }
                                        ]
                                    }
                                ]
                            }
                        }
                    },
                    "volumes": [
                        {
                            "name": "nbjobs-home",
                            "nfs": {"server": "nfs.example.org", "path": "/export/nbjobs"},
                        }
                    ],
                    "containers": [
                        {
                            "name": "notebook",
                            "image": "example.org/torch:2.4",
                            "command": [
                                "python",
                                "-m",
                                "nbjobs.job_runner",
                                "/home/jovyan/.nbjobs/jobs/0123456789ab/input.ipynb",
                                "/home/jovyan/work/train.2026-01-01T0930.01234567.ipynb",
                                "--status-file",
                                "/home/jovyan/.nbjobs/jobs/0123456789ab/status.json",
                                "--cwd",
                                "/home/jovyan/work",
                                # the runner writes the job's log into its folder itself
                                "--log-file",
                                "/home/jovyan/.nbjobs/jobs/0123456789ab/log.txt",
                                "--log-file-mode",
                                "600",
                                "--parameters",
                                "/home/jovyan/.nbjobs/jobs/0123456789ab/parameters.json",
                                "--timeout",
                                "3600",
                                # nbjobs.yaml's limits (here the defaults), in characters
                                "--max-cell-output",
                                str(2 * 1024**2),
                                "--max-output",
                                str(16 * 1024**2),
                                "--max-log-output",
                                str(32 * 1024**2),
                                # nbjobs.yaml's telemetry interval (the default)
                                "--telemetry-interval",
                                "10",
                            ],
                            "workingDir": "/home/jovyan/work",
                            "env": [
                                {"name": "HF_HOME", "value": "/home/jovyan/.cache/hf"},
                                {"name": "NBJOBS_JOB_ID", "value": "0123456789ab"},
                            ],
                            "resources": {"requests": resources, "limits": resources},
                            "volumeMounts": [
                                {
                                    "name": "nbjobs-home",
                                    "mountPath": "/home/jovyan",
                                    "subPath": "home/ada",
                                }
                            ],
                            "securityContext": {
                                **identity,
                                "allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"]},
                                "seccompProfile": {"type": "RuntimeDefault"},
                            },
                            "terminationMessagePolicy": "FallbackToLogsOnError",
                        }
                    ],
                },
            },
        },
    }


def test_the_name_comes_from_the_job_id_alone():
    assert make_job(spec(), STORAGE, SETTINGS)["metadata"]["name"] == job_name("0123456789ab")
    again = make_job(spec(time_limit=60), STORAGE, SETTINGS)
    assert again["metadata"]["name"] == "nbjobs-0123456789ab"


def test_a_requeued_job_gets_a_new_job_named_by_its_attempt_and_labelled_with_it():
    # the disrupted attempt's Job may still be there (until its TTL): no name clash
    manifest = valid(make_job(spec(attempt=2), STORAGE, SETTINGS))
    assert manifest["metadata"]["name"] == "nbjobs-0123456789ab-r2" == job_name("0123456789ab", 2)
    pod_labels = manifest["spec"]["template"]["metadata"]["labels"]
    assert manifest["metadata"]["labels"]["nbjobs.io/attempt"] == pod_labels["nbjobs.io/attempt"]
    assert job_name_of(pod_labels) == "nbjobs-0123456789ab-r2"
    first = make_job(spec(), STORAGE, SETTINGS)
    assert "nbjobs.io/attempt" not in first["spec"]["template"]["metadata"]["labels"]
    assert job_name_of(first["spec"]["template"]["metadata"]["labels"]) == "nbjobs-0123456789ab"


def test_a_mig_slice_is_asked_for_as_its_own_resource_with_requests_equal_to_limits():
    mig = Flavor(name="mig", gpus=1, gpu_resource="nvidia.com/mig-1g.10gb", image="x/y:1")
    job = valid(make_job(spec(mig), STORAGE, SETTINGS))
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"] == {
        "requests": {"nvidia.com/mig-1g.10gb": "1"},
        "limits": {"nvidia.com/mig-1g.10gb": "1"},
    }


def test_a_cpu_job_sees_no_gpu_even_on_a_gpu_node_and_gets_the_default_image():
    cpu = Flavor(name="cpu", gpus=0, cpu="2", memory="4Gi", time_limit=None)
    job = valid(make_job(spec(cpu), STORAGE, SETTINGS))
    pod = job["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["image"] == "example.org/nb:1"
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"} in container["env"]
    assert {"name": "CUDA_VISIBLE_DEVICES", "value": ""} in container["env"]
    assert "nvidia.com/gpu" not in container["resources"]["limits"]
    assert "activeDeadlineSeconds" not in job["spec"]
    assert "--timeout" not in container["command"]


def test_the_admins_output_limits_and_log_mode_reach_the_runner():
    limits = LimitsConfig(cell_output="64KiB", notebook_output="1MiB", log_output="2MB")
    job = valid(make_job(spec(), STORAGE, SETTINGS, limits, 0o640))
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    options = dict(zip(command[5::2], command[6::2], strict=False))
    assert options["--max-cell-output"] == "65536"
    assert options["--max-output"] == "1048576"
    assert options["--max-log-output"] == "2000000"
    assert options["--log-file"] == "/home/jovyan/.nbjobs/jobs/0123456789ab/log.txt"
    assert options["--log-file-mode"] == "640"


def test_the_users_kernel_html_copy_and_outputs_folder_reach_the_runner_in_pod_paths():
    home = user_folder(STORAGE, "ada")
    out = home / "work/nbjobs-outputs/train.2026-01-01T0930.01234567.ipynb"
    chosen = spec(
        output_file=out,
        kernel="python3",
        html_file=out.with_suffix(".html"),
        output_in_folder=True,
    )
    command = valid(make_job(chosen, STORAGE, SETTINGS))["spec"]["template"]["spec"]["containers"][
        0
    ]["command"]
    assert command[4] == "/home/jovyan/work/nbjobs-outputs/train.2026-01-01T0930.01234567.ipynb"
    assert command[command.index("--kernel") + 1] == "python3"
    assert command[command.index("--html") + 1] == (
        "/home/jovyan/work/nbjobs-outputs/train.2026-01-01T0930.01234567.html"
    )
    assert "--make-output-folder" in command
    plain = valid(make_job(spec(), STORAGE, SETTINGS))["spec"]["template"]["spec"]
    assert not {"--kernel", "--html", "--make-output-folder"} & set(
        plain["containers"][0]["command"]
    )


def test_the_room_for_the_users_job_files_reaches_the_runner_in_pod_paths():
    home = user_folder(STORAGE, "ada")
    room = JobFilesRoom(limit=200 * 1024**2, used=150 * 1024**2, folder=home / ".nbjobs")
    job = valid(make_job(spec(job_files=room), STORAGE, SETTINGS))
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    assert f"--folder-limit={200 * 1024**2}" in command
    assert f"--folder-used={150 * 1024**2}" in command
    assert command[command.index("--folder") + 1] == "/home/jovyan/.nbjobs"
    plain = valid(make_job(spec(), STORAGE, SETTINGS))["spec"]["template"]["spec"]
    assert "--folder" not in plain["containers"][0]["command"]


def test_the_admins_telemetry_interval_reaches_the_runner():
    for interval, option in [("30s", "30"), ("2m", "120"), (0, "0")]:
        telemetry = TelemetryConfig(interval=interval)
        job = valid(make_job(spec(), STORAGE, SETTINGS, None, 0o600, telemetry))
        command = job["spec"]["template"]["spec"]["containers"][0]["command"]
        options = dict(zip(command[5::2], command[6::2], strict=False))
        assert options["--telemetry-interval"] == option


def test_the_users_folder_is_mounted_by_the_spawners_escaping():
    job = valid(make_job(spec(user="Ada.Lovelace@uni"), STORAGE, SETTINGS))
    mount = job["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]
    assert mount["subPath"] == "home/-41da-2e-4covelace-40uni"
    # the label holds what a label can; the annotation the name as written
    assert job["metadata"]["labels"]["nbjobs.io/owner"] == owner_label("Ada.Lovelace@uni")
    assert job["metadata"]["annotations"]["nbjobs.io/owner"] == "Ada.Lovelace@uni"


def test_kueue_mode_submits_suspended_to_the_queue():
    kueue = SETTINGS.model_copy(
        update={"kueue": KueueConfig(queue_name="gpu-queue", priority_class="teaching")}
    )
    job = valid(make_job(spec(), STORAGE, kueue))
    assert job["spec"]["suspend"] is True
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu-queue"
    assert job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "teaching"
    # Kueue reads the queue from the Job; the pods carry only nbjobs' labels
    assert "kueue.x-k8s.io/queue-name" not in job["spec"]["template"]["metadata"]["labels"]


def test_drained_nodes_are_excluded_from_every_alternative_of_the_flavors_affinity():
    zones = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
                ]
            }
        }
    }
    flavor = A100.model_copy(update={"affinity": zones})
    settings = SETTINGS.model_copy(update={"drained_nodes": ["gpu-3", "gpu-1"]})
    job = valid(make_job(spec(flavor), STORAGE, settings))
    pod = job["spec"]["template"]["spec"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert len(terms) == 2
    for term in terms:
        assert {"key": "nbjobs.io/drain", "operator": "NotIn", "values": ["true"]} in term[
            "matchExpressions"
        ]
        assert term["matchFields"] == [
            {"key": "metadata.name", "operator": "NotIn", "values": ["gpu-1", "gpu-3"]}
        ]
    assert zones["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ][0] == {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}

    def node(name: str, **labels: str) -> dict:
        return {"metadata": {"name": name, "labels": {"gpu": "a100", **labels}}, "spec": {}}

    tainted = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    assert node_accepts(node("gpu-2", zone="a"), pod)
    assert not node_accepts(node("gpu-3", zone="a"), pod)  # drained in nbjobs.yaml
    assert not node_accepts(node("gpu-4", zone="a", **{"nbjobs.io/drain": "true"}), pod)
    assert not node_accepts(node("gpu-5", zone="c"), pod)
    assert node_accepts({**node("gpu-6", zone="b"), "spec": {"taints": [tainted]}}, pod)
    assert not node_accepts({**node("gpu-7", zone="b"), "spec": {"unschedulable": True}}, pod)


@pytest.mark.parametrize(
    ("flavor", "storage", "expected"),
    [
        (
            Flavor(name="x", gpus=1),
            STORAGE,
            "flavor 'x' names no image and backend.kubernetes.default_image is not set",
        ),
        (A100, STORAGE.model_copy(update={"volume": None}), "storage.volume is not set"),
        (A100, STORAGE.model_copy(update={"uid": 0}), "jobs run as the user, never as root"),
    ],
)
def test_settings_that_cannot_make_a_job_say_what_to_change(flavor, storage, expected):
    settings = SETTINGS.model_copy(update={"default_image": None})
    with pytest.raises(ManifestError, match=expected):
        make_job(spec(flavor), storage, settings)


def test_a_file_outside_the_users_folder_is_refused():
    bad = spec()
    bad.snapshot_file = Path("/srv/nbjobs/home/bob/x.ipynb")
    with pytest.raises(ManifestError, match="is not inside 'ada'"):
        make_job(bad, STORAGE, SETTINGS)


@pytest.mark.parametrize("user", ["ada", "Ada.Lovelace@uni", "élodie", "a" * 80])
def test_the_job_mounts_the_users_folder_as_the_notebook_pod_does(user):
    # the spawner's own function: the same volume, mount path, subPath (escaping) and uid
    from nbjobs.spawner.kubernetes import storage_volume

    volume, mount = storage_volume(STORAGE, user)
    pod = valid(make_job(spec(user=user), STORAGE, SETTINGS))["spec"]["template"]["spec"]
    assert pod["volumes"] == [volume]
    assert pod["containers"][0]["volumeMounts"] == [mount]
    assert (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]) == (
        STORAGE.uid,
        STORAGE.gid,
    )

"""What a cluster's controllers and kubelets do, played by the test on the fake API server
(tests/kubernetes/fake_apiserver.py): nodes, the schedulers, pods starting, running and
ending, the Job and TTL controllers, Kueue's admission of a Job, pod logs."""

from __future__ import annotations

import copy
import uuid
from typing import Any

from .fake_objects import COMPLETION_INDEX, Obj, _quantity, _requests, now


class PlayedControllers:
    """Mixed into FakeApiServer, whose storage (put, list, remove ...) it drives."""

    def add_node(
        self,
        name: str,
        labels: dict[str, str] | None = None,
        allocatable: dict[str, str] | None = None,
        taints: list[Obj] | None = None,
        unschedulable: bool = False,
    ) -> Obj:
        spec: Obj = {}
        if taints:
            spec["taints"] = taints
        if unschedulable:
            spec["unschedulable"] = True
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "uid": str(uuid.uuid4()),
                "creationTimestamp": now(),
                "labels": {"kubernetes.io/hostname": name, **(labels or {})},
            },
            "spec": spec,
            "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}},
        }
        node["status"]["allocatable"].update(allocatable or {})
        existing = self.get("nodes", None, name)
        return self.put("nodes", node, "MODIFIED" if existing else "ADDED")

    def label_node(self, name: str, **labels: str) -> Obj:
        node = copy.deepcopy(self.objects[("nodes", None, name)])
        node["metadata"]["labels"].update(labels)
        return self.put("nodes", node)

    def make_pod(self, job_name: str, namespace: str, node: str | None = None) -> Obj | None:
        """The Job controller tries to make the Job's pod, and the API server admits it or
        not: the namespace's ResourceQuotas (hard ``requests.R`` and ``R`` against what its
        live pods request) and Pod Security admission (the namespace's ``enforce`` label:
        ``restricted`` refuses inline ``nfs`` and ``hostPath`` volumes). A refusal is what
        the real controller records, a ``FailedCreate`` warning on the Job in the API
        server's words, and no pod (None); else the pod, as :meth:`start_pod` makes it."""
        job = self.objects[("jobs", namespace, job_name)]
        pod_name = f"{job_name}-{uuid.uuid4().hex[:5]}"
        why = self._refusal(job, namespace, pod_name)
        if why is not None:
            self.add_event(namespace, "Job", job_name, "FailedCreate", f"Error creating: {why}")
            return None
        return self.start_pod(job_name, namespace, node)

    def _refusal(self, job: Obj, namespace: str, pod_name: str) -> str | None:
        pod_spec = job["spec"]["template"]["spec"]
        wanted = _requests({"spec": pod_spec})
        for quota in self.list("resourcequotas", namespace):
            hard = (quota.get("spec") or {}).get("hard") or {}
            used: dict[str, float] = {}
            for pod in self.list("pods", namespace):
                if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                    continue
                for key, value in _requests(pod).items():
                    used[key] = used.get(key, 0.0) + value
            for key, limit in sorted(hard.items()):
                resource = key.removeprefix("requests.")
                if resource not in wanted or (resource == "pods" and key != "pods"):
                    continue
                if used.get(resource, 0.0) + wanted[resource] > _quantity(limit):
                    name = quota["metadata"]["name"]
                    return (
                        f'pods "{pod_name}" is forbidden: exceeded quota: {name}, '
                        f"requested: {key}={wanted[resource]:g}, "
                        f"used: {key}={used.get(resource, 0.0):g}, limited: {key}={limit}"
                    )
        ns = self.get("namespaces", None, namespace) or {}
        level = ((ns.get("metadata") or {}).get("labels") or {}).get(
            "pod-security.kubernetes.io/enforce"
        )
        if level == "restricted":
            broken = _restricted_violations(pod_spec)
            if broken:
                return (
                    f'pods "{pod_name}" is forbidden: violates PodSecurity '
                    f'"restricted:latest": {"; ".join(broken)}'
                )
        return None

    def start_pod(
        self, job_name: str, namespace: str, node: str | None = None, index: int | None = None
    ) -> Obj:
        """The Job controller makes the Job's pod; with ``node`` the scheduler binds it.
        An Indexed Job's pod gets its ``index`` (annotation and label) and, as the real
        controller names it, the hostname ``JOB-INDEX``."""
        job = self.objects[("jobs", namespace, job_name)]
        template = copy.deepcopy(job["spec"]["template"])
        if job["spec"].get("completionMode") == "Indexed":
            index = index or 0
            template["metadata"].setdefault("annotations", {})[COMPLETION_INDEX] = str(index)
            template["metadata"].setdefault("labels", {})[COMPLETION_INDEX] = str(index)
            template["spec"]["hostname"] = f"{job_name}-{index}"
        labels = dict(template["metadata"].get("labels") or {})
        labels.update(
            {
                "batch.kubernetes.io/controller-uid": job["metadata"]["uid"],
                "batch.kubernetes.io/job-name": job_name,
                "controller-uid": job["metadata"]["uid"],
                "job-name": job_name,
            }
        )
        name = f"{job_name}-{uuid.uuid4().hex[:5]}"
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "generateName": f"{job_name}-",
                "namespace": namespace,
                "uid": str(uuid.uuid4()),
                "creationTimestamp": now(),
                "labels": labels,
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": job_name,
                        "uid": job["metadata"]["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": template["spec"],
            "status": {"phase": "Pending", "qosClass": "Guaranteed"},
        }
        if template["metadata"].get("annotations"):  # the Job controller copies them
            pod["metadata"]["annotations"] = dict(template["metadata"]["annotations"])
        if self.hami_webhook and any(
            name.startswith(("nvidia.com/gpumem", "nvidia.com/gpucores"))
            for c in pod["spec"]["containers"]
            for name in (c.get("resources") or {}).get("limits") or {}
        ):
            pod["spec"]["schedulerName"] = "hami-scheduler"
        if node:
            pod["spec"]["nodeName"] = node
            pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]
        self.put("pods", pod, "ADDED")
        job = copy.deepcopy(job)
        active = [
            p
            for p in self.pods_of(job_name, namespace)
            if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]
        job["status"].update({"active": len(active)})
        job["status"].setdefault("startTime", now())
        job["status"].setdefault("ready", 0)
        self.put("jobs", job)
        return pod

    def pods_of(self, job_name: str, namespace: str) -> list[Obj]:
        return self.list("pods", namespace, f"batch.kubernetes.io/job-name={job_name}")

    def start_ranks(self, job_name: str, namespace: str, nodes: list[str]) -> list[str]:
        """The Job controller makes every pod of an Indexed Job at once (it was admitted
        whole), the scheduler binds pod i to ``nodes[i]``, the kubelets start them: their
        names, by index."""
        names = []
        for index, node in enumerate(nodes):
            pod = self.start_pod(job_name, namespace, node, index=index)
            self.run_pod(pod["metadata"]["name"], namespace)
            names.append(pod["metadata"]["name"])
        return names

    def update_pod(self, pod_name: str, namespace: str, **status: Any) -> Obj:
        pod = copy.deepcopy(self.objects[("pods", namespace, pod_name)])
        pod["status"].update(status)
        return self.put("pods", pod)

    def unschedulable(self, pod_name: str, namespace: str, message: str) -> Obj:
        return self.update_pod(
            pod_name,
            namespace,
            conditions=[
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                    "lastTransitionTime": now(),
                }
            ],
        )

    def add_event(
        self,
        namespace: str,
        kind: str,
        name: str,
        reason: str,
        message: str,
        type: str = "Warning",
        last: str | None = None,
    ) -> Obj:
        """An event about ``kind``/``name``, as a controller or scheduler records one."""
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
            "involvedObject": {"kind": kind, "name": name, "namespace": namespace},
            "reason": reason,
            "message": message,
            "type": type,
            "count": 1,
            "lastTimestamp": last or now(),
        }
        return self.put("events", event, "ADDED")

    def schedule_pending(self) -> list[str]:
        """Play every running scheduler once over the pending pods, oldest first; the
        names of the pods bound."""
        bound = []
        pending = sorted(
            (
                p
                for (kind, _, _), p in self.objects.items()
                if kind == "pods"
                and p["status"].get("phase") == "Pending"
                and not p["spec"].get("nodeName")
                and "deletionTimestamp" not in p["metadata"]
            ),
            key=lambda p: p["metadata"]["creationTimestamp"],
        )
        for pod in pending:
            scheduler = pod["spec"].get("schedulerName") or "default-scheduler"
            if scheduler not in self.schedulers:
                continue  # nobody looks at it: no condition, no event
            namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
            node, why = self._place(pod, engine=scheduler != "default-scheduler")
            if node is not None:
                self.bind(name, namespace, node)
                bound.append(name)
            elif scheduler in ("default-scheduler", "hami-scheduler"):
                self.unschedulable(name, namespace, why)  # kube-scheduler's own words
            else:
                meta = pod["metadata"]
                queue = (meta.get("labels") or {}).get("kai.scheduler/queue") or (
                    meta.get("annotations") or {}
                ).get("scheduling.volcano.sh/queue-name", "default")
                message = self.engine_messages.get(scheduler, "cannot place the pod")
                self.unschedulable(name, namespace, message.format(queue=queue))
        return bound

    def _place(self, pod: Obj, *, engine: bool) -> tuple[str | None, str]:
        """The first node with room for ``pod``, or None and the default scheduler's
        reason."""
        asked = _requests(pod)
        fraction = float((pod["metadata"].get("annotations") or {}).get("gpu-fraction") or 0)
        if fraction:
            asked["nvidia.com/gpu"] = asked.get("nvidia.com/gpu", 0.0) + fraction
        nodes = [n for (kind, _, _), n in self.objects.items() if kind == "nodes"]
        short: dict[str, int] = {}
        for node in nodes:
            allocatable = {
                k: _quantity(v) for k, v in node["status"].get("allocatable", {}).items()
            }
            used: dict[str, float] = {}
            for (kind, _, _), other in self.objects.items():
                if (
                    kind == "pods"
                    and other["spec"].get("nodeName") == node["metadata"]["name"]
                    and other["status"].get("phase") not in ("Succeeded", "Failed")
                ):
                    held = _requests(other)
                    part = (other["metadata"].get("annotations") or {}).get("gpu-fraction")
                    if part:
                        held["nvidia.com/gpu"] = held.get("nvidia.com/gpu", 0.0) + float(part)
                    for k, v in held.items():
                        used[k] = used.get(k, 0.0) + v
            missing = [
                k
                for k, v in asked.items()
                if (k in allocatable or not engine)
                and allocatable.get(k, 0.0) - used.get(k, 0.0) < v - 1e-9
            ]
            if not missing:
                return node["metadata"]["name"], ""
            for k in missing:
                short[k] = short.get(k, 0) + 1
        reasons = ", ".join(f"{n} Insufficient {k}" for k, n in sorted(short.items()))
        return None, f"0/{len(nodes)} nodes are available: {reasons}."

    def bind(self, pod_name: str, namespace: str, node: str) -> Obj:
        pod = copy.deepcopy(self.objects[("pods", namespace, pod_name)])
        pod["spec"]["nodeName"] = node
        pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]
        return self.put("pods", pod)

    def waiting(self, pod_name: str, namespace: str, reason: str, message: str = "") -> Obj:
        pod = self.objects[("pods", namespace, pod_name)]
        container = pod["spec"]["containers"][0]
        state = {"waiting": {"reason": reason, **({"message": message} if message else {})}}
        return self.update_pod(
            pod_name,
            namespace,
            containerStatuses=[
                {
                    "name": container["name"],
                    "image": container["image"],
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "started": False,
                    "state": state,
                }
            ],
        )

    def run_pod(self, pod_name: str, namespace: str, started_at: str | None = None) -> Obj:
        """The kubelet started the container (``started_at``: when, as the cluster says)."""
        pod = self.objects[("pods", namespace, pod_name)]
        container = pod["spec"]["containers"][0]
        started_at = started_at or now()
        return self.update_pod(
            pod_name,
            namespace,
            phase="Running",
            startTime=started_at,
            containerStatuses=[
                {
                    "name": container["name"],
                    "image": container["image"],
                    "imageID": "sha256:0",
                    "ready": True,
                    "restartCount": 0,
                    "started": True,
                    "state": {"running": {"startedAt": started_at}},
                }
            ],
        )

    def finish_pod(
        self,
        pod_name: str,
        namespace: str,
        exit_code: int,
        reason: str | None = None,
        pod_reason: str | None = None,
        pod_message: str | None = None,
        disruption: tuple[str, str] | None = None,
        pod_deleted_first: bool = False,
        finished_at: str | None = None,
    ) -> Obj:
        """The kubelet reports the container ended; the Job controller updates the Job.

        ``pod_deleted_first``: the order real clusters show with pod-tracking finalizers
        (an evicted pod, a failed pod the controller cleans up): the pod's ``DELETED``
        event (carrying its final status) arrives before the Job's Failed condition, and
        a list of the Job's pods afterwards is empty.
        """
        pod = self.objects[("pods", namespace, pod_name)]
        container = pod["spec"]["containers"][0]
        finished_at = finished_at or now()
        running = next(
            (
                (cs.get("state") or {}).get("running") or {}
                for cs in (pod.get("status") or {}).get("containerStatuses") or []
            ),
            {},
        )
        terminated: Obj = {
            "exitCode": exit_code,
            "startedAt": running.get("startedAt") or finished_at,
            "finishedAt": finished_at,
        }
        terminated["reason"] = reason or ("Completed" if exit_code == 0 else "Error")
        status: Obj = {
            "phase": "Succeeded" if exit_code == 0 else "Failed",
            "containerStatuses": [
                {
                    "name": container["name"],
                    "image": container["image"],
                    "imageID": "sha256:0",
                    "ready": False,
                    "restartCount": 0,
                    "started": False,
                    "state": {"terminated": terminated},
                }
            ],
        }
        if pod_reason:
            status["reason"] = pod_reason
        if pod_message:
            status["message"] = pod_message
        if disruption:
            status["conditions"] = [
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": disruption[0],
                    "message": disruption[1],
                }
            ]
        done = self.update_pod(pod_name, namespace, **status)
        job_name = pod["metadata"]["labels"].get("batch.kubernetes.io/job-name")
        if pod_deleted_first:
            self.remove("pods", namespace, pod_name)
        if job_name and ("jobs", namespace, job_name) in self.objects:
            job = self.objects[("jobs", namespace, job_name)]
            wanted = job["spec"].get("completions") or 1
            succeeded = [
                p
                for p in self.pods_of(job_name, namespace)
                if (p.get("status") or {}).get("phase") == "Succeeded"
            ]
            if exit_code == 0 and len(succeeded) < wanted and not pod_deleted_first:
                job = copy.deepcopy(job)  # an Indexed Job waits for its other indexes
                job["status"]["succeeded"] = len(succeeded)
                job["status"]["active"] = max(0, job["status"].get("active", 1) - 1)
                self.put("jobs", job)
            elif exit_code == 0:
                self.job_condition(
                    job_name, namespace, "Complete", "CompletionsReached", at=finished_at
                )
            else:
                self.job_condition(
                    job_name,
                    namespace,
                    "Failed",
                    "BackoffLimitExceeded",
                    "Job has reached the specified backoff limit",
                    at=finished_at,
                )
        return done

    def job_condition(
        self,
        job_name: str,
        namespace: str,
        kind: str,
        reason: str,
        message: str = "",
        at: str | None = None,
    ) -> Obj:
        """The Job controller sets a final condition (``at``: its transition time)."""
        at = at or now()
        job = copy.deepcopy(self.objects[("jobs", namespace, job_name)])
        job["status"].setdefault("conditions", []).append(
            {
                "type": kind,
                "status": "True",
                "reason": reason,
                "message": message,
                "lastProbeTime": at,
                "lastTransitionTime": at,
            }
        )
        job["status"]["active"] = 0
        if kind == "Complete":
            job["status"]["succeeded"] = 1
            job["status"]["completionTime"] = at
        elif kind == "Failed":
            job["status"]["failed"] = 1
            # the controller deletes pods still running (deadline exceeded, failure policy)
            for pod in self.pods_of(job_name, namespace):
                if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                    self._terminate_pod(pod)
        return self.put("jobs", job)

    def expire_ttl(self, job_name: str, namespace: str) -> None:
        """The TTL-after-finished controller deletes a finished Job whose
        ``ttlSecondsAfterFinished`` has passed, whether or not anyone watches: with
        foreground propagation, as the real controller does, so its pods go first (each a
        ``DELETED`` event) and the Job after them. Its pods' logs go with them."""
        job = self.objects[("jobs", namespace, job_name)]
        if job["spec"].get("ttlSecondsAfterFinished") is None:
            raise AssertionError(f"Job {job_name} has no ttlSecondsAfterFinished")
        finished = [
            c
            for c in (job.get("status") or {}).get("conditions") or []
            if c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        ]
        if not finished:
            raise AssertionError(f"Job {job_name} has not finished; the TTL starts at its end")
        job = copy.deepcopy(job)
        job["metadata"]["deletionTimestamp"] = now()
        job["metadata"]["finalizers"] = ["foregroundDeletion"]
        self.put("jobs", job)
        for pod in self.pods_of(job_name, namespace):
            self.remove("pods", namespace, pod["metadata"]["name"])
            self.logs.pop((namespace, pod["metadata"]["name"]), None)
        if ("jobs", namespace, job_name) in self.objects:  # no pod left to finish it
            self.remove("jobs", namespace, job_name)

    def admit(self, job_name: str, namespace: str) -> Obj:
        """Kueue admits a suspended Job: it sets ``suspend: false``."""
        job = copy.deepcopy(self.objects[("jobs", namespace, job_name)])
        job["spec"]["suspend"] = False
        return self.put("jobs", job)

    def suspend_again(self, job_name: str, namespace: str) -> Obj:
        """Kueue preempts an admitted Job: it sets ``suspend: true`` again; the Job
        controller then marks it Suspended and deletes its pods (their runners get
        SIGTERM), as for any suspended Job."""
        job = copy.deepcopy(self.objects[("jobs", namespace, job_name)])
        job["spec"]["suspend"] = True
        status = job.setdefault("status", {})
        status["conditions"] = [
            *(status.get("conditions") or []),
            {
                "type": "Suspended",
                "status": "True",
                "reason": "JobSuspended",
                "message": "Job suspended",
                "lastTransitionTime": now(),
            },
        ]
        status["active"] = 0
        stored = self.put("jobs", job)
        for pod in self.pods_of(job_name, namespace):
            self._terminate_pod(pod)
        return stored

    def cut_log_streams(self) -> None:
        """End every open ``follow`` log stream now, as a proxy's idle timeout does."""
        self._log_cuts += 1
        self._poke()

    def append_log(self, pod_name: str, namespace: str, text: str) -> None:
        self.logs[(namespace, pod_name)] = self.logs.get((namespace, pod_name), "") + text
        self._poke()


#: the volume types Pod Security's restricted level allows
_RESTRICTED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
    "projected", "secret",
}  # fmt: skip


def _restricted_violations(pod: Obj) -> list[str]:
    """What Pod Security admission's ``restricted`` level finds wrong with a pod, in its
    words (the checks nbjobs' pods meet or break: volumes, privilege escalation,
    capabilities, running as non-root, seccomp)."""
    found = []
    for volume in pod.get("volumes") or []:
        kind = next((k for k in volume if k != "name"), "")
        if kind not in _RESTRICTED_VOLUMES:
            found.append(
                f'restricted volume types (volume "{volume["name"]}" uses restricted volume '
                f'type "{kind}")'
            )
    pod_context = pod.get("securityContext") or {}
    for container in pod.get("containers") or []:
        context = container.get("securityContext") or {}
        name = container["name"]
        if context.get("allowPrivilegeEscalation") is not False:
            found.append(
                f'allowPrivilegeEscalation != false (container "{name}" must set '
                "securityContext.allowPrivilegeEscalation=false)"
            )
        if "ALL" not in ((context.get("capabilities") or {}).get("drop") or []):
            found.append(
                f'unrestricted capabilities (container "{name}" must set '
                'securityContext.capabilities.drop=["ALL"])'
            )
        if not context.get("runAsNonRoot", pod_context.get("runAsNonRoot")):
            found.append(
                f'runAsNonRoot != true (pod or container "{name}" must set '
                "securityContext.runAsNonRoot=true)"
            )
        seccomp = (context.get("seccompProfile") or pod_context.get("seccompProfile") or {}).get(
            "type"
        )
        if seccomp not in ("RuntimeDefault", "Localhost"):
            found.append(
                f'seccompProfile (pod or container "{name}" must set '
                'securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")'
            )
    return found

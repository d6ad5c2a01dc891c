"""JobSet's controller and Kueue's admission of whole jobs, played by the test on the fake
API server (tests/kubernetes/fake_apiserver.py)."""

from __future__ import annotations

import copy

from .fake_objects import Obj, _has_condition, _quantity, now


class PlayedEngines:
    """Mixed into FakeApiServer, whose storage (put, list, remove ...) it drives."""

    def reconcile_jobsets(self) -> None:
        """The JobSet controller, once over every JobSet: makes the Job of each
        replicated Job (``NAME-RJOB-0``, owned by it, suspended as the JobSet is, its pods
        in the headless Service named after the JobSet), makes that Service, passes a
        change of ``suspend`` on to its Jobs (a suspended Job's pods go), and sets the
        JobSet's Completed or Failed condition from its Jobs'."""
        for jobset in self.list("jobsets"):
            meta, spec = jobset["metadata"], jobset["spec"]
            namespace, name = meta["namespace"], meta["name"]
            if meta.get("deletionTimestamp") or self._jobset_ended(jobset):
                continue
            suspend = bool(spec.get("suspend"))
            owner = {
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "name": name,
                "uid": meta["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
            network = spec.get("network") or {}
            subdomain = network.get("subdomain") or name
            if network.get("enableDNSHostnames", True) and not self.get(
                "services", namespace, subdomain
            ):
                self._store_new(
                    "services",
                    {
                        "apiVersion": "v1",
                        "kind": "Service",
                        "metadata": {
                            "name": subdomain,
                            "namespace": namespace,
                            "ownerReferences": [owner],
                        },
                        "spec": {
                            "clusterIP": "None",
                            "selector": {"jobset.sigs.k8s.io/jobset-name": name},
                            "publishNotReadyAddresses": bool(
                                network.get("publishNotReadyAddresses")
                            ),
                        },
                    },
                )
            for replicated in spec.get("replicatedJobs") or []:
                for index in range(replicated.get("replicas", 1)):
                    job_name = f"{name}-{replicated['name']}-{index}"
                    existing = self.get("jobs", namespace, job_name)
                    if existing is not None:
                        if bool(existing["spec"].get("suspend")) != suspend:
                            if suspend:
                                self.suspend_again(job_name, namespace)
                            else:
                                self.admit(job_name, namespace)
                        continue
                    template = copy.deepcopy(replicated["template"])
                    labels = {
                        **(template.get("metadata") or {}).get("labels", {}),
                        "jobset.sigs.k8s.io/jobset-name": name,
                        "jobset.sigs.k8s.io/replicatedjob-name": replicated["name"],
                        "jobset.sigs.k8s.io/job-index": str(index),
                    }
                    job_spec = template["spec"]
                    job_spec["suspend"] = suspend
                    pod_meta = job_spec["template"].setdefault("metadata", {})
                    pod_meta["labels"] = {
                        **(pod_meta.get("labels") or {}),
                        "jobset.sigs.k8s.io/jobset-name": name,
                    }
                    job_spec["template"]["spec"]["subdomain"] = subdomain
                    self._store_new(
                        "jobs",
                        {
                            "apiVersion": "batch/v1",
                            "kind": "Job",
                            "metadata": {
                                "name": job_name,
                                "namespace": namespace,
                                "labels": labels,
                                "annotations": dict(
                                    (template.get("metadata") or {}).get("annotations") or {}
                                ),
                                "ownerReferences": [owner],
                            },
                            "spec": job_spec,
                        },
                    )
            jobs = self.list("jobs", namespace, f"jobset.sigs.k8s.io/jobset-name={name}")
            for kind, condition in (("Failed", "Failed"), ("Complete", "Completed")):
                done = [j for j in jobs if _has_condition(j, kind)]
                if done and (kind == "Failed" or len(done) == len(jobs)):
                    ended = copy.deepcopy(jobset)
                    ended["status"].setdefault("conditions", []).append(
                        {
                            "type": condition,
                            "status": "True",
                            "reason": f"AllJobs{condition}" if kind == "Complete" else "FailedJobs",
                            "message": f"jobset {condition.lower()}",
                            "lastTransitionTime": now(),
                        }
                    )
                    self.put("jobsets", ended)
                    break

    @staticmethod
    def _jobset_ended(jobset: Obj) -> bool:
        return any(
            c.get("type") in ("Completed", "Failed") and c.get("status") == "True"
            for c in (jobset.get("status") or {}).get("conditions") or []
        )

    def set_jobset_suspend(self, name: str, namespace: str, suspend: bool) -> Obj:
        """Kueue admits a JobSet (``suspend: false``) or preempts it (``true`` again); the
        JobSet controller passes it on to its Jobs."""
        jobset = copy.deepcopy(self.objects[("jobsets", namespace, name)])
        jobset["spec"]["suspend"] = suspend
        stored = self.put("jobsets", jobset)
        self.reconcile_jobsets()
        return stored

    def kueue_admit_fitting(self, namespace: str, gpus: float) -> list[str]:
        """Kueue with a ClusterQueue of ``gpus`` nvidia.com/gpu: admit, oldest first, each
        suspended Job or JobSet whose pods' GPUs all fit in what the admitted ones leave,
        whole or not at all (a multi-node job is one Workload of all its pods): the names
        admitted."""

        def wanted(spec: Obj) -> float:
            pod = spec["template"]["spec"]
            per_pod = sum(
                _quantity(((c.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu", 0))
                for c in pod.get("containers") or []
            )
            return per_pod * (spec.get("parallelism") or 1)

        def total(resource: str, obj: Obj) -> float:
            if resource == "jobsets":
                return sum(
                    wanted(r["template"]["spec"]) * r.get("replicas", 1)
                    for r in obj["spec"].get("replicatedJobs") or []
                )
            return wanted(obj["spec"])

        queued: list[tuple[int, str, Obj]] = []
        used = 0.0
        for resource in ("jobs", "jobsets"):
            for obj in self.list(resource, namespace):
                labels = obj["metadata"].get("labels") or {}
                if "kueue.x-k8s.io/queue-name" not in labels:
                    continue  # a JobSet's Job: its JobSet is the Workload
                if obj["spec"].get("suspend"):
                    queued.append((self.created.get(obj["metadata"]["uid"], 0), resource, obj))
                elif not (_has_condition(obj, "Complete") or _has_condition(obj, "Failed")) and (
                    not self._jobset_ended(obj)
                ):
                    used += total(resource, obj)
        admitted = []
        for _, resource, obj in sorted(queued, key=lambda item: item[0]):
            need = total(resource, obj)
            if used + need > gpus + 1e-9:
                continue
            used += need
            name = obj["metadata"]["name"]
            if resource == "jobsets":
                self.set_jobset_suspend(name, namespace, False)
            else:
                self.admit(name, namespace)
            admitted.append(name)
        return admitted

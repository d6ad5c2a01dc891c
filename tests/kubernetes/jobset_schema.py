"""A JobSet (``jobset.x-k8s.io/v1alpha2``) checked against JobSet's API schema.

The schema is JobSet's own OpenAPI, as the generated models of ``kubeflow-trainer-api``
carry it (Kubeflow Trainer runs on JobSet). Those models ignore fields they do not know,
where the API server prunes or refuses them: :func:`jobset_problems` walks the object
against them and reports every unknown field, every wrong type, every missing required
field; each replicated Job's template is then checked as a whole ``batch/v1`` Job with
Kubernetes' own schema (kubernetes_validate), as the JobSet controller will create it.
"""

from __future__ import annotations

import types
import typing
from typing import Any

import kubernetes_validate
from pydantic import BaseModel, ValidationError

#: the Kubernetes version whose schemas the rest of the tests use
KUBERNETES = "1.37.0"
#: models whose contents are Kubernetes' own objects, checked with its schema instead
_KUBERNETES_OWN = ("IoK8sApiBatchV1JobTemplateSpec", "IoK8sApimachineryPkgApisMetaV1ObjectMeta")


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models a field's annotation holds (through Optional, List, Dict)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found += _models_in(arg)
    return found


def _is_list(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_is_list(a) for a in typing.get_args(annotation) if a is not type(None))
    return origin is list


def _unknown_fields(model: type[BaseModel], data: Any, where: str) -> list[str]:
    if not isinstance(data, dict):
        return []
    fields = {(f.alias or name): f for name, f in model.model_fields.items()}
    problems = [
        f"{where}.{key}: not a field of {model.__name__}" for key in data if key not in fields
    ]
    for key, value in data.items():
        field = fields.get(key)
        if field is None:
            continue
        for inner in _models_in(field.annotation):
            if inner.__name__ in _KUBERNETES_OWN:
                continue
            items = value if _is_list(field.annotation) and isinstance(value, list) else [value]
            for i, item in enumerate(items):
                at = f"{where}.{key}[{i}]" if items is value else f"{where}.{key}"
                problems += _unknown_fields(inner, item, at)
    return problems


def jobset_problems(jobset: dict[str, Any]) -> list[str]:
    """Everything JobSet's schema (and Kubernetes', for its Jobs) says is wrong."""
    # imported here, not with the module: building its hundreds of models takes a second
    # of CPU, which every test worker would pay when it collects the tests
    from kubeflow_trainer_api.models.jobset_v1alpha2_job_set import JobsetV1alpha2JobSet

    problems = _unknown_fields(JobsetV1alpha2JobSet, jobset, "JobSet")
    if jobset.get("apiVersion") != "jobset.x-k8s.io/v1alpha2" or jobset.get("kind") != "JobSet":
        problems.append("JobSet: apiVersion/kind must be jobset.x-k8s.io/v1alpha2 JobSet")
    try:
        JobsetV1alpha2JobSet.from_dict(jobset)
    except ValidationError as exc:
        problems += [f"JobSet.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]
    for i, replicated in enumerate((jobset.get("spec") or {}).get("replicatedJobs") or []):
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "x", **(replicated.get("template") or {}).get("metadata", {})},
            "spec": (replicated.get("template") or {}).get("spec"),
        }
        try:
            kubernetes_validate.validate(job, KUBERNETES, strict=True)
        except kubernetes_validate.ValidationError as exc:
            problems.append(f"JobSet.spec.replicatedJobs[{i}].template: {exc.message}")
    return problems

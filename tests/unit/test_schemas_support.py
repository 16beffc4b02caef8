"""The strict schema helpers themselves: a schema check that never fails would prove nothing."""

import pytest

from support.schemas import SchemaError, crd_path, make_strict, validate_builtin, validate_crd


def _raycluster(worker_template: dict) -> dict:
    pod = {"spec": {"containers": [{"name": "ray-head", "image": "example.com/ray:1"}]}}
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "x"},
            "spec": {"headGroupSpec": {"rayStartParams": {}, "template": pod},
                     "workerGroupSpecs": [{"groupName": "g", "minReplicas": 0, "maxReplicas": 1,
                                           "template": worker_template}]}}


def test_make_strict_rejects_unknown_keys_only_where_properties_are_listed():
    free = {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {"c": {}}}
    schema = make_strict({"type": "object",
                          "properties": {"a": {"type": "object", "properties": {"b": {}}}, "free": free}})
    assert schema["additionalProperties"] is False
    assert schema["properties"]["a"]["additionalProperties"] is False
    assert "additionalProperties" not in schema["properties"]["free"]


def test_validate_crd_rejects_annotations_outside_template_metadata():
    crd = crd_path("ray.io_rayclusters.yaml")
    pod = {"containers": [{"name": "w", "image": "example.com/ray:1"}]}
    misplaced = {"annotations": {"k": "v"}, "spec": pod}
    with pytest.raises(SchemaError, match=r"template.*'annotations' was unexpected"):
        validate_crd(_raycluster(misplaced), crd)


def test_validate_crd_accepts_annotations_under_template_metadata():
    crd = crd_path("ray.io_rayclusters.yaml")
    placed = {"metadata": {"annotations": {"k": "v"}},
              "spec": {"containers": [{"name": "w", "image": "example.com/ray:1"}]}}
    validate_crd(_raycluster(placed), crd)


def test_validate_crd_rejects_wrong_kind():
    crd = crd_path("ray.io_rayclusters.yaml")
    with pytest.raises(SchemaError, match="is not RayCluster"):
        validate_crd({**_raycluster({}), "kind": "RayJob"}, crd)


def test_validate_builtin_rejects_unknown_field():
    with pytest.raises(SchemaError, match="ConfigMap x"):
        validate_builtin({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "bogus": 1})


def test_validate_builtin_accepts_a_valid_configmap():
    validate_builtin({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "1"}})

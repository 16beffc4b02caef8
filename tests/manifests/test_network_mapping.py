"""The rendered network mapping against GKE's CRD schemas (strict: unknown fields fail)."""

from __future__ import annotations

import copy

import pytest

from nemo_rl_gke import render
from nemo_rl_gke.settings import GPU_PROFILES, Settings, coerce, validate
from support.fake import read_env_example
from support.schemas import SchemaError, crd_path, validate_crd

CRDS = {"GKENetworkParamSet": "networking.gke.io_gkenetworkparamsets.yaml",
        "Network": "networking.gke.io_networks.yaml"}


def documents(**overrides):
    values = {k: v for k, v in read_env_example().items() if k in Settings.__dataclass_fields__}
    return render.load_all(render.network_mapping(validate(Settings(**coerce({**values, **overrides})))))


@pytest.mark.parametrize("gpu,mode", [(g, m) for g in GPU_PROFILES for m in ("standard", "autopilot")])
def test_network_mapping_objects_pass_the_strict_crd_schemas(gpu, mode):
    docs = documents(GPU_TYPE=gpu, CLUSTER_MODE=mode)
    assert len(docs) == 18
    for doc in docs:
        validate_crd(doc, crd_path(CRDS[doc["kind"]]))


def test_strict_schema_rejects_an_unknown_field():
    doc = copy.deepcopy(next(d for d in documents() if d["kind"] == "GKENetworkParamSet"))
    doc["spec"]["vpcSubnetwork"] = doc["spec"].pop("vpcSubnet")  # a plausible typo
    with pytest.raises(SchemaError):
        validate_crd(doc, crd_path(CRDS["GKENetworkParamSet"]))

from __future__ import annotations

import pytest

from nemo_rl_gke import render
from nemo_rl_gke.render import RenderError, render_text
from nemo_rl_gke.settings import Settings, coerce, validate
from support.fake import read_env_example


def make(**overrides) -> Settings:
    values = {k: v for k, v in read_env_example().items() if k in Settings.__dataclass_fields__}
    return validate(Settings(**coerce({**values, **overrides})))


def test_render_text_fails_on_missing_variable():
    with pytest.raises(RenderError, match="NAME"):
        render_text("vpc: ${NAME}-net", {})


def test_network_mapping_substitutes_the_real_names():
    # Tutorial defect 12: the mapping was applied with ${...} left in it.
    text = render.network_mapping(make(GVNIC_NETWORK_PREFIX="g1", RDMA_NETWORK_PREFIX="r1"))
    assert "${" not in text
    docs = render.load_all(text)
    params = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "GKENetworkParamSet"}
    assert params["gvnic-1"] == {"vpc": "g1-net", "vpcSubnet": "g1-sub", "deviceMode": "NetDevice"}
    for n in range(8):
        assert params[f"rdma-{n}"] == {"vpc": "r1-net", "vpcSubnet": f"r1-sub-{n}", "deviceMode": "RDMA"}
    networks = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "Network"}
    assert set(networks) == set(params) == set(render.NETWORK_MAPPING_NAMES)
    assert all(spec["parametersRef"]["name"] == name and spec["type"] == "Device" for name, spec in networks.items())

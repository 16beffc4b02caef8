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


# ---- shell script templates (scripts/submit.sh.tmpl) -------------------------------------------------------
def test_render_script_fills_placeholders_and_leaves_bash_alone():
    from nemo_rl_gke.render import render_script

    text = render_script('X=@{X}\necho "$X ${Y:-}" "$@" user@host\n', {"X": "'a b'"})
    assert text == 'X=\'a b\'\necho "$X ${Y:-}" "$@" user@host\n'


def test_render_script_missing_or_unused_value_is_an_error():
    import pytest

    from nemo_rl_gke.render import RenderError, render_script

    with pytest.raises(RenderError, match="no value for @{Y}"):
        render_script("@{X} @{Y}", {"X": "1"})
    with pytest.raises(RenderError, match="Z is not in the template"):
        render_script("@{X}", {"X": "1", "Z": "2"})


def test_render_script_value_holding_placeholder_text_is_kept_verbatim():
    from nemo_rl_gke.render import render_script

    assert render_script("A=@{A}", {"A": "'@{B}'"}) == "A='@{B}'"


def test_render_script_the_submit_template_has_no_stray_placeholders():
    import re

    from nemo_rl_gke.jobscript import SCRIPTS

    template = (SCRIPTS / "submit.sh.tmpl").read_text()
    names = set(re.findall(r"@\{([A-Z_]+)\}", template))
    assert {"RUN_ID", "RECIPE", "WRITE_OVERRIDES", "WRITE_SUPERVISOR", "CHECK_ACCESS"} <= names

"""The inventory's `--filter` expressions against the real gcloud: each one parses in gcloud's filter engine
(offline, through a list command that needs no account), and selects exactly what the fake cloud's filter
selects, evaluated by gcloud's own engine (its bundled Python and SDK library) on the same items: ours by
name, ours by marker, and look-alikes that must not match."""

from __future__ import annotations

import json
import subprocess

import pytest

from fakecloud.handlers import gcloud_filter
from nemo_rl_gke import names
from nemo_rl_gke.resources import inventory
from support.fake import read_env_example

MARKED = {"description": "managed-by=nemo-rl-gke deployment=other"}
LABELLED = {"labels": {"managed-by": "nemo-rl-gke"}, "resourceLabels": {"managed-by": "nemo-rl-gke"}}


def settings(**overrides: str):
    from nemo_rl_gke.settings import Settings, coerce, validate

    values = {k: v for k, v in read_env_example().items() if k in Settings.__dataclass_fields__}
    return validate(Settings(**coerce({**values, **overrides})))


def _samples(s) -> list[dict]:
    """Our names, items carrying our marker, and near misses (prefixes, suffixes, other markers)."""
    ours = [*inventory.our_networks(s), *inventory.our_subnets(s), s.CLUSTER_NAME, f"{s.LUSTRE_NAME}-range",
            f"{s.GVNIC_NETWORK_PREFIX}-{s.CLUSTER_NAME}-internal"]
    items = [{"name": name} for name in ours]
    items += [{"name": f"projects/p/locations/{s.lustre_zone}/instances/{s.LUSTRE_NAME}"}]
    items += [{"name": f"{name}-9", "lookalike": True} for name in ours]
    items += [{"name": f"x{name}", "lookalike": True} for name in ours]
    items += [{"name": f"projects/p/locations/z/instances/{s.LUSTRE_NAME}-old", "lookalike": True}]
    items += [{"name": "someone-else", **MARKED}, {"name": "labelled", **LABELLED},
              {"name": "other-marker", "description": "managed-by=another-tool"},
              _on_vpcs("tutorial", names.gvnic_network(s)),
              _on_vpcs("tutorial-by-url", f"projects/p/global/networks/{names.rdma_network(s)}"),
              {**_on_vpcs("elsewhere", f"{names.rdma_network(s)}-2", f"x{names.gvnic_network(s)}"),
               "lookalike": True},
              # shapes a listing may have: no pools, null, pools without or with an empty networkConfig
              {"name": "no-pools", "nodePools": []}, {"name": "null-pools", "nodePools": None},
              {"name": "bare-pools", "nodePools": [{"name": "a"}, {"name": "b", "networkConfig": {}}]},
              {"name": "upper", "nodePools": [{"name": "a", "networkConfig": {"additionalNodeNetworkConfigs": [
                  {"network": names.gvnic_network(s).upper()}]}}]},
              {"name": "other-label", "labels": {"managed-by": "nemo-rl-gke-fork"},
               "resourceLabels": {"managed-by": "terraform"}}]
    return items


def _on_vpcs(name: str, *networks: str) -> dict:
    """A cluster made another way whose node pool has NICs on these VPCs (GKE's shape of it)."""
    return {"name": name, "nodePools": [  # a default pool first, without networkConfig, as GKE may show it
        {"name": "default-pool"},
        {"name": "gpu-pool", "networkConfig": {"additionalNodeNetworkConfigs": [
            {"network": network, "subnetwork": f"{network}-sub"} for network in networks]}}]}


def _sdk(gcloud: str, env: dict[str, str]) -> tuple[str, str]:
    out = subprocess.run([gcloud, "info", "--format=value(installation.sdk_root,basic.python_location)"],
                         env=env, capture_output=True, text=True, timeout=120).stdout.split()
    if len(out) != 2:
        pytest.skip("gcloud info gave no SDK root and Python")
    return out[0], out[1]


EVALUATE = """
import json, sys
root = sys.argv[1]
sys.path[:0] = [root + "/lib", root + "/lib/third_party"]
from googlecloudsdk.core.resource import resource_filter
cases = json.load(sys.stdin)
print(json.dumps([[i for i, item in enumerate(case["items"]) if resource_filter.Compile(case["filter"]).Evaluate(item)]
                  for case in cases]))
"""


def _filters(s) -> list[str]:
    return [arg.split("=", 1)[1] for item in inventory.listings(s) for arg in item.argv if arg.startswith("--filter=")]


def test_gcloud_filters_parse_in_real_gcloud(real_gcloud):
    binary, env = real_gcloud
    filters = _filters(settings())
    assert len(filters) == 6  # networks, subnets, firewall rules, clusters, Lustre, address ranges
    for expression in filters:
        # A list that needs no account applies --filter with gcloud's own parser: a bad one exits 1.
        done = subprocess.run([binary, "config", "configurations", "list", f"--filter={expression}",
                               "--format=json"], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (expression, done.stderr)


def test_gcloud_filters_select_what_the_fake_selects(real_gcloud):
    binary, env = real_gcloud
    root, python = _sdk(binary, env)
    s = settings()
    items = _samples(s)
    cases = [{"filter": expression, "items": items} for expression in _filters(s)]
    done = subprocess.run([python, "-c", EVALUATE, root], input=json.dumps(cases), env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    real = json.loads(done.stdout)
    for case, chosen in zip(cases, real, strict=True):
        fake = [i for i, item in enumerate(items) if gcloud_filter.matches(case["filter"], item)]
        assert fake == chosen, (case["filter"], [items[i]["name"] for i in fake], [items[i]["name"] for i in chosen])
        picked = {items[i]["name"] for i in chosen}
        assert "someone-else" in picked or "labelled" in picked, case["filter"]  # the marker half matches
        lookalikes = {item["name"] for item in items if item.get("lookalike")}
        assert not picked & ({"other-marker", "other-label"} | lookalikes), case["filter"]
        # The clusters' listing alone also selects a cluster made another way with a node pool on our VPCs (by
        # name, as GKE gives it; a URL there would not be selected, by gcloud as by the fake).
        assert ("tutorial" in picked) == ("nodePools" in case["filter"]), case["filter"]


# Values of every shape a listing may give a term, for the word-match operators (`:` and `=`).
SHAPES = [{"status": value} for value in (
    "ACTIVE", "active", "INACTIVE", "ACTIVE-x", "x-ACTIVE", "xACTIVEy", "", None, ["a", "ACTIVE"], [["ACTIVE"]],
    [], {"k": "ACTIVE"}, {"ACTIVE": 1}, 1, 0, 1.0, True, False, "Actívé", "<b>ACTIVE</b>", "line\nACTIVE",
    "1", "true", "null")] + [{}, {"status": {"deeper": {"k": "ACTIVE"}}}]


def test_gcloud_word_match_operators_select_what_the_fake_selects(real_gcloud):
    """`:` (HAS) and `=` as gcloud's engine applies them (its current, "deprecated" rules), on strings, case,
    accents, HTML, lines, lists (one and two deep), dicts, numbers, booleans, null and missing keys: including
    doctor's `gcloud auth list --filter=status:ACTIVE`."""
    from nemo_rl_gke.commands import doctor

    ours = [arg.split("=", 1)[1] for arg in doctor.active_account() if arg.startswith("--filter=")]
    assert ours == ["status:ACTIVE"]
    expressions = [*ours, "status:*", "status:act", "status:ACTIVE*", "status:*ACTIVE", "status:x*y",
                   "status:true", "status:false", "status:1", "status:null", "status:\"\"", "-status:ACTIVE",
                   "status=ACTIVE", "status=(a ACTIVE)", "status!=ACTIVE", "status=true", "status=null", "status=1",
                   "status.k:ACTIVE", "status.deeper.k:act"]
    binary, env = real_gcloud
    root, python = _sdk(binary, env)
    cases = [{"filter": expression, "items": SHAPES} for expression in expressions]
    done = subprocess.run([python, "-c", EVALUATE, root], input=json.dumps(cases), env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    for case, chosen in zip(cases, json.loads(done.stdout), strict=True):
        fake = [i for i, item in enumerate(SHAPES) if gcloud_filter.matches(case["filter"], item)]
        assert fake == chosen, (case["filter"], [SHAPES[i] for i in fake], [SHAPES[i] for i in chosen])


def test_gcloud_term_without_an_operand_is_refused_as_by_gcloud(real_gcloud):
    binary, env = real_gcloud
    for expression in ("status:", "status=", "status!=", "status~"):
        done = subprocess.run([binary, "config", "configurations", "list", f"--filter={expression}",
                               "--format=json"], env=env, capture_output=True, text=True, timeout=120)
        with pytest.raises(gcloud_filter.FilterError) as refused:
            gcloud_filter.matches(expression, {"status": "ACTIVE"})
        assert (done.returncode, str(refused.value)) == (1, f"Term operand expected [{expression} *HERE*]."), \
            done.stderr
        assert str(refused.value) in done.stderr

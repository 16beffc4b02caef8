"""cluster_features: what a cluster lacks, from a describe shaped as GKE's Cluster, and the one update per
change that turns it on."""

from __future__ import annotations

from nemo_rl_gke.resources import cluster_features as features
from nemo_rl_gke.settings import Settings, coerce, validate
from support.fake import read_env_example


def settings(**overrides: str) -> Settings:
    values = {k: v for k, v in read_env_example().items() if k in Settings.__dataclass_fields__}
    return validate(Settings(**coerce({**values, **overrides})))


S = settings()
OURS = {"addonsConfig": {"lustreCsiDriverConfig": {"enabled": True, "enableLegacyLustrePort": True},
                         "rayOperatorConfig": {"enabled": True}},
        "networkConfig": {"datapathProvider": "ADVANCED_DATAPATH", "enableMultiNetworking": True},
        "workloadIdentityConfig": {"workloadPool": f"{S.PROJECT_ID}.svc.id.goog"}}


def test_cluster_features_ours_lacks_nothing():
    assert features.missing(S, OURS) == []


def test_cluster_features_an_empty_describe_lacks_everything_in_order():
    assert [f.key for f in features.missing(S, {})] == ["lustre-csi-driver", "legacy-lustre-port", "ray-operator",
                                                       "dataplane-v2", "multi-networking", "workload-identity"]


def test_cluster_features_add_ons_are_one_update_then_one_per_other_change():
    body = {**OURS, "addonsConfig": {}, "networkConfig": {"datapathProvider": "ADVANCED_DATAPATH"}}
    off = features.missing(S, body)
    # gcloud's --enable-legacy-lustre-port turns the driver on with the port: no LustreCsiDriver add-on update
    assert [argv[-1] for argv in features.fixes(S, off)] == [
        "--update-addons=RayOperator=ENABLED", "--enable-legacy-lustre-port", "--enable-multi-networking"]
    port_on = {**body, "addonsConfig": {"lustreCsiDriverConfig": {"enableLegacyLustrePort": True}}}
    assert [argv[-1] for argv in features.fixes(S, features.missing(S, port_on))][0] == \
        "--update-addons=LustreCsiDriver=ENABLED,RayOperator=ENABLED"
    assert features.fixes(S, off)[0][:5] == ["gcloud", "container", "clusters", "update", S.CLUSTER_NAME]


def test_cluster_features_without_dataplane_v2_only_a_rebuild_helps():
    off = features.missing(S, {**OURS, "networkConfig": {}})
    assert [f.key for f in off] == ["dataplane-v2", "multi-networking"]
    assert features.fixes(S, off) == []
    assert "only a new cluster has GKE Dataplane V2" in features.advice(S, off)


def test_cluster_features_workload_identity_is_only_a_note():
    off = features.missing(S, {**OURS, "workloadIdentityConfig": {"workloadPool": "other.svc.id.goog"}})
    assert [f.key for f in off] == ["workload-identity"] and features.blocking(off) == []
    assert f"--workload-pool={S.PROJECT_ID}.svc.id.goog" in features.note(S, off)
    assert features.note(S, []) == ""

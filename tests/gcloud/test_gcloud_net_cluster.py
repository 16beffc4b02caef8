"""Every gcloud command of `invoke --dry net.create cluster.create` (4 variants), and the existence checks and
deletes of the same resources, parsed by the real gcloud: none may exit 2."""

from __future__ import annotations

import shlex

from nemo_rl_gke import names
from nemo_rl_gke.commands import gcloud
from nemo_rl_gke.settings import GPU_PROFILES
from support.fake import FakeCloud, example_settings

VARIANTS = [(gpu, mode) for gpu in GPU_PROFILES for mode in ("standard", "autopilot")]  # each GPU profile


def dry_gcloud_lines(tmp_path, *args: str, **env: str) -> list[list[str]]:
    cloud = FakeCloud(tmp_path)
    cloud.workdir.mkdir(parents=True, exist_ok=True)
    done = cloud.invoke("--dry", *args, **env)
    assert done.code == 0, done.output
    return [shlex.split(line[2:]) for line in done.stdout.splitlines() if line.startswith("$ gcloud ")]


def test_dry_net_and_cluster_create_commands_parse_in_real_gcloud(tmp_path, gcloud_parse):
    commands = []
    for gpu, mode in VARIANTS:
        for capacity in ({"SPOT": "true"}, {"SPOT": "false", "RESERVATION": "a4-reservation"}):
            commands += dry_gcloud_lines(tmp_path / f"{gpu}-{mode}-{len(capacity)}", "net.create", "cluster.create",
                                         f"--gpu={gpu}", f"--mode={mode}", **capacity)
    assert sum("node-pools" in c for c in commands) >= 4 and sum("create-auto" in c for c in commands) >= 2
    results = gcloud_parse(commands)
    bad = {" ".join(argv): err for argv, (code, err) in results.items() if code == 2}
    assert not bad, bad


def test_existence_checks_and_deletes_parse_in_real_gcloud(gcloud_parse):
    s = example_settings()
    commands = [gcloud.project_number(s), gcloud.cluster_describe(s), gcloud.cluster_delete(s),
                gcloud.node_pool_describe(s), gcloud.node_pool_delete(s), gcloud.get_credentials(s),
                gcloud.firewall_describe(s, names.gvnic_firewall(s)),
                gcloud.firewall_delete(s, names.gvnic_firewall(s))]
    for network in (s.NETWORK, names.gvnic_network(s), names.rdma_network(s)):
        commands += [gcloud.network_describe(s, network), gcloud.network_delete(s, network)]
    for subnet in [names.gvnic_subnet(s)] + [names.rdma_subnet(s, n) for n in range(8)]:
        commands += [gcloud.subnet_describe(s, subnet), gcloud.subnet_delete(s, subnet)]
    results = gcloud_parse(commands)
    bad = {" ".join(argv): err for argv, (code, err) in results.items() if code == 2}
    assert not bad, bad
    assert all(code == 1 for code, _ in results.values())  # well-formed, stopped only for lack of an account


def test_cluster_feature_updates_parse_in_real_gcloud(gcloud_parse):
    # What `up` prints to turn on what an adopted cluster lacks: each a command the user runs as printed.
    from nemo_rl_gke.resources import cluster_features

    s = example_settings()
    off = [f for f in cluster_features.missing(s, {"networkConfig": {"datapathProvider": "ADVANCED_DATAPATH"}})
           if f.blocking]
    commands = cluster_features.fixes(s, off)
    assert len(commands) == 3  # the add-ons, the legacy port, multi-networking: one change per update
    commands.append(shlex.split(cluster_features.note(s, [cluster_features.WORKLOAD_IDENTITY]).split("`")[1]))
    # what a teardown that keeps a cluster (or GPU pool) made another way says deletes it
    commands += [shlex.split(text.strip("`")) for text in (cluster_features.delete_it_yourself(s),
                                                           cluster_features.delete_pool_yourself(s))]
    results = gcloud_parse(commands)
    assert {" ".join(argv): code for argv, (code, _) in results.items()} == {" ".join(c): 1 for c in commands}

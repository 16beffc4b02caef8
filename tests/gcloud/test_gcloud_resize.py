"""`up --resize`'s gcloud commands parsed by the real gcloud: the GPU pool's resize and the describe of its
instance group (where the pool's current size is read). Neither may exit 2; both stop for lack of an account."""

from __future__ import annotations

from nemo_rl_gke.commands import gcloud
from nemo_rl_gke.settings import Settings, coerce, validate
from support.fake import read_env_example


def test_resize_and_instance_group_describe_parse_in_real_gcloud(gcloud_parse):
    values = {k: v for k, v in read_env_example().items() if k in Settings.__dataclass_fields__}
    s = validate(Settings(**coerce({**values, "GPU_NODES": "4"})))
    commands = [gcloud.node_pool_resize(s),
                gcloud.instance_group_describe(s, "gke-nemo-rl-gpu-pool-0f1e2d3c-grp", s.zone)]
    assert commands[0][:4] == ["gcloud", "container", "clusters", "resize"] and "--num-nodes=4" in commands[0]
    results = gcloud_parse(commands)
    assert {" ".join(argv): code for argv, (code, _) in results.items()} == {" ".join(c): 1 for c in commands}, \
        results

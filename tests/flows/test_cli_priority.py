"""Off the critical path, commands run at a lower CPU priority: a dozen start-ups at once (each gcloud is CPU-bound
for most of a second) must not starve the one the longest chain waits for. Through the real `invoke` command."""

from __future__ import annotations

import os

from nemo_rl_gke.tools import BACKGROUND_NICE
from support.fake import FakeCloud


def test_up_starts_the_subnets_in_the_background_and_the_lustre_chain_in_front(tmp_path):
    cloud = FakeCloud(tmp_path, processes=True)
    cloud.write_env()
    # Each fake call reads its priority 0.3 s after its start: a call at scale 0 could end before the runner, in
    # its parent, lowered it (under CI's load, 3 of 9 subnets read 0).
    done = cloud.invoke("up", "--yes", FAKECLOUD_PRIORITY_SETTLE="0.3")
    assert done.code == 0, done.output[-3000:]
    base = os.getpriority(os.PRIO_PROCESS, 0)
    mutating = [c for c in cloud.calls() if c["mutating"]]
    nice = {" ".join(c["argv"][:4]): c["nice"] for c in mutating}
    low = min(19, base + BACKGROUND_NICE)

    # The peering range starts the Lustre chain (the longest); the cluster's is seconds shorter; a subnet has
    # minutes to spare.
    assert nice["compute addresses create nemo-lustre-range"] == base
    assert nice["container clusters create nemo-rl"] == base
    subnets = [c["nice"] for c in mutating if c["argv"][:4] == ["compute", "networks", "subnets", "create"]]
    assert len(subnets) == 9 and set(subnets) == {low}
    assert sorted({c["nice"] for c in mutating}) == [base, low]

"""`down --delete-data` right after the Lustre delete: Service Networking may go on counting the deleted instance
as a producer of the VPC peering for a while ("Producer services ... are still using this connection"). The
teardown waits for it (60 poll intervals), then says why the range and the main VPC are left. On the fake cloud,
through invoke; FAKECLOUD_PEERING_HOLD_SECONDS is how long the fake holds it (wall clock)."""

from __future__ import annotations


def _up(cloud) -> None:
    done = cloud.invoke("up", "--yes")
    assert done.code == 0, done.output[-3000:]


def test_down_waits_for_service_networking_to_release_the_peering(cloud):
    _up(cloud)
    done = cloud.invoke("down", "--yes", "--delete-data", runner={"poll_seconds": 0.1},
                        FAKECLOUD_PEERING_HOLD_SECONDS="3")  # the first delete comes well within it
    assert done.code == 0, done.output[-3000:]
    assert "still held by Service Networking after the Lustre delete" in done.stderr
    deletes = [c for c in cloud.calls() if c["argv"][:3] == ["services", "vpc-peerings", "delete"]]
    assert len(deletes) >= 2 and deletes[-1]["exit"] == 0 and deletes[0]["exit"] == 1
    assert cloud.resources() == {}, sorted(cloud.resources())


def test_down_says_why_the_range_and_vpc_stay_when_the_peering_is_held_longer(cloud):
    _up(cloud)
    done = cloud.invoke("down", "--yes", "--delete-data", runner={"poll_seconds": 0.02},
                        FAKECLOUD_PEERING_HOLD_SECONDS="60")
    assert done.code == 1, done.output[-3000:]
    assert "Service Networking still says a producer uses the VPC peering of default" in done.stderr
    assert "run `invoke down` again later" in done.stderr
    assert "peering" in cloud.resources() and "lustre" not in cloud.resources()

"""Where a kubeconfig context points (kubeconfig.server_of), and when the inventory lets a stale one go."""

from __future__ import annotations

import io
from dataclasses import dataclass, field

import pytest
import yaml

from nemo_rl_gke import kubeconfig
from nemo_rl_gke.resources import kube_context
from nemo_rl_gke.resources.inventory import Inventory
from nemo_rl_gke.runner import Runner
from nemo_rl_gke.settings import Settings
from nemo_rl_gke.tools import Ran
from support.fake import example_settings


def make() -> Settings:
    return example_settings()


def write_config(path, context: str, server: str | None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    clusters = [] if server is None else [{"name": context, "cluster": {"server": server}}]
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "clusters": clusters,
                                    "contexts": [{"name": context, "context": {"cluster": context}}]}))


def test_server_of_reads_the_files_in_kubectls_order(tmp_path, monkeypatch):
    first, second, broken = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    write_config(first, "one", "https://34.1.2.3:443")
    write_config(second, "two", "https://gke-x.us-central1.gke.goog")
    broken.write_text("{: not yaml")
    monkeypatch.setenv("KUBECONFIG", f"{broken}:{first}:{second}:{tmp_path / 'missing'}")
    assert [kubeconfig.server_of(c) for c in ("one", "two", "three")] == ["34.1.2.3", "gke-x.us-central1.gke.goog",
                                                                          None]
    write_config(broken, "two", "https://10.0.0.9")  # now first in the list: its entry wins
    assert kubeconfig.server_of("two") == "10.0.0.9"


def test_server_of_without_kubeconfig_is_home_kube_config(tmp_path, monkeypatch):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert kubeconfig.server_of("ctx") is None
    write_config(tmp_path / ".kube" / "config", "ctx", None)
    assert kubeconfig.server_of("ctx") == ""


@dataclass
class Seam:
    asked: list[list[str]] = field(default_factory=list)
    ended: list[str] = field(default_factory=list)

    def run(self, argv, *, stdin, timeout):
        self.asked.append(argv)
        return Ran(0, f"deleted context {argv[-1]}", "")

    def end(self, matches, why, *, launched_before):
        s = make()
        self.ended.append(why)
        assert matches(["kubectl", f"--context={s.kube_context}", "get", "pods"])
        assert matches(["helm", "status", "nemo-rl", f"--kube-context={s.kube_context}"])
        assert not matches(["kubectl", "--context=gke_other_us-central1_x", "get", "pods"])
        return 2


CLUSTER = {"name": "nemo-rl", "location": "us-central1", "endpoint": "34.1.2.3",
           "privateClusterConfig": {"privateEndpoint": "10.0.0.2"}}


@pytest.mark.parametrize("server,listed,acts", [
    (None, [], False),  # no such context here: a first `up`, nothing to do
    ("https://34.9.9.9", [], True),  # deleted elsewhere
    ("https://34.1.2.3", [CLUSTER], False),  # ours
    ("https://10.0.0.2", [CLUSTER], False),  # ours, through its private endpoint
    ("https://34.9.9.9", [CLUSTER], True),  # re-created elsewhere: another endpoint
    ("https://gke-abc.us-central1.gke.goog", [CLUSTER], False),  # a DNS endpoint: cannot compare, left alone
    ("https://34.9.9.9", [{**CLUSTER, "location": "europe-west4"}], True),  # a namesake elsewhere is not ours
], ids=["no-context", "deleted", "same", "private", "recreated", "dns", "namesake"])
def test_inventory_lets_a_stale_context_go(tmp_path, monkeypatch, server, listed, acts):
    s = make()
    path = tmp_path / "config"
    monkeypatch.setenv("KUBECONFIG", str(path))
    if server is not None:
        write_config(path, s.kube_context, server)
    seam, err = Seam(), io.StringIO()
    r = Runner(tools=seam, out=io.StringIO(), err=err)
    kube_context.drop_if_stale(r, s, Inventory(s).cluster(listed))
    assert seam.asked == ([["kubectl", "config", "delete-context", s.kube_context]] if acts else [])
    assert bool(seam.ended) == acts and ("2 kubectl/helm call(s) waiting on it stopped" in err.getvalue()) == acts
    if acts:
        assert ("re-created" in seam.ended[0]) == bool(listed and listed[0]["location"] == s.region)


def test_watch_asks_nothing_when_the_block_ends_in_time_or_the_machine_has_no_context(tmp_path, monkeypatch):
    import time

    s = make()
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "config"))
    seam = Seam()
    r = Runner(tools=seam, out=io.StringIO(), err=io.StringIO())
    write_config(tmp_path / "config", s.kube_context, "https://34.9.9.9")
    with kube_context.watch(r, s, after=0.2):
        pass  # the first call answered at once
    time.sleep(0.4)
    (tmp_path / "config").unlink()
    with kube_context.watch(r, s, after=0.1):
        time.sleep(0.4)  # slow, but no context here: kubectl says so at once, nothing to ask gcloud
    assert seam.asked == []


def test_watch_asks_gcloud_once_the_block_is_slow_and_drops_a_stale_context(tmp_path, monkeypatch):
    import threading
    import time

    s = make()
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "config"))
    write_config(tmp_path / "config", s.kube_context, "https://34.9.9.9")

    class Gone(Seam):
        def run(self, argv, *, stdin, timeout):
            self.asked.append(argv)
            if argv[:4] == ["gcloud", "container", "clusters", "describe"]:
                return Ran(1, "", "ERROR: (gcloud.container.clusters.describe) ResponseError: code=404, message=Not "
                                  "found: projects/p/locations/us-central1/clusters/nemo-rl.")
            return Ran(0, "", "")

    seam, err = Gone(), io.StringIO()
    r = Runner(tools=seam, out=io.StringIO(), err=err)
    with kube_context.watch(r, s, after=0.1):
        watching = [t for t in threading.enumerate() if t.name == "kube-context-watch"]
        deadline = time.monotonic() + 10
        while not seam.ended and time.monotonic() < deadline:  # the stuck kubectl call, until it is ended
            time.sleep(0.05)
    for thread in watching:  # its note comes just after the end: the assertions wait for the whole check
        thread.join(10)
    assert [argv[:4] for argv in seam.asked] == [["gcloud", "container", "clusters", "describe"],
                                                ["kubectl", "config", "delete-context", s.kube_context]]
    assert seam.ended and "is not in" in seam.ended[0] and "removed it" in err.getvalue()


@pytest.mark.parametrize("when", ["before the describe", "after the describe"])
def test_watch_check_after_ctrl_c_ends_quietly(tmp_path, monkeypatch, when):
    # Ctrl-C (or SIGTERM) reached the run while its first kubectl call hung: the check's next call (the describe,
    # or after it the stale context's removal) is refused (Interrupted) in the watch's thread, which printed a
    # traceback. It ends without a word now.
    import threading
    import time

    s = make()
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "config"))
    write_config(tmp_path / "config", s.kube_context, "https://34.9.9.9")
    raised: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda hook: raised.append(hook.exc_value))

    class Gone(Seam):  # the cluster is gone, and Ctrl-C comes as gcloud says so
        def run(self, argv, *, stdin, timeout):
            self.asked.append(argv)
            r.interrupt()
            return Ran(1, "", "ERROR: (gcloud.container.clusters.describe) ResponseError: code=404, message=Not "
                              "found: projects/p/locations/us-central1/clusters/nemo-rl.")

    seam = Gone()
    r = Runner(tools=seam, out=io.StringIO(), err=io.StringIO())
    if when == "before the describe":
        r.interrupt()
    with kube_context.watch(r, s, after=0.05):
        watching = [t for t in threading.enumerate() if t.name == "kube-context-watch"]
        deadline = time.monotonic() + 10
        while any(t.is_alive() for t in watching) and time.monotonic() < deadline:  # its whole check, in the block
            time.sleep(0.02)
    asked = [] if when == "before the describe" else [["gcloud", "container", "clusters", "describe"]]
    assert (len(watching), raised, [argv[:4] for argv in seam.asked]) == (1, [], asked)

"""Invoke entry point: composes the namespaces. `invoke --list` to see them."""

from invoke import Collection

from nemo_rl_gke import cluster, net

ns = Collection()
for module in (net, cluster):
    ns.add_collection(module.ns)

"""Invoke entry point: composes the namespaces. `invoke --list` to see them."""

from invoke.collection import Collection

from nemo_rl_gke.tasks import clean, cli, cluster, job, lifecycle, net, overview, ray, storage

# Usage errors (unknown flag, bad value, missing NAME) exit 2, and -h/--help print usage on every task.
cli.install_usage_exit_codes()

ns = Collection()
for module in (net, cluster, storage, ray, job, clean):
    ns.add_collection(module.ns)
for top_level_task in (*lifecycle.TASKS, *overview.TASKS):
    ns.add_task(top_level_task)

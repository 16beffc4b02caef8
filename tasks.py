"""Invoke entry point: composes the namespaces. `invoke --list` to see them."""

import sys

# Invoke turns bytecode writing off for everything a tasks.py imports (its --write-pyc, off by default), so our
# package was compiled again on every `invoke` (~20 ms of `invoke --list`, all ~60 modules for `up`). Python's
# own setting again: PYTHONDONTWRITEBYTECODE or -B still turn it off.
sys.dont_write_bytecode = bool(sys.flags.dont_write_bytecode)

from invoke.collection import Collection  # noqa: E402

from nemo_rl_gke.tasks import clean, cli, cluster, job, lifecycle, net, overview, ray, storage  # noqa: E402

# Output to a reader that went away (`invoke … | head`) is dropped, never a traceback or a half-done run.
cli.guard_output()
# Usage errors (unknown flag, bad value, missing NAME) exit 2, and -h/--help print usage on every task.
cli.install_usage_exit_codes()
# The process ends without Python's last collection over every object (tens of ms at the end of each task).
cli.quick_exit()

ns = Collection()
for module in (net, cluster, storage, ray, job, clean):
    ns.add_collection(module.ns)
for top_level_task in (*lifecycle.TASKS, *overview.TASKS):
    ns.add_task(top_level_task)

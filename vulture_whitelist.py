# ruff: noqa: B018 - a vulture whitelist is bare attribute uses by design
"""Uses vulture cannot see (it reads no framework, no JSON, no code held in a string). Each is a true false
positive, named with why; dead code does not belong here: delete it instead. Never imported or run."""

from typing import Any

_: Any = None

# Protocols and attributes read by a library, not by our code.
_.writable  # board.AboveLive: io.TextIOBase asks it before a write
_.caption  # board.Board.render: rich's Table draws it
_.caption_justify  # board.Board.render: rich's Table reads it
_.uniform_bucket_level_access_enabled  # gcs.new_bucket: google-cloud-storage sends it on create
_.hierarchical_namespace_enabled  # gcs.new_bucket: google-cloud-storage sends it on create
_.sessions  # noxfile: nox reads nox.options.*
_.default_venv_backend
_.reuse_existing_virtualenvs
_.encoding  # tests/support/inprocess._Pipe: readers of a text stream ask it

# TypedDict keys: read by subscript (prices["machines"]) or, for supervisor.json, by scripts/supervisor.py.
_.lustre_per_gib_hour  # cost.Prices
_.gke_management_fee_per_hour
_.bucket_per_gib_month
_.recipes  # jobrules.KnownRecipes
_.backoff_max_seconds  # jobscript.SupervisorConfig
_.gpu_wait_seconds
_.watch_seconds
_.keep_env
_.service_link
_.gpu_query

# The fake pod's stand-in for Ray's API: called by the Python that GPU_QUERY holds in a string.
_.init
_.address
_.cluster_resources

# tests/unit/test_context_cli.py: a task parameter that the test reads back as a CLI flag.
_.hours

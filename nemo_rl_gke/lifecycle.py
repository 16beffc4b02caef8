"""Top-level lifecycle tasks: up, down, plan, status, doctor (being built; see the issue tracker)."""

TASKS: list = []

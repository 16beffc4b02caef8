"""`job` namespace (being built; see the issue tracker)."""

from invoke import Collection

ns = Collection("job")

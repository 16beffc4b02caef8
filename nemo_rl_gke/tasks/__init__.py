"""The Invoke namespaces: one module per namespace, plus the top-level lifecycle tasks."""

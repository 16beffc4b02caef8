"""The fake cloud: gcloud, kubectl and helm stand-ins for tests and benchmarks."""

"""Pure argv builders for the external tools: gcloud, kubectl, helm, and the Lustre/storage commands."""

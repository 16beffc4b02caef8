"""The bucket's Workload Identity principal and role, and the gcloud equivalents of what the google-cloud-storage
client does (printed in dry runs and logs, never run: gcs.py makes the calls)."""

from __future__ import annotations

from ..settings import Settings
from .gcloud import project_flag
from .lustre import Argv

OBJECT_USER_ROLE = "roles/storage.objectUser"


def workload_principal(s: Settings, project_number: str) -> str:
    """The Workload Identity principal of KSA_NAME in NAMESPACE (no GCP service account in between)."""
    return (f"principal://iam.googleapis.com/projects/{project_number}/locations/global/workloadIdentityPools/"
            f"{s.PROJECT_ID}.svc.id.goog/subject/ns/{s.NAMESPACE}/sa/{s.KSA_NAME}")


def bucket_create_equivalent(s: Settings) -> Argv:
    return ["gcloud", "storage", "buckets", "create", f"gs://{s.bucket}", project_flag(s), f"--location={s.region}",
            "--enable-hierarchical-namespace", "--uniform-bucket-level-access"]


def bucket_delete_equivalent(s: Settings) -> Argv:
    return ["gcloud", "storage", "rm", "--recursive", f"gs://{s.bucket}", project_flag(s)]


def binding_add_equivalent(s: Settings, project_number: str) -> Argv:
    return ["gcloud", "storage", "buckets", "add-iam-policy-binding", f"gs://{s.bucket}", project_flag(s),
            f"--member={workload_principal(s, project_number)}", f"--role={OBJECT_USER_ROLE}"]


def binding_remove_equivalent(s: Settings, project_number: str) -> Argv:
    return ["gcloud", "storage", "buckets", "remove-iam-policy-binding", f"gs://{s.bucket}", project_flag(s),
            f"--member={workload_principal(s, project_number)}", f"--role={OBJECT_USER_ROLE}"]


def list_equivalent(s: Settings, prefix: str) -> Argv:
    return ["gcloud", "storage", "ls", "--recursive", f"gs://{s.bucket}/{prefix}", project_flag(s)]

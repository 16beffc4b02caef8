"""`invoke --dry storage.create`: the whole plan, in order, offline, with no secret in it."""

from __future__ import annotations

from support.fake import TEST_HF_TOKEN, TEST_WANDB_KEY

# What each printed command of the plan is, in the order the issue asks for.
PLAN = [
    ("bucket", "$ gcloud storage buckets create gs://"),
    ("KSA", "# stdin: ServiceAccount default/generic-ksa"),
    ("binding", "$ gcloud storage buckets add-iam-policy-binding"),
    ("secret", "# stdin: Secret nemo-rl-secrets"),
    ("range", "$ gcloud compute addresses create nemo-lustre-range"),
    ("peering", "$ gcloud services vpc-peerings connect"),
    ("lustre create", "$ gcloud lustre instances create"),
    ("lustre describe", "$ gcloud lustre instances describe"),
    ("PV apply", "# stdin: manifests/lustre-pv.yaml"),
    ("PVC apply", "# stdin: manifests/lustre-pvc.yaml"),
]


def _positions(stdout: str) -> list[str]:
    lines = stdout.splitlines()
    found = []
    for index, line in enumerate(lines):
        for label, marker in PLAN:
            if marker in line:
                found.append((index, label))
    return [label for _, label in sorted(found)]


def test_storage_dry_create_prints_the_plan_in_order(fake):
    done = fake.invoke("--dry", "storage.create")
    assert done.code == 0, done.output
    assert _positions(done.stdout) == [label for label, _ in PLAN]


def test_storage_dry_create_runs_nothing(fake):
    done = fake.invoke("--dry", "storage.create")
    assert (done.code, fake.calls()) == (0, []), done.output[-2000:]
    assert "$ gcloud lustre instances create" in done.stdout  # the plan was printed, not skipped


def test_storage_dry_create_and_delete_print_no_secret(fake):
    outputs = [fake.invoke("--dry", "storage.create"), fake.invoke("--dry", "storage.delete", "--delete-data",
                                                                   "--yes")]
    text = "".join(o.output for o in outputs)
    assert TEST_HF_TOKEN not in text and TEST_WANDB_KEY not in text


def test_storage_dry_create_marks_client_calls_as_equivalents(fake):
    lines = fake.invoke("--dry", "storage.create").stdout.splitlines()
    bucket = next(i for i, line in enumerate(lines) if line.startswith("$ gcloud storage buckets create"))
    assert lines[bucket - 1].startswith("# google-cloud-storage client call")

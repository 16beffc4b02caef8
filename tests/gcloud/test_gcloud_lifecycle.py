"""Every gcloud line of the golden `--dry up` / `--dry down` transcripts (regenerated live), every
existence-check argv of `all_steps` for b200/h200 × standard/autopilot, the leftover scan's lists and
doctor's queries, parsed by the real gcloud: none may exit 2 (= our flags are wrong). Deduplicated."""

from __future__ import annotations

import shlex

from nemo_rl_gke.settings import GPU_PROFILES
from support.asked import asked_by_checks
from support.fake import FakeCloud, read_env_example

VARIANTS = [(gpu, mode) for gpu in GPU_PROFILES for mode in ("standard", "autopilot")]  # each GPU profile


def _settings(**overrides: str):
    from nemo_rl_gke.settings import Settings, coerce, validate

    values = {k: v for k, v in read_env_example().items() if k in Settings.__dataclass_fields__}
    return validate(Settings(**coerce({**values, **overrides})))


def _gcloud_lines(text: str) -> list[list[str]]:
    return [shlex.split(line[2:], comments=True) for line in text.splitlines() if line.startswith("$ gcloud ")]


def _existence_queries(s) -> list[list[str]]:
    return [argv for argv in asked_by_checks(s) if argv and argv[0] == "gcloud"]


def test_lifecycle_dry_transcripts_parse_in_real_gcloud(tmp_path, gcloud_parse):
    commands = []
    for gpu, mode in VARIANTS:
        for task in (["up", f"--gpu={gpu}", f"--mode={mode}"], ["down", "--yes", "--delete-data"]):
            fake = FakeCloud(tmp_path / f"{gpu}-{mode}-{task[0]}")
            fake.workdir.mkdir(parents=True)
            done = fake.invoke("--dry", *task, GPU_TYPE=gpu, CLUSTER_MODE=mode)
            assert done.code == 0, done.output
            commands += _gcloud_lines(done.stdout)
    assert any("create-auto" in c for c in commands) and any("node-pools" in c for c in commands)
    bad = {" ".join(argv): err for argv, (code, err) in gcloud_parse(commands).items() if code == 2}
    assert not bad, bad


def test_lifecycle_queries_parse_in_real_gcloud(gcloud_parse):
    from nemo_rl_gke.commands import doctor
    from nemo_rl_gke.resources import leftovers

    commands = []
    for gpu, mode in VARIANTS:
        for capacity in ({"SPOT": "true"}, {"SPOT": "false", "RESERVATION": "a4-reservation"}):
            s = _settings(GPU_TYPE=gpu, CLUSTER_MODE=mode, **capacity)
            commands += _existence_queries(s)
            commands += [item.argv for item in leftovers.listings(s)]
            commands += [argv for argv in doctor.queries(s) if argv[0] == "gcloud"]
    assert any("describe" in c for c in commands)
    bad = {" ".join(argv): err for argv, (code, err) in gcloud_parse(commands).items() if code == 2}
    assert not bad, bad

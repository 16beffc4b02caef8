"""The planted HF_TOKEN / WANDB_API_KEY values appear nowhere: not in any task's output (dry run and on the
fake cloud), not in the argv log, not in any file the runs leave behind (fake state, pod roots and job run
directories, rendered values, kubeconfig, caches). The .env that holds them is the only exception.

The scan of every task runs `invoke` in-process (the fake cloud's handlers called without a process; the job
script still runs in a real shell); the secret-bearing path (up: the Secret; job.submit/logs; down) runs once
more with every fake tool a real process, so the argv each process really received is what the log shows."""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import ExitStack

from reliability import counts
from reliability.cloud import make_cloud, run
from support.fake import REPO, TEST_HF_TOKEN, TEST_WANDB_KEY

SECRETS = (TEST_HF_TOKEN, TEST_WANDB_KEY)
# Positional arguments the tasks need; the rest run with none.
ARGS = {"job.submit": ["gemma3-gsm8k", "--id=leak-check"]}
# On the fake cloud, in an order that exercises every task that does not block on a terminal.
FAKE_RUNS = [
    ["up", "--yes"], ["plan"], ["status"], ["doctor"], ["net.status"], ["cluster.status"], ["storage.status"],
    ["ray.status"], ["ray.render"], ["ray.render", "--values"], ["cluster.credentials"],
    ["job.submit", "gemma3-gsm8k", "--id=leak-check"], ["job.list"], ["job.status", "--id=leak-check"],
    ["job.logs", "--id=leak-check"], ["job.checkpoints", "--id=leak-check"], ["job.metrics", "--id=leak-check"],
    ["job.metrics", "--id=leak-check", "--plot=metrics.png"],
    ["job.stop", "--id=leak-check"], ["storage.export"], ["ray.deploy"], ["net.create"], ["cluster.create"],
    ["storage.create"], ["clean.ray", "--yes"], ["ray.delete", "--yes"], ["clean.storage", "--yes"],
    ["storage.delete", "--yes"], ["clean.cluster", "--yes"], ["cluster.delete", "--yes"], ["clean.net", "--yes"],
    ["net.delete", "--yes"], ["clean.all", "--yes"], ["down", "--yes", "--delete-data"],
]
# The runs whose success the scan depends on (a failing one would leave little to scan).
MUST_SUCCEED = ("up", "job.submit", "job.status", "job.logs", "job.checkpoints", "storage.export", "down")
NOT_ON_FAKE = {"ray.dashboard": "port-forward runs until Ctrl-C (its dry run is scanned; it handles no secret; "
                                 "flows/test_ray_dashboard.py runs it for real)"}


def task_names() -> list[str]:
    out = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), "--list",
                          "--list-format=json"], capture_output=True, text=True, check=True).stdout
    names: list[str] = []

    def walk(collection: dict, prefix: str = "") -> None:
        names.extend(prefix + t["name"] for t in collection["tasks"])
        for sub in collection["collections"]:
            walk(sub, prefix + sub["name"] + ".")

    walk(json.loads(out))
    return names


def leaks(text: str) -> int:
    return sum(text.count(secret) for secret in SECRETS)


def scan_files(root, fake, found: dict[str, int]) -> None:
    files = [p for p in root.rglob("*") if p.is_file() and p != fake.workdir / ".env"]
    counts.add("files", len(files))
    for path in files:
        found[str(path.relative_to(root))] = leaks(path.read_bytes().decode("utf-8", errors="replace"))


def test_secrets_scan_lists_only_tasks_that_exist():
    """A task renamed or removed must not drop out of the scan silently: the lists here follow the task list."""
    names = set(task_names())
    listed = {argv[0] for argv in FAKE_RUNS} | set(ARGS) | set(NOT_ON_FAKE) | set(MUST_SUCCEED)
    assert sorted(listed - names) == []


def test_secrets_appear_in_no_output_log_or_file_of_any_task(tmp_path):
    names = task_names()
    found: dict[str, int] = {}
    codes: dict[str, int] = {}
    with ExitStack() as stack:
        fake = make_cloud(stack, tmp_path)
        for name in names:
            done = run(fake, "--dry", name, *ARGS.get(name, []))
            found[f"--dry {name}"] = leaks(done.output)
        ran = {argv[0] for argv in FAKE_RUNS}
        counts.NOT_ON_FAKE.update(f"{n} ({NOT_ON_FAKE[n]})" for n in names if n not in ran and n in NOT_ON_FAKE)
        missing = sorted(n for n in names if n not in ran and n not in NOT_ON_FAKE)
        vanished = sorted({argv[0] for argv in FAKE_RUNS if argv[0] not in names})
        for argv in FAKE_RUNS:
            done = run(fake, *argv)
            found[" ".join(argv)] = leaks(done.output)
            if argv[0] in MUST_SUCCEED:
                codes[argv[0]] = done.code
        scan_files(tmp_path, fake, found)
    assert ({k: v for k, v in found.items() if v}, missing, vanished, {k: c for k, c in codes.items() if c}) == (
        {}, [], [], {})


PROCESS_RUNS = [["up", "--yes"], ["job.submit", "gemma3-gsm8k", "--id=leak-check"],
                ["job.logs", "--id=leak-check"], ["job.stop", "--id=leak-check"], ["storage.export"],
                ["down", "--yes", "--delete-data"]]


def test_secrets_appear_nowhere_when_every_tool_is_a_real_process(tmp_path):
    found: dict[str, int] = {}
    with ExitStack() as stack:
        fake = make_cloud(stack, tmp_path)
        fake.processes = True
        codes, failed = {}, []
        for argv in PROCESS_RUNS:
            done = run(fake, *argv)
            found[" ".join(argv)], codes[argv[0]] = leaks(done.output), done.code
            failed += [f"{' '.join(argv)}: {done.output[-1500:]}"] if done.code else []
        argv_logged = [" ".join(c["argv"]) for c in fake.calls()]
        scan_files(tmp_path, fake, found)
    assert ({k: v for k, v in found.items() if v}, codes, len(argv_logged) > 20) == (
        {}, {argv[0]: 0 for argv in PROCESS_RUNS}, True), "\n".join(failed)

"""Every `invoke` command the README shows in a code block runs: as a dry run (`--dry` added where the README does
not have it) through the real task code, in a directory with a valid .env. A flag renamed, a task removed or a
value that no longer validates makes this fail, so the README cannot drift from the command line.

What cannot run here is listed in SKIP with the reason; the test fails when a listed command is no longer in the
README (the list cannot go stale either)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from support.fake import REPO, FakeCloud

README = REPO / "README.md"
# Commands that need something the reader makes first.
SKIP = {
    "invoke --dry job.submit my-job": "needs jobs/my-job.yaml, which the README's `cp` line makes",
}
_ENV = re.compile(r"^[A-Z_][A-Z0-9_]*=\S*$")


def readme_commands() -> list[str]:
    """The `invoke …` commands of the README's code blocks, one per `&&` part, comments dropped (a line ending
    in a backslash continues on the next)."""
    commands: list[str] = []
    fence: str | None = None  # the language of the open code block, "" for none
    for line in README.read_text().replace("\\\n", " ").splitlines():
        if line.startswith("```"):
            fence = line.strip()[3:] if fence is None else None
            continue
        if fence not in ("", "bash", "sh"):
            continue
        code = line.split(" #", 1)[0].strip()
        for part in code.split("&&"):
            words = shlex.split(part)
            start = next((i for i, w in enumerate(words) if not _ENV.match(w)), len(words))
            if words[start:start + 1] == ["invoke"]:
                commands.append(" ".join(shlex.quote(w) for w in words))
    return commands


COMMANDS = readme_commands()


def test_readme_shows_commands_of_every_namespace():
    shown = " ".join(COMMANDS)
    for name in ("net.", "cluster.", "storage.", "ray.", "job.", "clean", " up", " down", " plan", " status",
                 " doctor"):
        assert name in shown, f"the README shows no `invoke {name.strip()}` command"
    assert set(SKIP) <= set(COMMANDS), f"SKIP lists commands the README no longer shows: {set(SKIP) - set(COMMANDS)}"


@pytest.mark.parametrize("command", [c for c in COMMANDS if c not in SKIP])
def test_readme_command_runs_as_a_dry_run(fake: FakeCloud, command: str):
    words = shlex.split(command)
    start = next(i for i, w in enumerate(words) if not _ENV.match(w))
    env = dict(w.split("=", 1) for w in words[:start])
    args = words[start + 1:]
    if "--dry" not in args:
        args = ["--dry", *args]
    done = fake.invoke(*args, **env)
    assert done.code == 0, f"{command}\n{done.output}"
    assert "Traceback (most recent call last)" not in done.stderr


def _block_with(text: str) -> str:
    """The README's one bash code block that holds `text`."""
    blocks = re.findall(r"^```bash\n(.*?)^```", README.read_text(), re.DOTALL | re.MULTILINE)
    found = [block for block in blocks if text in block]
    assert len(found) == 1, f"the README has {len(found)} bash blocks with {text!r}"
    return found[0]


def test_readme_fake_cloud_by_hand_runs_as_written(tmp_path):
    """The README's block that runs the fake cloud by hand, as a reader runs it: in bash, in a checkout (this one's
    files, without its .env), with the reader's own HOME and PATH (no helm on it: the block's .tools/bin has the
    one the fake needs), real processes. Its second `up` finds nothing to create, doctor asks nothing of the web,
    and its Cloud Storage refuses a second create-if-absent, as GCS does (the lease relies on it). The block first
    started gcp-storage-emulator itself: its buckets were project 1234's (the second `up` refused the bucket as
    another project's, exit 2) and it honoured no precondition (two machines' runs both took the lease)."""
    import contextlib
    import os
    import signal
    import socket
    import subprocess
    import sys

    block = _block_with("fakecloud-storage")
    with socket.socket() as probe:  # a free port for the emulator, instead of the README's 9023
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    for entry in REPO.iterdir():
        if entry.name not in (".env", ".git"):
            (checkout / entry.name).symlink_to(entry)
    env = {k: v for k, v in os.environ.items() if not k.startswith((
        "FAKECLOUD_", "INVOKE_", "CLOUDSDK_", "KUBE", "STORAGE_EMULATOR", "XDG_", "NRG_", "PYTHONPATH"))}
    path = [str(Path(sys.executable).parent),
            *(p for p in env.get("PATH", "").split(os.pathsep) if p and not (Path(p) / "helm").exists())]
    env.update(HOME=str(tmp_path / "home"), TMPDIR=str(tmp_path), PATH=os.pathsep.join(path))
    bucket = "nemo-rl-my-test-project"  # .env.example's GS_BUCKET is empty: nemo-rl-<PROJECT_ID>
    check = ("python3 - <<'PY'\nimport os, urllib.error, urllib.request\n"
             f"url = os.environ['STORAGE_EMULATOR_HOST'] + '/upload/storage/v1/b/{bucket}/o?uploadType=media"
             "&name=probe&ifGenerationMatch=0'\ncodes = []\nfor _ in range(2):\n    try:\n"
             "        codes.append(urllib.request.urlopen(urllib.request.Request(url, b'x', method='POST')).status)\n"
             "    except urllib.error.HTTPError as exc:\n        codes.append(exc.code)\n"
             "print('create-if-absent twice:', codes)\nPY\n")
    script = ("set -e\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + block.replace("9023", str(port))
              + check)
    shell = subprocess.Popen(["bash", "-c", script], cwd=checkout, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = shell.communicate(timeout=150)
    finally:  # the emulator too, should the block not end
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGTERM)
    assert shell.returncode == 0, output
    ends = re.findall(r"^done in [\d.]+ s: (.*)$", output, re.MULTILINE)
    assert len(ends) == 2 and "created" in ends[0] and re.fullmatch(r"\d+ exists", ends[1]), output
    assert re.search(r"^doctor: all \d+ checks passed", output, re.MULTILINE), output
    assert "create-if-absent twice: [200, 412]" in output, output
    assert "Traceback (most recent call last)" not in output

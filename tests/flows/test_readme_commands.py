"""Every `invoke` command the README shows in a code block runs: as a dry run (`--dry` added where the README does
not have it) through the real task code, in a directory with a valid .env. A flag renamed, a task removed or a
value that no longer validates makes this fail, so the README cannot drift from the command line.

What cannot run here is listed in SKIP with the reason; the test fails when a listed command is no longer in the
README (the list cannot go stale either)."""

from __future__ import annotations

import re
import shlex

import pytest

from support.fake import REPO, FakeCloud

README = REPO / "README.md"
# Commands that need something the reader makes first.
SKIP = {
    "invoke --dry job.submit my-job": "needs jobs/my-job.yaml, which the README's `cp` line makes",
}
_ENV = re.compile(r"^[A-Z_][A-Z0-9_]*=\S*$")


def readme_commands() -> list[str]:
    """The `invoke …` commands of the README's code blocks, one per `&&` part, comments dropped."""
    commands: list[str] = []
    fence: str | None = None  # the language of the open code block, "" for none
    for line in README.read_text().splitlines():
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

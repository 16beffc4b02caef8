"""The runner's settings from the Invoke config (invoke.yaml beside tasks.py, ~/.invoke.yaml, -f FILE): a value
that is not one stops every task with exit 2, naming the key and the fix, before any call, through the real
`invoke -f FILE`."""

from __future__ import annotations

import pytest
import yaml as pyyaml


def _config(fake, line: str):
    section = {"poll_seconds": 0, "backoff_seconds": 0, **pyyaml.safe_load(line)}
    path = fake.root / "my-invoke.yaml"
    path.write_text(pyyaml.safe_dump({"runner": section}))
    return str(path)


@pytest.mark.parametrize(("yaml", "key"), [
    ("attempts: 0", "runner.attempts"),  # ran no command: a traceback at the first one
    ("attempts: '3'", "runner.attempts"), ("attempts: true", "runner.attempts"), ("attempts: 99", "runner.attempts"),
    ("poll_seconds: fast", "runner.poll_seconds"),  # a traceback at the first wait
    ("poll_seconds: -1", "runner.poll_seconds"), ("backoff_seconds: .nan", "runner.backoff_seconds"),
    ("backoff_seconds: .inf", "runner.backoff_seconds"), ("retries: 3", "runner.retries"),
])
def test_a_runner_setting_that_is_not_one_stops_up_before_any_call(fake, yaml, key):
    done = fake.invoke("-f", _config(fake, yaml), "up", "--yes", process=True)
    assert done.code == 2 and f"{key}=" in done.stderr and "is not valid" in done.stderr, done.output[-2000:]
    assert "Traceback" not in done.output and fake.calls() == []


def test_the_runner_settings_the_readme_shows_run_up(fake):
    done = fake.invoke("-f", _config(fake, "{poll_seconds: 0.01, attempts: 5}"), "up", "--yes", process=True)
    assert done.code == 0, done.output[-2000:]

from __future__ import annotations

import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest


def real_gcloud_or_skip() -> str:
    """The real gcloud on PATH (not the fake cloud's): a CI machine must have it, elsewhere the test skips."""
    binary = shutil.which("gcloud")
    if binary is None or "fakecloud" in binary:
        if os.environ.get("CI"):
            pytest.fail("the real gcloud must be installed on the CI machine")
        pytest.skip("needs the real Google Cloud CLI on PATH")
    return binary


@pytest.fixture(scope="module")
def real_gcloud(tmp_path_factory) -> tuple[str, dict[str, str]]:
    """The real gcloud and an environment with a throwaway configuration of its own."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("CLOUDSDK_")}
    return real_gcloud_or_skip(), {**env, "CLOUDSDK_CONFIG": str(tmp_path_factory.mktemp("gcloud-config")),
                                   "CLOUDSDK_CORE_DISABLE_PROMPTS": "1"}


@pytest.fixture(scope="session")
def gcloud_parse(tmp_path_factory):
    """Run argv lists through the real gcloud with a throwaway config; return {command: (exit code, stderr)}.

    gcloud parses flags before it needs credentials: exit 2 means our flags are wrong, exit 1 (no account) is
    what a well-formed command gets here."""
    binary = real_gcloud_or_skip()
    env = {**os.environ, "CLOUDSDK_CONFIG": str(tmp_path_factory.mktemp("gcloud-config")),
           "CLOUDSDK_CORE_DISABLE_PROMPTS": "1"}

    def one(argv: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[int, str]]:
        proc = subprocess.run([binary, *argv[1:]], env=env, capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)
        return argv, (proc.returncode, proc.stderr)

    def parse(commands: list[list[str]]) -> dict[tuple[str, ...], tuple[int, str]]:
        unique = sorted({tuple(c) for c in commands})
        with ThreadPoolExecutor(max_workers=4) as pool:
            return dict(pool.map(one, unique))

    return parse

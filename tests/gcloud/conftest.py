from __future__ import annotations

import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest


@pytest.fixture(scope="session")
def gcloud_parse(tmp_path_factory):
    """Run argv lists through the real gcloud with a throwaway config; return {command: (exit code, stderr)}.

    gcloud parses flags before it needs credentials: exit 2 means our flags are wrong, exit 1 (no account) is
    what a well-formed command gets here."""
    binary = shutil.which("gcloud")
    if binary is None or "fakecloud" in binary:
        if os.environ.get("CI"):
            pytest.fail("the real gcloud must be installed on the CI machine")
        pytest.skip("needs the real Google Cloud CLI on PATH")
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

from __future__ import annotations

import pytest

from support.fake import FakeCloud


@pytest.fixture
def fake(tmp_path) -> FakeCloud:
    """A fake cloud with a valid .env (planted secrets) in a fresh working directory."""
    cloud = FakeCloud(tmp_path)
    cloud.write_env()
    return cloud

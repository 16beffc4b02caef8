from support.gcs_emulator import gcs_emulator  # noqa: F401 - the fixture

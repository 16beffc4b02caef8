"""Handler modules: every module here is imported by fakecloud.main and registers commands."""

"""gcloud projects describe (the project number for Workload Identity principals) and --version."""

from __future__ import annotations

import zlib

from ..core import Ctx, command


def project_number(project: str) -> str:
    return str(100000000000 + zlib.crc32(project.encode()) % 900000000000)


@command("gcloud", "projects", "describe", latency=1)
def projects_describe(ctx: Ctx) -> None:
    project = ctx.positionals[0] if ctx.positionals else ctx.project
    ctx.work()
    ctx.emit({"projectId": project, "projectNumber": project_number(project), "lifecycleState": "ACTIVE"})


@command("gcloud")
def gcloud_root(ctx: Ctx) -> int:
    if ctx.flag("--version"):
        ctx.out("Google Cloud SDK 528.0.0 (fakecloud)")
        return 0
    ctx.err(f"ERROR: (gcloud) fakecloud has no handler for: gcloud {' '.join(ctx.argv)}")
    return 2

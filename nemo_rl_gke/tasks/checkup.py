"""`doctor`: the read-only checks of tools, account, project, APIs, GPU quota and reservation."""

from __future__ import annotations

from typing import Any

from invoke import Exit

from . import context


@context.task
def doctor(c):
    """Check tools, account, project, APIs, GPU quota and reservation; each ✓/✗ with the fix."""
    from ..commands import doctor as checks

    s = context.settings(c)
    r = context.runner(c, s)
    if r.dry:
        r.say("# doctor asks (read-only):")
        for argv in checks.queries(s):
            r.say("#   " + " ".join(argv))
        return
    results = run_checks(r, s)
    for check in results:
        for line in check.lines():
            print(line)
    failed = [check for check in results if not check.ok]
    if failed:
        raise Exit(f"doctor: {len(failed)} of {len(results)} checks failed; fix them before `invoke up`.",
                   code=1)
    print(f"doctor: all {len(results)} checks passed.")


def run_checks(r: Any, s: Any) -> list[Any]:
    """Run doctor's read-only queries in parallel and turn each answer into a Check."""
    from ..commands import doctor as checks
    from ..runner import INSTALL_HINTS, MissingTool

    def tool(name: str, argv: list[str], parse: Any) -> Any:
        try:
            result = r.query(argv)
        except MissingTool:
            return checks.missing_tool(name, INSTALL_HINTS.get(name, f"install {name}"))
        if not result.ok:
            return checks.Check(name, False, (result.stderr.strip().splitlines() or ["failed"])[-1],
                                INSTALL_HINTS.get(name, ""))
        return parse(result.stdout)

    def answer(argv: list[str]) -> Any:
        try:
            return r.query(argv, ok_codes=range(256))
        except MissingTool:
            return None

    def cloud(name: str, argv: list[str], parse: Any) -> Any:
        result = answer(argv)
        if result is None:
            return checks.Check(name, False, "gcloud is missing", INSTALL_HINTS["gcloud"])
        return parse(result)

    thunks = [
        lambda: tool("gcloud", checks.gcloud_version(), checks.check_gcloud),
        lambda: tool("kubectl", checks.kubectl_version(), checks.check_kubectl),
        lambda: tool("helm", checks.helm_version(), checks.check_helm),
        lambda: tool("gke-gcloud-auth-plugin", checks.auth_plugin_version(), checks.check_auth_plugin),
        lambda: cloud("account", checks.active_account(), lambda res: checks.check_account(res.stdout)),
        lambda: cloud("project", checks.project_describe(s),
                      lambda res: checks.check_project(s, res.exit_code, res.stdout, res.stderr)),
        lambda: cloud("APIs", checks.enabled_services(s), lambda res: checks.check_apis(s, res.stdout)),
    ]
    if s.RESERVATION:
        thunks.append(lambda: cloud(f"reservation {s.RESERVATION}", checks.reservation_describe(s),
                                    lambda res: checks.check_reservation(s, res.exit_code, res.stdout,
                                                                         res.stderr)))
    else:
        def quota(res: Any) -> Any:
            if res.ok:
                return checks.check_quota(s, res.stdout)
            return checks.Check(f"GPU quota ({s.region})", False,
                                (res.stderr.strip().splitlines() or ["cannot read quotas"])[-1],
                                "check the project and region, and that compute.googleapis.com is enabled")

        thunks.append(lambda: cloud(f"GPU quota ({s.region})", checks.region_quotas(s), quota))
    return r.parallel(thunks)

"""`ray`: the Ray cluster, as our Helm release of manifests/ray-cluster (one RayCluster: a head on the CPU
pool, GPU_NODES workers with 8 GPUs and nine extra NICs each: gVNIC + 8 RDMA).

`ray.deploy` is idempotent (`helm upgrade --install` with values computed from your settings, on stdin),
waits for the head and every worker to be Ready, then asks Ray how many GPUs it sees and explains any
shortfall. `ray.render` shows the same manifests offline, without a cluster.

Examples:
    invoke --dry ray.deploy                 # prints the helm upgrade --install; runs nothing
    invoke ray.deploy --nodes=4             # 4 GPU workers (32 GPUs)
    GPU_TYPE=h200 invoke ray.render         # the RayCluster for H200 (a3u tuner file, H200 selector)
    invoke ray.render --values              # just the Helm values from your settings
    invoke ray.status                       # pods and Ray's own count of nodes and GPUs
    invoke ray.dashboard                    # http://localhost:8265 until Ctrl-C
    invoke ray.delete --yes
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from invoke.collection import Collection
from invoke.context import Context

from ..settings import Settings
from . import context

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..runner import Runner

SIZE_HELP = {
    "nodes": "GPU workers (one per 8-GPU node); overrides GPU_NODES.",
    "head_cpu": "CPU of the Ray head (default 12; at most 15 on Standard's n2-highmem-16 pool).",
    "head_memory": "Memory of the Ray head in GiB (default 96 on Standard, 78 on Autopilot).",
}


def _settings(c: Context, nodes: int | None = None, offline: bool = False) -> Settings:
    return context.settings(c, offline=offline, GPU_NODES=nodes)


def _head(head_cpu: int | None, head_memory: int | None) -> dict[str, int | None]:
    from ..settings import _int

    return {"head_cpu": None if head_cpu is None else _int("--head-cpu", head_cpu),
            "head_memory_gi": None if head_memory is None else _int("--head-memory", head_memory)}


def _non_negative(flag: str, value: Any) -> int:
    from ..settings import ConfigError, _int

    number = _int(flag, value)
    if number < 0:
        raise ConfigError(flag, value, "give a number of seconds, 0 or more.")
    return number


def _port(flag: str, value: Any) -> int:
    from ..settings import ConfigError, _int

    number = _int(flag, value)
    if not 1 <= number <= 65535:
        raise ConfigError(flag, value, "give a TCP port between 1 and 65535.")
    return number


def _free(flag: str, port: int, other: int | None = None) -> None:
    """The local port must be free where kubectl listens, 127.0.0.1 and ::1 (bound the way Go binds, SO_REUSEADDR,
    so a port in TIME_WAIT is free; an address this machine lacks is skipped): exit 2 now, naming the flag,
    instead of kubectl's "unable to listen", or a browser's `localhost` reaching another program on ::1."""
    from ..settings import ConfigError

    refused = _refusal(port)
    if refused is None:
        return
    other_ports = {port, other}
    free = next((p for p in (port + 1, 8266, 8267, 18265, 18266) if 1024 <= p <= 65535 and p not in other_ports
                 and _refusal(p) is None), None)
    example = f": choose another, e.g. {flag}={free}." if free else ": choose another free port above 1023."
    raise ConfigError(flag, port, f"port {port} {refused}{example}")


def _refusal(port: int) -> str | None:
    """Why kubectl could not listen on port on this machine's loopback addresses (None: it could)."""
    import errno
    import socket

    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        try:
            probe = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            continue  # no IPv6 (or IPv4) on this machine: kubectl skips it too
        try:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
                continue
            return ("needs root here (ports below 1024)" if exc.errno == errno.EACCES
                    else f"is taken on {host} ({exc.strerror or exc})")
        finally:
            probe.close()
    return None


def _credentials(r: Runner, s: Settings) -> None:
    from ..resources import cluster_steps as cluster

    for step in cluster.steps(s):
        if step.name == cluster.CREDENTIALS:
            step.create(r)


def _refuse_another_cluster(r: Runner, s: Settings) -> dict[str, Any] | None:
    """Ray's pods select nodes by the settings' mode and GPU type: on a cluster of another mode or a pool of
    another GPU, or one lacking what our steps need, no pod would ever start. Refused before any change.
    Returns the GPU pool as described (None: no pool, Autopilot, or a dry run), for preflight's size check."""
    if r.dry:
        return None
    from ..resources import cluster_features
    from ..resources.cluster_steps import CLUSTER, GPU_POOL
    from . import drift

    present: dict[str, bool | None] = {CLUSTER: True, GPU_POOL: not s.autopilot}
    bodies = drift.bodies_of(r, s, present)
    found = drift.found_in(r, s, bodies, present, sizes=False)
    drift.refuse_on(s, found, what="ray.deploy", fields=("mode", "gpu", "feature"))
    cluster_features.say_note(r, s, found.cluster_off)
    pool = bodies.get(GPU_POOL)
    return pool if isinstance(pool, dict) else None


@context.task(help={**SIZE_HELP, "timeout": "Seconds to wait for every Ray pod to be Ready (default 1800).",
                    "yes": "Restart Ray's pods without asking when their spec changed while runs are running "
                           "(they stop; needed without a terminal).",
                    "force_unlock": context.UNLOCK_HELP})
def deploy(c: Context, nodes: int | None = None, head_cpu: int | None = None, head_memory: int | None = None,
           timeout: int | None = None, yes: bool = False, force_unlock: bool = False) -> None:
    """Install or upgrade the Ray cluster (restarting pods whose spec changed), wait for every pod, check the GPUs."""
    from ..raychart import values
    from ..resources import ray_steps

    s = _settings(c, nodes)
    head = _head(head_cpu, head_memory)
    values(s, **head)  # bad head sizes fail here, before any command runs
    wait = ray_steps.READY_TIMEOUT_SECONDS if timeout is None else _non_negative("--timeout", timeout)
    r = context.runner(c, s)

    def restart(stale: list[ray_steps.PodState], workers: int) -> None:
        """Before any change: say why Ray restarts (pods of another spec) or shrinks (fewer GPU workers than run
        now), and ask first when that stops runs (--yes answers)."""
        from ..resources import data_guard

        listing = data_guard.lustre_runs(r, s)
        running = sorted(listing[1]) if listing is not None else []
        whys = [f"{len(stale)} of Ray's pods were started from another spec than this one (image, resources, chart "
                f"or the Secret's values) and KubeRay does not restart running pods: after the upgrade, ray.deploy "
                f"deletes them and KubeRay starts them again from the new spec"] if stale else []
        if workers > s.GPU_NODES:
            whys.append(f"the Ray cluster goes from {workers} to {s.GPU_NODES} GPU worker(s): KubeRay deletes "
                        f"{workers - s.GPU_NODES} worker pod(s)")
        why = "; ".join(whys)
        if running:
            context.confirm(c, f"{why}. That stops the running run(s) {', '.join(running)}; each resumes from its "
                               f"latest checkpoint with `invoke job.submit JOB --id=ID`. Go on?", yes=yes)
        r.say(f"{why}.", err=True)

    with context.deployment_locked(c, s, "ray.deploy", force=force_unlock):
        # The kubeconfig entry and the describes of the cluster and the pool at once (none needs the other).
        _, pool = r.parallel([lambda: _credentials(r, s), lambda: _refuse_another_cluster(r, s)])
        # A pool too small, or no Secret/claim: refused now, not after the timeout.
        ray_steps.preflight(r, s, pool=pool)
        ray_steps.deploy(r, s, timeout=wait, restart=restart, **head)


@context.task(help={**SIZE_HELP, "values": "Print the generated Helm values instead of the manifests."})
def render(c: Context, nodes: int | None = None, head_cpu: int | None = None, head_memory: int | None = None,
           values: bool = False) -> None:
    """Print the manifests ray.deploy would install (helm template, offline; --dry prints the command)."""
    from .. import raychart
    from ..commands import helm

    s = _settings(c, nodes, offline=True)
    text = raychart.values_yaml(s, **_head(head_cpu, head_memory))
    r = context.runner(c, s)
    if values:
        r.say(text.rstrip("\n"))
        return
    argv = helm.template(s, helm.chart_path(raychart.CHART_DIR))
    # A local, offline command; still, --dry runs nothing external, so it prints the command instead.
    result = r.run(argv, stdin=text, echo=False, retry=False,
                   stdin_label=f"Helm values from settings ({len(text.splitlines())} lines)")
    if not r.dry:
        r.say(result.stdout.rstrip("\n"))


@context.task
def status(c: Context) -> None:
    """Show the Helm release, the Ray pods (and why any is not Ready), and Ray's count of nodes and GPUs."""
    from .. import names, raychart
    from ..commands import helm
    from ..resources import kube_context, ray_steps

    s = context.settings(c)
    r = context.runner(c, s)
    if r.dry:
        context.dry_read(r, "ray.status", "shows the Helm release, the Ray pods and the GPUs Ray sees",
                         [helm.status(s), ray_steps.pods_argv(s)])
        return
    # The release and the pods at once; a context that outlived its cluster: seconds, not minutes of dialing.
    with kube_context.watch(r, s):
        reads: list[Callable[[], Any]] = [lambda: r.exists(helm.status(s)), lambda: ray_steps.query_pods(r, s)]
        deployed, states = r.parallel(reads)
    if not deployed:
        r.say(f"Ray cluster {names.RAY_RELEASE} is not deployed in {s.NAMESPACE} (run `invoke ray.deploy`).")
        return
    rows = [(p.name, p.node_type, "Ready" if p.ready else "not Ready", p.why) for p in states]
    context.print_table(f"Ray cluster {names.RAY_RELEASE} ({ray_steps.progress_line(states, s.GPU_NODES)})",
                        ("pod", "type", "state", "why"), rows)
    gpus = ray_steps.query_gpus(r, s, states)
    wanted = raychart.expected_gpus(s)
    if gpus is None:
        r.say("Ray: no Ready head to ask.")
    else:
        mark = "✓" if gpus >= wanted else "✗"
        r.say(f"{mark} Ray sees {gpus:g} of {wanted} GPUs (GPU_NODES={s.GPU_NODES} × {s.gpu.gpus_per_node}).")


@context.task(help={"port": "Local port for the dashboard (default 8265).",
                    "client": "Also forward the Ray client port (ray://localhost:PORT, default 10001).",
                    "client_port": "Local port for the Ray client with --client (default 10001)."})
def dashboard(c: Context, port: int = 8265, client: bool = False, client_port: int = 10001) -> None:
    """Port-forward the Ray dashboard (and with --client the Ray client port) to localhost; Ctrl-C stops it."""
    from .. import raychart

    s = context.settings(c)
    port = _port("--port", port)
    forwarded = {port: raychart.DASHBOARD_PORT}
    if client:
        client_port = _port("--client-port", client_port)
        if client_port == port:
            from ..settings import ConfigError

            raise ConfigError("--client-port", client_port, "use a port other than the dashboard's --port.")
        forwarded[client_port] = raychart.CLIENT_PORT
    from ..resources import head_pod

    r = context.runner(c, s)
    if not r.dry:
        _free("--port", port, client_port if client else None)
        if client:
            _free("--client-port", client_port, port)
    # No Ray cluster, a head not Ready (Ray serves the dashboard), or a dead context: said now. kubectl would wait
    # a minute for a Running pod behind the Service, or dial a dead endpoint for 30 s.
    head_pod.ready_head(r, s, ray=True)
    r.say(f"Ray dashboard: http://localhost:{port}  (Ctrl-C to stop)", err=True)
    if client:
        r.say(f"Ray client: ray.init(\"ray://localhost:{client_port}\")", err=True)
    code = r.stream(raychart.port_forward_argv(s, forwarded))
    if code == 130:
        r.say("dashboard stopped.", err=True)
    elif code:
        from ..tools import ToolError

        raise ToolError(f"kubectl port-forward exited with code {code} (its words are above); `invoke ray.status` "
                        "shows the Ray cluster's pods.", code)


@context.task(help={"yes": context.YES_ONE_HELP,
                    "force_unlock": context.UNLOCK_HELP})
def delete(c: Context, yes: bool = False, force_unlock: bool = False) -> None:
    """Uninstall the Ray cluster (pods and RayCluster); running jobs stop, Lustre data and the cluster stay."""
    from .clean import clean_layer

    clean_layer(c, "ray", yes=yes, force_unlock=force_unlock, what="ray.delete")


ns = Collection("ray", deploy, render, status, dashboard, delete)


def _deployed(r: Runner, s: Settings, deployed: bool | None) -> bool:
    """Our release is installed: as the caller's listing found it (`status`), else helm is asked."""
    from ..commands import helm

    return not r.dry and (r.exists(helm.status(s)) if deployed is None else deployed)


def cluster_summary(r: Runner, s: Settings, deployed: bool | None = None) -> list[str]:
    """One line for the top-level `status`: the Ray pods' progress and the GPUs Ray sees."""
    from .. import names, raychart
    from ..resources import ray_steps

    if not _deployed(r, s, deployed):
        return [f"Ray cluster {names.RAY_RELEASE}: not deployed (run `invoke ray.deploy`)"]
    states = ray_steps.query_pods(r, s)
    gpus = ray_steps.query_gpus(r, s, states)
    seen = "no Ready head to ask" if gpus is None else f"Ray sees {gpus:g} of {raychart.expected_gpus(s)} GPUs"
    return [f"Ray cluster {names.RAY_RELEASE}: {ray_steps.progress_line(states, s.GPU_NODES)}; {seen}"]


def cluster_state(r: Runner, s: Settings, deployed: bool | None = None) -> dict[str, Any]:
    """The Ray cluster for `status --json`: {deployed, pods, ready_pods, gpus_seen, gpus_expected}."""
    from .. import raychart
    from ..resources import ray_steps

    expected = raychart.expected_gpus(s)
    if not _deployed(r, s, deployed):
        return {"deployed": False, "pods": 0, "ready_pods": 0, "gpus_seen": None, "gpus_expected": expected}
    states = ray_steps.query_pods(r, s)
    return {"deployed": True, "pods": len(states), "ready_pods": sum(p.ready for p in states),
            "gpus_seen": ray_steps.query_gpus(r, s, states), "gpus_expected": expected}

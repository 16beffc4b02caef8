"""The Runner's process seam, tool lookup, Ctrl-C during waits, wait display, and redaction of streamed output."""

from __future__ import annotations

import io
import os
import signal
import stat
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from nemo_rl_gke import tools as tools_module
from nemo_rl_gke.runner import TRANSIENT, Interrupted, Runner
from nemo_rl_gke.settings import ConfigError
from nemo_rl_gke.tasks.cli import ReaderSafe
from nemo_rl_gke.tools import Ran, ToolError
from support.fake import press_ctrl_c, running

SECRET = "hf_STREAMEDsecret4242"


def write_tool(folder, name: str, body: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!{sys.executable}\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


@dataclass
class Scripted:
    """A seam that answers from a script of (exit code, stderr) and records what it was asked."""

    answers: list[tuple[int, str]]
    asked: list[tuple[list[str], str | None]] = field(default_factory=list)

    def run(self, argv, *, stdin, timeout):
        self.asked.append((argv, stdin))
        code, stderr = self.answers.pop(0) if self.answers else (0, "")
        return Ran(code, "out" if code == 0 else "", stderr)

    def stream(self, argv, *, stdin, out, err):
        out(f"token {SECRET} in a line\n")
        err(f"and {SECRET} on stderr\n")
        return 0

    def end(self, matches, why, *, launched_before):  # its answers come at once: never one running to end
        return 0


def quiet(**kw) -> tuple[Runner, io.StringIO, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    return Runner(out=out, err=err, **kw), out, err


# ---- the seam and tool lookup ------------------------------------------------------------------------
def test_runner_seam_gets_argv_as_strings_and_stdin():
    seam = Scripted([])
    r, _, _ = quiet(tools=seam)
    r.run(["kubectl", "apply", "--filename=-", 3], stdin="kind: X\n")
    assert seam.asked == [(["kubectl", "apply", "--filename=-", "3"], "kind: X\n")]


def test_runner_finds_helm_in_project_tools_when_not_on_path(tmp_path, monkeypatch):
    write_tool(tmp_path / "tools", "helm", "print('v3.17.3 from .tools/bin')")
    monkeypatch.setattr(tools_module, "PROJECT_TOOLS", tmp_path / "tools")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    r, _, _ = quiet()
    assert r.run(["helm", "version"], echo=False).stdout.strip() == "v3.17.3 from .tools/bin"


def test_runner_prefers_the_helm_on_path_over_project_tools(tmp_path, monkeypatch):
    write_tool(tmp_path / "tools", "helm", "print('project')")
    write_tool(tmp_path / "path", "helm", "print('path')")
    monkeypatch.setattr(tools_module, "PROJECT_TOOLS", tmp_path / "tools")
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    r, _, _ = quiet()
    assert r.run(["helm", "version"], echo=False).stdout.strip() == "path"


def test_processes_timeout_kills_the_command_and_answers_124(tmp_path):
    marker = tmp_path / "finished"
    ran = tools_module.Processes().run(["sh", "-c", f"sleep 5; touch {marker}"], stdin=None, timeout=0.3)
    time.sleep(0.2)
    assert (ran.exit_code, ran.stderr, marker.exists()) == (124, "timed out after 0 s", False)


def test_processes_return_code_output_and_stdin_of_a_command_with_a_timeout():
    ran = tools_module.Processes().run(["sh", "-c", "cat; echo err >&2; exit 3"], stdin="in", timeout=60)
    assert ran == Ran(3, "in", "err\n")


def test_background_commands_run_at_a_lower_cpu_priority_and_only_they():
    """A dozen gcloud start-ups at once share the CPU; the command a critical chain waits for must not get a
    dozenth of it. The command reads its own priority after a pause (ours is set just after its start)."""
    own = [sys.executable, "-c", "import os, time; time.sleep(0.3); print(os.getpriority(os.PRIO_PROCESS, 0))"]
    base = os.getpriority(os.PRIO_PROCESS, 0)
    seam = tools_module.Processes()
    with tools_module.background():
        low = seam.run(own, stdin=None, timeout=60).stdout.strip()
        with tools_module.background(False):
            inner = seam.run(own, stdin=None, timeout=60).stdout.strip()
    after = seam.run(own, stdin=None, timeout=60).stdout.strip()
    assert (low, inner, after) == (str(min(19, base + tools_module.BACKGROUND_NICE)), str(base), str(base))


def test_parallel_calls_run_at_the_priority_of_the_thread_that_asks():
    """The priority is the asking thread's; a round of calls in parallel (the inventory's lists) asked from the
    background runs there too, and one asked from the foreground in front, as the same calls one by one would."""
    own = [sys.executable, "-c", "import os, time; time.sleep(0.3); print(os.getpriority(os.PRIO_PROCESS, 0))"]
    base = os.getpriority(os.PRIO_PROCESS, 0)
    r = Runner()

    def round_of_two() -> list[str]:
        return [found.stdout.strip() for found in r.parallel([lambda: r.query(own), lambda: r.query(own)])]

    with tools_module.background():
        low = round_of_two()
    assert (low, round_of_two()) == ([str(min(19, base + tools_module.BACKGROUND_NICE))] * 2, [str(base)] * 2)


def test_processes_never_hand_sh_its_timeout(monkeypatch):
    """sh's `_timeout` (and `.wait(timeout)`) notice a process's end only at their next 0.1 s tick: each command
    on the critical path took up to 0.1 s longer than it ran (seen as 0.1 s gaps in calls.jsonl). Our timer
    kills it instead (test above)."""
    import sh

    seen: list[dict[str, object]] = []
    real = sh.Command.__call__

    def recording(self, *args, **kwargs):
        seen.append(kwargs)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(sh.Command, "__call__", recording)
    assert tools_module.Processes().run(["true"], stdin=None, timeout=60).exit_code == 0
    assert len(seen) == 1 and "_timeout" not in seen[0]


def test_runner_options_take_known_keys_and_refuse_others():
    assert Runner.options({"poll_seconds": 0, "backoff_seconds": 1}) == {"poll_seconds": 0, "backoff_seconds": 1}
    assert Runner.options(None) == {}
    with pytest.raises(ConfigError, match="poll_secs"):
        Runner.options({"poll_secs": 0})


# ---- retries: each transient shape the fake cloud injects, and a permanent one -------------------------
REAL_TRANSIENT_ERRORS = {
    "gce rate limit": "ERROR: (gcloud.compute.networks.create) Could not fetch resource:\n - Quota exceeded for "
                      "quota metric 'Queries' and limit 'Queries per minute' of service 'compute.googleapis.com'",
    "gke 429": "ERROR: (gcloud.container.node-pools.create) ResponseError: code=429, message=Too many operations",
    "gke operation in progress": "ERROR: (gcloud.container.node-pools.create) ResponseError: code=400, "
                                 "message=Operation operation-1 is currently upgrading cluster c. Please wait and "
                                 "try again once it is done.",
    "gce resource not ready": "ERROR: (gcloud.compute.networks.subnets.create) Could not fetch resource:\n - The "
                              "resource 'projects/p/global/networks/n' is not ready",
    "k8s conflict": "Error from server (Conflict): Operation cannot be fulfilled on pods \"x\": the object has been "
                    "modified; please apply your changes to the latest version and try again",
    "k8s 429": "Error from server (TooManyRequests): the server has received too many requests and has asked us to "
               "try again later",
    "helm busy": "Error: UPGRADE FAILED: another operation (install/upgrade/rollback) is in progress",
    # client-go's words for an API server's 500 and 504 (apimachinery's NewGenericServerResponse), and etcd's:
    "k8s 500": 'Error from server (InternalError): an error on the server ("<html>upstream error</html>") has '
               "prevented the request from succeeding (get pods)",
    "k8s 504": "Error from server (Timeout): the server was unable to return a response in the time allotted, but "
               "may still be processing the request (get pods)",
    "helm 500": 'Error: uninstall: Release not loaded: nemo-rl: query: failed to query with labels: an error on the '
                'server ("") has prevented the request from succeeding (get secrets)',
    "etcd timeout": "Error from server: etcdserver: request timed out",
    "etcd leader": "Error from server: etcdserver: leader changed",
    # gcloud 528's words for a 503 and a 500, by API (the real gcloud answering a local server):
    "compute 503": "ERROR: (gcloud.compute.networks.create) Could not fetch resource:\n - The service is currently "
                   "unavailable.",
    "compute 500": "ERROR: (gcloud.compute.networks.create) Could not fetch resource:\n - Internal error. Please try "
                   "again or contact Google Support. (Code: '5C2B1A0E')",
    "apitools 503": "ERROR: (gcloud.lustre.instances.create) HttpError accessing <https://lustre.googleapis.com/v1/"
                    "projects/p/locations/l/instances?alt=json>: response: <{'status': '503', 'content-type': "
                    "'application/json; charset=UTF-8'}>, content <{ \"error\": { \"code\": 503 } }>",
    "gke 503": "ERROR: (gcloud.container.clusters.create) ResponseError: code=503, message=The service is "
               "currently unavailable.",
}
REAL_PERMANENT_ERRORS = {
    "bad flag": "ERROR: (gcloud.container.clusters.create) INVALID_ARGUMENT: unrecognized arguments: --bogus",
    "resource quota": "ERROR: (gcloud.compute.instances.create) Quota 'NVIDIA_B200_GPUS' exceeded. Limit: 0.0 in "
                      "region us-central1.",
    "forbidden": "Error from server (Forbidden): pods is forbidden: User cannot list resource",
    "not found": "ERROR: (gcloud.lustre.instances.describe) NOT_FOUND: Resource not found",
}


@pytest.mark.parametrize(("stderr", "gone"), [
    ("ERROR: (gcloud.container.clusters.delete) ResponseError: code=404, message=Not found: cluster c.", True),
    ("ERROR: (gcloud.lustre.instances.delete) HttpError accessing <https://x>: response: <{'status': '404'}>", True),
    ("ERROR: (gcloud.lustre.instances.delete) HttpError accessing <https://x>: response: <{'status': 404}>", True),
    ("ERROR: (gcloud.container.clusters.delete) ResponseError: code=400, message=Operation "
     "operation-1733404912345-9d1 is currently upgrading cluster c. Please wait and try again once it is done.", False),
    ("ERROR: (gcloud.services.vpc-peerings.delete) The operation \"operations/pssn.p24-123404567-abc\" resulted in a "
     "failure \"Failed to delete connection\"", False),
])
def test_not_found_is_404_as_a_word_never_digits_of_an_operation_or_project_number(stderr, gone):
    from nemo_rl_gke.runner import Result

    assert Result([], 1, "", stderr).not_found is gone


# A tool that could not ask, in the words real tools gave (gcloud 528 offline, or answering a local server, with
# the user's setting named): none is an answer that the object does not exist.
COULD_NOT_ASK = {
    "credential file gone (auth/credential_file_override)": (1, (
        "ERROR: (gcloud.container.clusters.describe) Failed to load credential file: [/nonexistent/cred.json].  "
        "File /nonexistent/cred.json was not found.")),
    "stale CLOUDSDK_PYTHON (dash)": (127, "/usr/bin/gcloud: 199: exec: /nonexistent/python3: not found"),
    "endpoint that is no API (api_endpoint_overrides)": (1, (
        "ERROR: (gcloud.compute.networks.describe) Could not fetch resource:\n - <!DOCTYPE html>\n<html lang=en>\n"
        "  <title>Error 404 (Not Found)!!1</title>\n  <p>The requested URL <code>/compute/v1/projects/p/global/"
        "networks/x</code> was not found on this server.  <ins>That's all we know.</ins>")),
    "GKE's 404 page": (1, "ERROR: (gcloud.container.clusters.describe) ResponseError: code=404, message=<html>"),
    "a 403 naming a project with 404 in it": (1, (
        "ERROR: (gcloud.compute.networks.describe) Could not fetch resource:\n - Required 'compute.networks.get' "
        "permission for 'projects/ml-404-prod/global/networks/default'")),
    "a 403 with a token file under keys-404 (auth/access_token_file)": (1, (
        "ERROR: (gcloud.container.clusters.describe) ResponseError: code=403, message=Permission "
        "'container.clusters.get' denied on resource. This command is authenticated as an access token in "
        "/home/u/keys-404/tok which is specified by the [auth/access_token_file] property.")),
    "gcloud crashed (an unusable CLOUDSDK_CONFIG)": (1, (
        "ERROR: gcloud crashed (FileNotFoundError): [Errno 2] No such file or directory: '/gone/config'")),
    "a command ended by a signal": (143, "stopped: the pods are not found on this node any more"),
    "a deleted service-account key": (1, (
        "ERROR: (gcloud.container.clusters.describe) There was a problem refreshing your current auth tokens: "
        "('invalid_grant: Invalid grant: account not found', {'error': 'invalid_grant', 'error_description': "
        "'Invalid grant: account not found'})")),
    "impersonating a service account that is gone, the older path (auth/disable_load_google_auth)": (1, (
        "ERROR: (gcloud.compute.networks.describe) NOT_FOUND: Not found; Gaia id not found for email "
        "sa@p.iam.gserviceaccount.com")),
    "a token refresh that needs reauthentication": (1, (
        "ERROR: (gcloud.compute.networks.describe) There was a problem reauthenticating while refreshing your "
        "current auth tokens: account not found")),
    "impersonating a service account that is gone (auth/impersonate_service_account)": (1, (
        "ERROR: (gcloud.compute.networks.describe) NOT_FOUND: Failed to impersonate [sa@p.iam.gserviceaccount.com]. "
        "Make sure the account that's trying to impersonate it has access to the service account itself and the "
        "\"roles/iam.serviceAccountTokenCreator\" role. Not found; Gaia id not found for email "
        "sa@p.iam.gserviceaccount.com")),
}


@pytest.mark.parametrize("case", sorted(COULD_NOT_ASK))
def test_a_tool_that_could_not_ask_never_says_the_object_is_gone(case):
    from nemo_rl_gke.runner import NOT_FOUND, Result, failed_not_found

    code, stderr = COULD_NOT_ASK[case]
    assert not Result(["gcloud"], code, "", stderr).not_found
    seam = Scripted([(code, stderr)])
    r, _, _ = quiet(tools=seam, backoff_seconds=0)
    with pytest.raises(ToolError) as raised:  # a delete that takes "not found" for done does not take this
        r.run(["gcloud", "compute", "networks", "delete", "x", "--project=ml-404-prod"], accept=NOT_FOUND)
    assert not failed_not_found(raised.value)


@pytest.mark.parametrize("message", [
    "Operation operation-1 is currently creating cluster c. Please wait and try again once it is done.",
    # A pool's delete while a pool's create or delete runs (hashicorp/terraform-provider-google#10366 quotes it);
    # "a node pool for cluster" used to read as a transient error: five tries, then `down` failed.
    "Operation operation-1 is currently creating a node pool for cluster c. Please wait and try again once it is "
    "done.",
    "Operation operation-1 is currently deleting a node pool for cluster c. Please wait and try again once it is "
    "done.",
    "Cluster is running incompatible operation operation-1.",
])
def test_gkes_refusals_while_it_works_on_the_cluster_read_as_busy(message):
    from nemo_rl_gke.resources.cluster_steps import CLUSTER_BUSY, GONE_OR_BUSY

    stderr = f"ERROR: (gcloud.container.node-pools.delete) ResponseError: code=400, message={message}"
    assert CLUSTER_BUSY.search(stderr) and GONE_OR_BUSY.search(stderr)


def test_a_gke_delete_waiting_on_busy_answers_takes_googles_html_502_page_for_not_yet():
    # Its wait accepts "not found" (done), busy and transient answers (not yet); a veto meant for a "not found"
    # that is no answer stopped `down` on one 502 page from Google's front end.
    from nemo_rl_gke.resources.cluster_steps import _delete_when_free

    busy = ("ERROR: (gcloud.container.clusters.delete) ResponseError: code=400, message=Operation operation-1 is "
            "currently creating cluster c. Please wait and try again once it is done.")
    page = ("ERROR: (gcloud.container.clusters.delete) ResponseError: code=502, message=<!DOCTYPE html>\n<html "
            "lang=en>\n  <title>Error 502 (Server Error)!!1</title>\n  <p>The server encountered a temporary error "
            "and could not complete your request.<p>Please try again in 30 seconds.")
    seam = Scripted([(1, busy)] * 5 + [(1, page), (0, "")])  # the runner's 5 tries, then the wait's polls
    r, _, _ = quiet(tools=seam, backoff_seconds=0, poll_seconds=0)
    r.sleep = lambda _seconds: None
    _delete_when_free("cluster c", ["gcloud", "container", "clusters", "delete", "c"])(r)
    assert len(seam.asked) == 7


def test_a_failure_is_read_by_the_tools_words_never_by_our_argv():
    from nemo_rl_gke.runner import NOT_FOUND, failed_not_found

    seam = Scripted([(1, "ERROR: (gcloud.compute.networks.describe) Permission denied"),
                     (1, "ERROR: (gcloud.compute.networks.describe) The resource 'projects/p/global/networks/x' "
                         "was not found")])
    r, _, _ = quiet(tools=seam, backoff_seconds=0)
    for gone in (False, True):
        with pytest.raises(ToolError) as raised:
            r.run(["gcloud", "compute", "networks", "describe", "not-found-404", "--project=p"])
        assert "not-found-404" in str(raised.value) and failed_not_found(raised.value) is gone
    assert NOT_FOUND.search("Error from server (NotFound): pods \"x\" not found")


@pytest.mark.parametrize("stderr", [
    "error: context was not found for specified context: gke_p_us-central1_c",
    'Error: Kubernetes cluster unreachable: context "gke_p_us-central1_c" does not exist',
    'error: context "gke_p_us-central1_c" does not exist',  # kubectl apply, exec and wait say it so
])
def test_a_missing_kube_context_failure_says_how_to_fetch_it(stderr):
    seam = Scripted([(1, stderr)])
    r, _, _ = quiet(tools=seam, backoff_seconds=0)
    with pytest.raises(ToolError, match="`invoke cluster.credentials` fetches it"):
        r.run(["kubectl", "get", "pods"])


@pytest.mark.parametrize(("stderr", "done"), [
    ("Error: uninstall: Release not loaded: nemo-rl: release: not found", True),  # gone meanwhile: what we want
    ('Error: uninstall: Release not loaded: nemo-rl: secrets is forbidden: User "u" cannot list resource '
     '"secrets" in API group "" in the namespace "default"', False),  # not read: not gone
    ('Error: Kubernetes cluster unreachable: context "gke_p_us-central1_c" does not exist', False),
])
def test_the_ray_uninstall_counts_only_helms_release_not_found_as_done(stderr, done):
    from nemo_rl_gke.resources import ray_steps
    from support.fake import example_settings

    r, _, _ = quiet(tools=Scripted([(1, stderr)]), backoff_seconds=0)
    try:
        ray_steps.uninstall(r, example_settings())
    except ToolError:
        assert not done
    else:
        assert done


def test_other_deployments_unknown_from_a_partial_cluster_list_that_is_not_even_json():
    # Its JSON used to be parsed first: output that was not JSON read as "no other deployment", whatever the
    # warning said, and a teardown went on to delete what deployments share.
    from nemo_rl_gke.resources import cluster_steps
    from support.fake import example_settings

    warned = "WARNING: The following zones did not respond: us-central1. List results may be incomplete."
    r, _, _ = quiet(tools=Scripted([(0, warned)]), backoff_seconds=0)  # Scripted's stdout: "out", not JSON
    with pytest.raises(ToolError, match="without some locations"):
        cluster_steps.other_deployments(r, example_settings())


def test_a_gcloud_list_that_exit_0_after_a_failed_request_is_not_complete():
    from nemo_rl_gke.runner import Result

    warned = "WARNING: Some requests did not succeed.\n - The service is currently unavailable.\n"
    assert (Result([], 0, "[]", warned).complete, Result([], 0, "[]", "").complete) == (False, True)
    # `container clusters list` when GKE's answer lacks a location (lib/surface/container/clusters/list.py)
    partial = "WARNING: The following zones did not respond: us-central1. List results may be incomplete.\n"
    assert Result([], 0, "[]", partial).complete is False


@pytest.mark.parametrize("stderr", list(REAL_TRANSIENT_ERRORS.values()), ids=list(REAL_TRANSIENT_ERRORS))
def test_runner_retries_each_transient_error_shape(stderr):
    seam = Scripted([(1, stderr), (0, "")])
    r, _, err = quiet(tools=seam, backoff_seconds=0)
    assert (r.run(["gcloud", "x"]).attempts, len(seam.asked), "transient error" in err.getvalue()) == (2, 2, True)


@pytest.mark.parametrize("stderr", list(REAL_PERMANENT_ERRORS.values()), ids=list(REAL_PERMANENT_ERRORS))
def test_runner_fails_at_once_on_a_permanent_error(stderr):
    seam = Scripted([(1, stderr), (0, "")])
    r, _, _ = quiet(tools=seam, backoff_seconds=0)
    with pytest.raises(ToolError):
        r.run(["gcloud", "x"])
    assert (len(seam.asked), TRANSIENT.search(stderr)) == (1, None)


# kubectl 1.32 while metrics.k8s.io is down on a cluster with legacy discovery: client-go's warnings come first.
DISCOVERY = ("E1204 16:30:01.123456   41234 memcache.go:265] couldn't get current server API group list: the server "
             "is currently unable to handle the request\n"
             "E1204 16:30:01.223456   41234 memcache.go:287] couldn't get resource list for metrics.k8s.io/v1beta1: "
             "the server is currently unable to handle the request\n")


def test_runner_does_not_retry_a_failure_because_of_discovery_warnings_beside_it():
    """A claim held by pvc-protection (kubectl delete --timeout=10m) is no transient error because client-go warned
    about an unavailable API group: retried, it cost 5 x 10 minutes. The command's own 503 still is one."""
    held = DISCOVERY + "error: timed out waiting for the condition on persistentvolumeclaims/lustre-pvc\n"
    seam = Scripted([(1, held), (0, "")])
    r, _, _ = quiet(tools=seam, backoff_seconds=0)
    with pytest.raises(ToolError, match="persistentvolumeclaims/lustre-pvc"):
        r.run(["kubectl", "delete", "persistentvolumeclaim", "lustre-pvc"])
    assert len(seam.asked) == 1
    own = DISCOVERY + "Error from server (ServiceUnavailable): the server is currently unable to handle the request\n"
    seam = Scripted([(1, own), (0, "")])
    r, _, _ = quiet(tools=seam, backoff_seconds=0)
    assert (r.run(["kubectl", "get", "pods"]).attempts, len(seam.asked)) == (2, 2)


# ---- streamed output -------------------------------------------------------------------------------
def test_runner_stream_redacts_every_line_of_a_real_process(tmp_path, monkeypatch):
    write_tool(tmp_path, "talker", f"import sys\nprint('out {SECRET} 1', flush=True)\n"
                                   f"sys.stderr.write('err {SECRET} 2\\n')\nprint('done')")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    r, out, err = quiet(secrets=(SECRET,))
    code = r.stream(["talker"])
    assert (code, SECRET in out.getvalue() + err.getvalue(), out.getvalue().count("***"),
            "err *** 2" in err.getvalue(), "done" in out.getvalue()) == (0, False, 1, True, True)


def test_runner_stream_redacts_lines_from_the_seam():
    r, out, err = quiet(secrets=(SECRET,), tools=Scripted([]))
    r.stream(["kubectl", "logs"])
    assert (out.getvalue(), err.getvalue().splitlines()[-1]) == ("token *** in a line\n", "and *** on stderr")


def test_processes_end_stops_the_matching_running_calls_and_only_them(tmp_path, monkeypatch):
    """What the inventory does to calls dialing a dead endpoint: they answer ENDED with why, at once; a call
    that does not match, or was launched after the end, runs to its own end; an ended call is not retried."""
    write_tool(tmp_path, "dialer", "import sys, time\ntime.sleep(float(sys.argv[2]))\nprint('answered', sys.argv[1])")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    r, _, _ = quiet()
    answers: dict[str, object] = {}

    def call(name: str, seconds: str) -> None:
        answers[name] = r.query(["dialer", name, seconds], ok_codes=range(256))

    threads = [threading.Thread(target=call, args=args) for args in (("stale", "60"), ("other", "1"))]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 30
    while len(r.tools._running) < 2 and time.monotonic() < deadline:  # both running
        time.sleep(0.01)
    assert r.end_calls(lambda argv: argv[1].startswith("stale"), "stopped: its cluster is gone") == 1
    later = threading.Thread(target=call, args=("stale-later", "0"))  # launched after the end: its own answer
    later.start()
    for thread in (*threads, later):
        thread.join(30)
    stale, other, fresh = (answers[k] for k in ("stale", "other", "stale-later"))
    assert (stale.exit_code, stale.stderr, stale.attempts) == (tools_module.ENDED, "stopped: its cluster is gone", 1)
    assert (other.exit_code, other.stdout.strip()) == (0, "answered other")
    assert fresh.stdout.strip() == "answered stale-later"


def closed_pipe() -> tuple[ReaderSafe, int]:
    """A ReaderSafe stream on a real pipe whose reader has gone (`| head` once it has its lines)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    return ReaderSafe(os.fdopen(write_end, "w")), write_end


def test_reader_safe_drops_output_once_its_reader_is_gone_and_points_the_descriptor_at_devnull():
    stream, fd = closed_pipe()
    with pytest.raises(BrokenPipeError):
        os.write(fd, b"x")  # what every write met before
    assert (stream.write("one\n"), stream.reader_gone) == (4, False)  # buffered: nothing written yet
    stream.flush()
    assert stream.reader_gone
    assert (stream.write("two\n"), os.write(fd, b"x")) == (4, 1)  # dropped; the descriptor is /dev/null now
    stream.flush()
    stream.close()


def test_reader_safe_takes_a_hung_up_terminal_for_a_reader_gone_and_no_other_error():
    """A closed terminal answers every write with EIO: an OSError that replaced the hangup's exit on the way out.
    It is a reader gone, as a closed pipe is; a full disk (ENOSPC) is still the stream's to raise."""
    import errno
    import pty

    main, child = pty.openpty()
    stream = ReaderSafe(os.fdopen(child, "w"))
    os.close(main)  # the terminal window closes
    with pytest.raises(OSError) as hung_up:
        os.write(child, b"x")
    assert hung_up.value.errno == errno.EIO  # what every write met
    stream.write("one\n")
    stream.flush()
    assert (stream.reader_gone, os.write(child, b"x")) == (True, 1)  # /dev/null now
    stream.close()

    class Full(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError):
        ReaderSafe(Full()).write("x")

    class FailingDisk(io.StringIO):  # `invoke up > log`: EIO from a file is the disk's, not a reader gone
        def write(self, text: str) -> int:
            raise OSError(errno.EIO, "Input/output error")

    with pytest.raises(OSError):
        ReaderSafe(FailingDisk()).write("x")


def test_runner_stream_ends_a_real_endless_command_once_its_reader_is_gone(tmp_path, monkeypatch):
    write_tool(tmp_path, "endless", "import itertools\nfor n in itertools.count():\n    print(n, flush=True)")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    out, _ = closed_pipe()
    r = Runner(out=out, err=io.StringIO())
    ended: list[int] = []
    follower = threading.Thread(target=lambda: ended.append(r.stream(["endless"])), daemon=True)
    follower.start()
    follower.join(30)  # without the end it follows for ever
    assert (ended, out.reader_gone) == ([0], True)  # a normal end: the work did what was asked


def test_runner_stream_with_a_reader_runs_to_the_commands_own_end(tmp_path, monkeypatch):
    write_tool(tmp_path, "counter", "import sys\nfor n in range(200):\n    print(n, flush=True)\nsys.exit(3)")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    out = ReaderSafe(io.StringIO())
    r = Runner(out=out, err=io.StringIO())
    assert (r.stream(["counter"]), out.getvalue().count("\n"), out.reader_gone) == (3, 200, False)


# ---- Ctrl-C ----------------------------------------------------------------------------------------
@pytest.fixture
def ctrl_c(pythons_sigint):
    """ctrl_c(after): a real SIGINT to the main thread after `after` seconds, Python's own handler in place."""
    timers: list[threading.Timer] = []

    def arm(after: float) -> None:
        timer = threading.Timer(after, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT))
        timers.append(timer)
        timer.start()

    yield arm
    for timer in timers:
        timer.cancel()


def test_runner_ctrl_c_in_the_pool_owner_stops_a_workers_poll_within_2_s(ctrl_c):
    r, _, _ = quiet(poll_seconds=600)
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        with r.pool(2) as pool:
            waiting = pool.submit(r.poll, "Lustre ACTIVE", lambda: False, timeout=3600)
            ctrl_c(0.3)
            waiting.result()
    assert (time.monotonic() - started < 2.0, isinstance(waiting.exception(), Interrupted)) == (True, True)


def test_runner_ctrl_c_in_parallel_stops_waiting_and_starts_nothing_new(ctrl_c):
    seam = Scripted([])
    r, _, _ = quiet(poll_seconds=600, tools=seam)
    started = time.monotonic()
    ctrl_c(0.3)
    with pytest.raises(KeyboardInterrupt):
        r.parallel([lambda: r.poll("a", lambda: False, timeout=3600), lambda: r.poll("b", lambda: False, timeout=3600)])
    assert time.monotonic() - started < 2.0
    with pytest.raises(Interrupted):
        r.run(["gcloud", "create"])
    assert seam.asked == []


def test_runner_interrupt_cuts_a_retry_backoff_short():
    r, _, _ = quiet(tools=Scripted([(1, "code=503")] * 5), backoff_seconds=600)
    threading.Timer(0.3, r.interrupt).start()
    started = time.monotonic()
    with pytest.raises(Interrupted):
        r.run(["gcloud", "x"])
    assert time.monotonic() - started < 2.0


# ---- the wait display (the board draws waits itself) ----------------------------------------------------
def test_runner_poll_reports_start_ticks_and_end_to_the_wait_display():
    seen: list[tuple[str, bool]] = []
    answers = iter([False, False, True])
    r, _, err = quiet(poll_seconds=0.2, wait_display=lambda label, seconds, done: seen.append((label, done)))
    assert r.poll("Lustre ACTIVE", lambda: next(answers), timeout=30)
    assert (seen[0], seen[-1], len(seen) >= 4, err.getvalue()) == (
        ("Lustre ACTIVE", False), ("Lustre ACTIVE", True), True, "")


def test_runner_poll_without_display_prints_start_and_end_lines():
    r, _, err = quiet(poll_seconds=0)
    assert r.poll("ready", lambda: True, timeout=1)
    assert err.getvalue().startswith("… ready\n✓ ready (")


def test_runner_poll_timeout_ends_with_a_cross_and_the_reason_never_a_tick():
    r, _, err = quiet(poll_seconds=0)
    assert r.poll("Lustre ACTIVE", lambda: False, timeout=0.05) is False
    assert (err.getvalue().splitlines()[-1], "✓" in err.getvalue()) == ("✗ Lustre ACTIVE: timed out after 0 s", False)


def test_runner_poll_tells_the_wait_display_why_a_wait_ended():
    ends: list[object] = []
    r, _, _ = quiet(poll_seconds=0, wait_display=lambda label, seconds, done: done is not False and ends.append(done))
    r.poll("a", lambda: False, timeout=0.05)
    r.interrupt()
    with pytest.raises(Interrupted):
        r.poll("b", lambda: False, timeout=30)
    assert ends == ["timed out after 0 s", "interrupted"]


def test_seam_a_command_killed_from_outside_answers_128_plus_the_signal_and_says_so():
    """Not a traceback: the OOM killer or a `kill` ends a gcloud, or a kubectl port-forward (kubectl 1.32 turns
    only SIGINT into a clean end; SIGTERM kills it)."""
    script = "echo out; echo err >&2; kill -TERM $$"
    ran = tools_module.Processes().run(["sh", "-c", script], stdin=None, timeout=30)
    assert ran == tools_module.Ran(143, "out\n", "err\nsh: killed by SIGTERM\n", signal=15)
    lines: list[str] = []
    code = tools_module.Processes().stream(["sh", "-c", script], stdin=None, out=lambda line: lines.append(line),
                                           err=lambda line: lines.append("err: " + line))
    assert (code, lines[-1]) == (143, "err: sh: killed by SIGTERM\n")


def test_seam_a_stream_that_really_exits_141_is_not_a_reader_gone():
    """141 is also what a command whose own pipe broke exits with (kubectl exec passes the remote's code on)."""
    r = Runner(out=ReaderSafe(io.StringIO()), err=io.StringIO())
    assert r.stream(["sh", "-c", "echo line; exit 141"]) == 141


def test_runner_does_not_retry_a_command_a_signal_killed(tmp_path, monkeypatch):
    """Its partial output may read transient; the OOM killer would only kill it again."""
    counter = tmp_path / "runs"
    write_tool(tmp_path, "oomed", f"import os, signal, sys\nopen({str(counter)!r}, 'a').write('x')\n"
                                  "print('HTTP 503 Service Unavailable', file=sys.stderr, flush=True)\n"
                                  "os.kill(os.getpid(), signal.SIGKILL)")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    r = Runner(out=io.StringIO(), err=io.StringIO(), backoff_seconds=0)
    result = r.query(["oomed"], ok_codes=range(256))
    assert (result.exit_code, result.attempts, counter.read_text()) == (137, 1, "x")
    assert result.stderr.endswith("oomed: killed by SIGKILL\n")


def test_runner_sharing_asks_a_shared_question_once_for_every_part():
    # status's Ray part and latest-run part both read Ray's pods at the same moment: one kubectl, one answer.
    class Slow(Scripted):
        def run(self, argv, *, stdin, timeout):
            time.sleep(0.2)  # long enough for the other part to ask while it runs
            return super().run(argv, stdin=stdin, timeout=timeout)

    seam = Slow([])
    r, _, _ = quiet(tools=seam)
    pods, other = ["kubectl", "get", "pods"], ["kubectl", "get", "secret"]
    with r.sharing(pods):
        answers = r.parallel([lambda: r.query(pods), lambda: r.query(pods), lambda: r.query(other),
                              lambda: r.query(pods, stdin="a script")])  # with input: not the same question
        again = r.query(pods)  # later in the block: the same answer
    assert [a.stdout for a in answers] == ["out"] * 4 and again is answers[0]
    assert sorted(str(argv) for argv, _ in seam.asked) == sorted(str(a) for a in (pods, other, pods))
    r.query(pods)  # after the block: asked again
    assert len(seam.asked) == 4


def test_runner_sharing_hands_a_failure_to_every_asker():
    class Broken(Scripted):
        def run(self, argv, *, stdin, timeout):
            self.asked.append((argv, stdin))
            time.sleep(0.1)
            raise ToolError("kubectl is gone", 127)

    seam = Broken([])
    r, _, _ = quiet(tools=seam)

    def ask() -> str:
        try:
            r.query(["kubectl", "get", "pods"])
        except ToolError as exc:
            return str(exc)
        return "answered"

    with r.sharing(["kubectl", "get", "pods"]):
        said = r.parallel([ask, ask])
    assert said == ["kubectl is gone"] * 2 and len(seam.asked) == 1


def test_end_every_tool_ends_the_running_ones_and_any_started_after(monkeypatch):
    """What a SIGTERM handler calls (tasks/context.ended_like_ctrl_c): every command of every seam, run or
    streamed, ends (SIGTERM; the run ones answer ENDED with why), and so does one started after it, since the
    handler's look at the running ones may come just before a start."""
    monkeypatch.setattr(tools_module, "_EVERY", [])
    monkeypatch.setattr(tools_module, "_SEAMS", [])  # the other seams of this pytest process are not ours to end
    seam, other = tools_module.Processes(), tools_module.Processes()
    answers: dict[str, object] = {}
    threads = [threading.Thread(target=lambda: answers.update(run=seam.run(["sleep", "30"], stdin=None, timeout=60))),
               threading.Thread(target=lambda: answers.update(streamed=other.stream(
                   ["sleep", "30"], stdin=None, out=lambda line: False, err=lambda line: None)))]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 10
    while not (seam._running and other._streaming) and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    tools_module.end_every_tool("ended: invoke got SIGTERM")
    for thread in threads:
        thread.join(10)
    late = seam.run(["sleep", "30"], stdin=None, timeout=60)
    assert time.monotonic() - started < 5
    assert (answers["run"], answers["streamed"], late) == (
        Ran(tools_module.ENDED, "", "ended: invoke got SIGTERM", stopped=True), 128 + signal.SIGTERM,
        Ran(tools_module.ENDED, "", "ended: invoke got SIGTERM", stopped=True))


def test_a_signal_while_the_main_thread_starts_a_command_is_raised_once_it_is_registered(monkeypatch):
    """The handler of SIGTERM runs in the main thread between two of its steps: when that is between a command's
    fork and its registration, a raise there left the process unknown to every look, running on after the run.
    Now the raise waits for the registration, which ends the command (end_every_tool has run)."""
    monkeypatch.setattr(tools_module, "_EVERY", [])
    monkeypatch.setattr(tools_module, "_SEAMS", [])
    real, pids = tools_module._start, []

    def forked_then_signalled(argv, **io):
        proc = real(argv, **io)
        pids.append(proc.pid)
        tools_module.end_every_tool("ended: invoke got SIGTERM")  # what the handler does, at this very step
        tools_module.raise_unless_deferred(tools_module.Ended())
        return proc

    monkeypatch.setattr(tools_module, "_start", forked_then_signalled)
    seam = tools_module.Processes()
    try:
        with pytest.raises(tools_module.Ended):
            seam.run(["sleep", "30"], stdin=None, timeout=60)
        deadline = time.monotonic() + 10
        while running(pids[0]) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert (running(pids[0]), seam._running) == (False, {})  # ended, and forgotten
    finally:
        if pids and running(pids[0]):
            os.kill(pids[0], signal.SIGKILL)


def test_a_held_raise_is_the_starting_threads_own_and_replaces_its_blocks_error():
    """The handler holds its raise for the main thread only: another thread's start, ending meanwhile, raises
    nothing; the main thread's block raises it even when its start failed (MissingTool), and only once."""
    errors: list[BaseException] = []

    def another_start() -> None:
        try:
            with tools_module.deferring():
                pass
        except BaseException as exc:  # noqa: BLE001 - what it must not get
            errors.append(exc)

    with pytest.raises(tools_module.Ended):
        with tools_module.deferring():
            tools_module.raise_unless_deferred(tools_module.Ended())  # the handler, at this step
            worker = threading.Thread(target=another_start)
            worker.start()
            worker.join(10)
            raise tools_module.MissingTool("gcloud")
    with tools_module.deferring():
        pass  # nothing held any more
    assert errors == []


def test_seams_made_by_many_threads_at_once_are_all_known(monkeypatch):
    """end_every_tool must see every seam: a list rebuilt on each new seam lost some when threads made them at
    once (the in-process tests make one per command, in worker threads)."""
    monkeypatch.setattr(tools_module, "_SEAMS", [])
    made: list[tools_module.Processes] = []

    def make() -> None:
        made.extend(tools_module.Processes() for _ in range(2000))

    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch as often as they can: a lost update shows
    try:
        threads = [threading.Thread(target=make) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        sys.setswitchinterval(before)
    assert {id(ref()) for ref in tools_module._SEAMS} == {id(seam) for seam in made}


def test_a_stream_ended_by_sigterm_ends_the_run_not_only_itself(monkeypatch):
    """Ctrl-C in a followed log or a port-forward stops that command and the task goes on to its end (130 from the
    stream); SIGTERM or SIGHUP (tools.Ended) ends the whole run: the stream raises it, where it returned 130
    and the task ended 0."""
    monkeypatch.setattr(tools_module, "_EVERY", [])
    monkeypatch.setattr(tools_module, "_SEAMS", [])

    def handler(_number, _frame):  # what tasks/context's handler does
        tools_module.end_every_tool("ended: invoke got SIGTERM")
        tools_module.raise_unless_deferred(tools_module.Ended())

    with pytest.raises(tools_module.Ended):
        _stream_signalled(tools_module.Processes(), handler)


def test_a_stream_that_takes_a_ctrl_c_makes_the_runs_next_one_a_first_again(monkeypatch):
    """Ctrl-C in a followed log stops that command and the run goes on: the count of Ctrl-Cs (tools.CTRL_C, by
    which a second one during the run's ending is said and not raised) starts again, so the next one stops it."""
    monkeypatch.setattr(tools_module, "_EVERY", [])
    monkeypatch.setattr(tools_module, "_SEAMS", [])
    monkeypatch.setattr(tools_module, "CTRL_C", [])

    def handler(number, _frame):  # tasks/context's Ctrl-C handler, at a first Ctrl-C
        tools_module.CTRL_C.append(number)
        raise KeyboardInterrupt

    code = _stream_signalled(tools_module.Processes(), handler)
    assert (code, tools_module.CTRL_C) == (130, [])


def test_a_ctrl_c_held_over_a_commands_start_ends_that_command(monkeypatch, pythons_sigint):
    """A Ctrl-C while the main thread starts a command is held until the command is registered
    (tools.deferring), then raised. Come before the fork, it reached this process alone: the command never got
    it and, no longer waited for, went on running after "interrupted". run ends it."""
    from nemo_rl_gke.tasks import context

    monkeypatch.setattr(context, "ENDED_BY", [])
    monkeypatch.setattr(tools_module, "_EVERY", [])
    monkeypatch.setattr(tools_module, "_SEAMS", [])
    real_find = tools_module.find_tool

    def ctrl_c_then_find(tool: str) -> str:  # in `_start`, before the fork
        press_ctrl_c(0.05)  # the handler holds its raise
        return real_find(tool)

    monkeypatch.setattr(tools_module, "find_tool", ctrl_c_then_find)
    seam = tools_module.Processes()
    started = _starts_of(seam, monkeypatch)
    with pytest.raises(KeyboardInterrupt), context.ended_like_ctrl_c():
        seam.run(["sleep", "37"], stdin=None, timeout=None)
    deadline = time.monotonic() + 5
    while started and running(started[0]) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(started) == 1 and not running(started[0])


def _starts_of(seam: tools_module.Processes, monkeypatch: Any) -> list[int]:
    """The pids of the commands the seam starts from now on, as each registers."""
    started: list[int] = []
    real_register = seam._register

    def register(argv: list[str], launched: float, proc: Any) -> int:
        started.append(proc.pid)
        return real_register(argv, launched, proc)

    monkeypatch.setattr(seam, "_register", register)
    return started


def _stream_signalled(seam: tools_module.Processes, handler: Callable[[int, Any], None]) -> int:
    """seam.stream of `sleep 30`, handler run in the main thread (as SIGUSR1) once it waits for the process."""
    main = threading.get_ident()

    def waiting() -> bool:  # the main thread waits for the stream's process (past its start)
        frame = sys._current_frames().get(main)
        while frame is not None:
            if frame.f_code.co_name == "wait" and "sh" in frame.f_code.co_filename:
                return True
            frame = frame.f_back
        return False

    def soon() -> None:
        deadline = time.monotonic() + 10
        while not waiting() and time.monotonic() < deadline:
            time.sleep(0.01)
        signal.pthread_kill(main, signal.SIGUSR1)

    before = signal.signal(signal.SIGUSR1, handler)
    try:
        threading.Thread(target=soon, daemon=True).start()
        return seam.stream(["sleep", "30"], stdin=None, out=lambda line: False, err=lambda line: None)
    finally:
        signal.signal(signal.SIGUSR1, before)


def test_a_task_a_ctrl_c_ended_leaves_nothing_its_unjoined_threads_ran(monkeypatch, pythons_sigint):
    """A teardown's early lists, a watch beside a poll, a context check: commands run in threads no one joins on
    the way out of a task a Ctrl-C (SIGINT to invoke alone: its tools never got it) ended. Invoke exited with them
    still running. The task's end ends them and waits for each."""
    from invoke import Context, Exit

    from nemo_rl_gke.tasks import context

    monkeypatch.setattr(context, "ENDED_BY", [])
    monkeypatch.setattr(tools_module, "_EVERY", [])
    monkeypatch.setattr(tools_module, "_SEAMS", [])
    seam = tools_module.Processes()
    started = _starts_of(seam, monkeypatch)

    @context.task(name="watching")
    def watching(c):
        threading.Thread(target=seam.run, args=(["sleep", "37"],), kwargs={"stdin": None, "timeout": None},
                         daemon=True).start()
        deadline = time.monotonic() + 10
        while not started and time.monotonic() < deadline:
            time.sleep(0.01)
        press_ctrl_c(5)

    with pytest.raises(Exit) as ended:
        watching(Context())
    assert (ended.value.code, len(started), running(started[0])) == (130, 1, False)


@pytest.mark.parametrize("through", ["parallel", "graph"])
def test_a_signal_a_worker_thread_takes_still_stops_the_run_at_once(pythons_sigint, through):
    """The kernel may hand a signal sent to invoke (a `kill`, a CI's cancel) to any of its threads. Python runs
    the handler in the main thread, and only once that thread runs again: asleep in concurrent.futures' wait, it
    slept on until a worker finished, so the workers' waits and tools went on (a cluster delete ran its 15 s to
    "deleted"). Here the signal is a worker's own (pthread_kill); the worker's wait must be cut short."""
    from nemo_rl_gke import graph
    from nemo_rl_gke.steps import Step

    r, _, _ = quiet()
    cut: list[str] = []

    def worker(*_args: Any) -> None:
        time.sleep(0.5)  # the main thread waits on the workers by now
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)
        try:
            r.wait_for(10)
        except Interrupted:
            cut.append("cut short")
            raise

    with pytest.raises(KeyboardInterrupt):
        if through == "parallel":
            r.parallel([worker, lambda: None])
        else:
            graph.apply(r, [Step(name="a", title="a", create=worker, exists=lambda _r: False)])
    assert cut == ["cut short"]

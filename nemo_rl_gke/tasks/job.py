"""`job`: GRPO runs of NeMo RL on the Ray cluster. A job is a file, jobs/NAME.yaml; a run is a directory,
/data/runs/<id>/, on Lustre. Jobs are validated against NeMo RL v0.5.0's rules and the deployed cluster
before anything runs, start detached from this machine, and resume from their latest checkpoint.

Examples:
    invoke --dry job.submit gemma3-gsm8k                 # the kubectl exec and the script it would pipe
    invoke job.submit qwen2.5-1.5b-gsm8k --follow         # smoke run; Ctrl-C stops the log, not the job
    invoke job.submit gemma3-gsm8k --set grpo.max_num_steps=400 --id gemma3-gsm8k-20260101-120000
    invoke job.status && invoke job.metrics --plot=reward.png
    invoke job.list --json | jq -r '.runs[] | select(.state == "running") | .id'
    invoke job.logs gemma3-gsm8k-20260101-120000 --follow    # a run id, bare or as --id=ID
    invoke job.stop
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from invoke.collection import Collection
from invoke.context import Context

from ..resources import head_pod
from ..settings import Settings
from . import context, job_views

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..runner import Result, Runner

ID_HELP = "Run id, also given bare (`invoke job.status ID`); default: the latest submitted run."


def _utc_stamp() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S")


@context.task(iterable=["set_"], help={
    "name": "Job file stem in jobs/ (e.g. gemma3-gsm8k, qwen2.5-1.5b-gsm8k).",
    "set_": "A Hydra override key=value, +key=value or ++key=value; repeatable, passed verbatim "
            "(max_restarts=N is ours: the supervisor's restart limit).",
    "id_": "Run id; an existing id resumes that run from its latest checkpoint (default: NAME-<UTC time>).",
    "follow": "Stream the driver log after submitting; Ctrl-C stops the streaming, not the job.",
    "max_restarts": "Restarts after a lost node (Spot) before the run ends failed (default: the job file's, 3).",
})
def submit(c: Context, name: str, set_: list[str] | None = None, id_: str | None = None, follow: bool = False,
           max_restarts: int = -1) -> None:
    """Validate a job and start it detached in the Ray head pod, under a supervisor; prints the run id."""
    from .. import jobrules, jobscript, jobspec
    from ..resources.prefetch_steps import prefetched, wait_for_model
    from ..settings import ConfigError

    s = context.settings(c)
    spec = jobspec.load(name)
    run_id = jobspec.check_run_id(id_) if id_ else jobspec.new_run_id(spec.name, _utc_stamp())
    extra, ours = jobspec.split_job_settings(list(set_ or []))
    restarts = spec.max_restarts if max_restarts == -1 else max_restarts
    restarts = ours.get("max_restarts", restarts)
    if not 0 <= restarts <= 999:
        raise ConfigError("--max-restarts", max_restarts, "a whole number from 0 to 999.")
    overrides = jobspec.final_overrides(spec, run_id, extra)
    checks: dict[str, Any] = {"gpu_nodes": s.GPU_NODES, "gpus_per_node": s.gpu.gpus_per_node,
                              "gpu_name": s.gpu.accelerator}
    values = jobspec.validate(spec, overrides, **checks)  # before any command, even a query
    r = context.runner(c, s)
    if spec.gated and not s.HF_TOKEN:
        fix = (f"{spec.model_name} is gated: accept its licence at {spec.licence_url}, create a read token "
               f"(https://huggingface.co/settings/tokens), set HF_TOKEN in .env, then `invoke storage.create "
               f"ray.deploy` so the pods get it.")
        if not r.dry:
            raise ConfigError("HF_TOKEN", "", fix)
        r.say(f"warning: HF_TOKEN is empty; a real submit stops here: {fix}", err=True)
    warning = jobrules.cadence_warning(spec, values)
    if warning:
        r.say(warning, err=True)
    # The head pod and Ray's GPUs beside the model's prefetch Job (read-only, neither needs the other).
    reads: list[Callable[[], Any]] = [lambda: head_pod.head(r, s), lambda: prefetched(r, s, spec.model_name)]
    (head, ray_gpus), jobs = r.parallel(reads)
    if ray_gpus is not None:
        jobspec.validate(spec, overrides, ray_gpus=ray_gpus, **checks)
    wait_for_model(r, s, spec.model_name, jobs)  # a prefetch still downloading it: wait, do not race
    submission = jobscript.Submission(run_id, spec.name, spec.entry_point, spec.recipe, tuple(overrides),
                                      spec.dataset, max_restarts=restarts,
                                      gated_model=spec.model_name if spec.gated else "")
    script = jobscript.submit_script(submission)
    if not r.dry:
        _refuse_during_teardown(s)
    result = _submit(r, s, head, script, run_id)
    if not r.dry:
        for line in result.stdout.splitlines():
            r.say(line)
    if follow:
        r.say(f"following the driver log of {run_id}; Ctrl-C stops following, the job keeps running",
              err=True)
        r.stream(head_pod.kubectl_exec(s, head), stdin=jobscript.logs_script(run_id, follow=True))


def _before_any_stream() -> re.Pattern[str]:
    """kubectl exec's failures that leave nothing going on in the pod: the remote script's own exit code, and the
    refusals before a stream opens (client-go's NotFound/Forbidden, a missing context or credential plugin: the
    runner's own words for them, an API server that would not upgrade the connection, or that kubectl could not
    reach to look the pod up). Built when asked: the runner is not imported for `invoke --list`."""
    from ..runner import NO_CONTEXT, NO_CREDENTIALS

    return re.compile(r"command terminated with exit code|Error from server \((NotFound|Forbidden|BadRequest)\)"
                      r"|unable to upgrade connection|Unable to connect to the server"
                      r"|cannot exec into a container in a completed pod|is not valid for pod \S+ out of:"
                      r"|The connection to the server \S+ was refused"
                      f"|{NO_CONTEXT.pattern}|{NO_CREDENTIALS.pattern}")


def _submit(r: Runner, s: Settings, head: str, script: str, run_id: str) -> Result:
    """Pipe the submit script into the head pod, once: a kubectl whose stream dropped (or that Ctrl-C ended) leaves
    the script going on in the pod (kubectl exec does not stop it), so a second try would find the run started,
    or race it. Either way the user is told how to see whether it did; a script that ended said so itself."""
    from ..tools import ToolError

    check = (f"the submit script goes on in the head pod after kubectl has gone (exec does not stop it): run "
             f"{run_id} may start anyway; `invoke job.status --id={run_id}` says whether it did (`invoke job.stop "
             f"{run_id}` stops it)")
    try:
        return r.run(head_pod.kubectl_exec(s, head), stdin=script, stdin_label=f"job script for run {run_id}",
                     show_stdin=r.dry, retry=False)
    except ToolError as exc:
        # The script's own answer (it has ended), or kubectl's before any stream opened (no context, no
        # credentials, no pod, no permission): nothing goes on in the pod. Anything else may have cut a stream.
        if _before_any_stream().search(str(exc)):
            raise
        raise ToolError(f"{exc}\n{check}; submit again only if it did not.", exc.exit_code) from exc
    except KeyboardInterrupt:
        r.say(check, err=True)
        raise


def _refuse_during_teardown(s: Any) -> None:
    """A teardown holds the deployment's lock from its plan to its leftover scan: a run started then goes with
    Ray, and is missing from the listing of /data/runs the teardown recorded as Ray went. Submits do not take
    the lock themselves (sweeps submit in parallel, exports run beside them); they only refuse a teardown's."""
    from invoke.exceptions import Exit

    from ..lock import teardown_holding

    holder = teardown_holding(s)
    if holder is not None:
        raise Exit(f"error: a teardown is under way: {holder} holds the lock of {s.PROJECT_ID}/{s.CLUSTER_NAME} and "
                   f"deletes Ray. No run was started; submit once it has ended (and `invoke up` brought Ray back).",
                   code=1)


RUN_SHAPE = ("{id, job, state: running|succeeded|failed|stopped|lost, exit_code, phase, step, max_steps, "
             "latest_checkpoint, restarts, max_restarts, restart_history: [{restart, reason, resumed_from_step}], "
             "failure: {class: job|infrastructure, reason, gave_up} or null, submitted: ISO-8601 UTC, run_dir, "
             "checkpoint_dir}")
LIST_JSON_HELP = (f"{context.JSON_HELP} Shape: {{version, kind: job.list, dry_run, runs: [run]}}, run = {RUN_SHAPE}; "
                  "a dry run asks nothing: runs null, and a note saying so.")
STATUS_JSON_HELP = (f"{context.JSON_HELP} Shape: {{version, kind: job.status, dry_run, run}}, run = {RUN_SHAPE}; a dry "
                    "run asks nothing: run null, and a note saying so.")


@context.task(name="list", help={"json_": LIST_JSON_HELP})
def list_(c: Context, json_: bool = False) -> None:
    """List the runs on /data/runs with their state, step and latest checkpoint."""
    import json

    from .. import jobscript

    with context.json_output(json_) as out:
        s = context.settings(c)
        r = context.runner(c, s)
        result = head_pod.query(r, s, jobscript.reader_script("list"))
        if result is None:  # a dry run: nothing asked, so no runs to show (not "none")
            note = context.dry_read(r, "job.list", "lists the runs on /data/runs with their state and step")
            if out:
                out.emit({"kind": "job.list", "dry_run": True, "runs": None, "note": note}, secrets=s.secrets)
            return
        runs = json.loads(result.stdout or "[]")
        if out:
            out.emit({"kind": "job.list", "dry_run": r.dry, "runs": [job_views.run_document(run) for run in runs]},
                     secrets=s.secrets)
            return
        if not runs:
            r.say("no runs yet: start one with `invoke job.submit NAME`")
            return
        header = ("id", "job", "state", "step", "checkpoint", "restarts", "submitted (UTC)")
        context.print_table("runs", header, job_views.runs_rows(runs))


@context.task(help={"id_": ID_HELP, "json_": STATUS_JSON_HELP})
def status(c: Context, id_: str | None = None, json_: bool = False) -> None:
    """Show one run's state (running, succeeded, failed, stopped, lost), step, checkpoint and restarts."""
    import json

    from .. import jobscript

    _check_id(id_)
    with context.json_output(json_) as out:
        s = context.settings(c)
        r = context.runner(c, s)
        result = head_pod.query(r, s, jobscript.reader_script("status", id_ or ""))
        if result is None:  # a dry run: nothing asked
            note = context.dry_read(r, "job.status", f"shows the state, step and checkpoint of "
                                                     f"{f'run {id_}' if id_ else 'the latest run'}")
            if out:
                out.emit({"kind": "job.status", "dry_run": True, "run": None, "note": note}, secrets=s.secrets)
            return
        run = json.loads(result.stdout)
        if out:
            out.emit({"kind": "job.status", "dry_run": r.dry, "run": job_views.run_document(run)},
                     secrets=s.secrets)
            return
        for line in job_views.status_lines(run):
            r.say(line)


@context.task(help={"id_": ID_HELP,
                    "follow": "Keep streaming until the driver exits; Ctrl-C stops only this.",
                    "lines": "How many of the last lines to show first (default 200).",
                    "ray": "Instead: Ray's own logs on /data/ray-logs/<pod>/ (they outlive the pods), the tail of "
                           "each file with errors."})
def logs(c: Context, id_: str | None = None, follow: bool = False, lines: int = 200, ray: bool = False) -> None:
    """Print the driver log of a run (the latest by default); --follow streams it; --ray shows Ray's errors."""
    from .. import jobscript
    from ..settings import ConfigError

    _check_id(id_)
    if not 1 <= lines <= 1_000_000:
        raise ConfigError("--lines", lines, "a number of lines from 1 to 1000000.")
    s = context.settings(c)
    r = context.runner(c, s)
    if ray:
        _ray_logs(r, s, id_ or "", lines)
        return
    pod = head_pod.reading_head(r, s)
    script = jobscript.logs_script(id_ or "", follow=follow, lines=int(lines))
    code = r.stream(head_pod.kubectl_exec(s, pod), stdin=script)
    from ..tools import ToolError

    if code not in (0, 130):
        raise ToolError(f"reading the driver log failed (exit code {code})", code)


def _ray_logs(r: Runner, s: Settings, run_id: str, lines: int) -> None:
    import json

    from .. import jobscript

    result = head_pod.query(r, s, jobscript.reader_script("raylogs", run_id))
    if result is None:  # a dry run: nothing asked
        context.dry_read(r, "job.logs --ray", "shows Ray's errors of the run's pods")
        return
    answer = json.loads(result.stdout)
    files = answer.get("files") or []
    since = f" since run {answer['run']} was submitted" if answer.get("run") else ""
    r.say(f"Ray's logs of every pod, kept on Lustre: {answer['where']} (they outlive the pods)")
    if not files:
        r.say(f"no Ray log with errors{since}")
        return
    r.say(f"{len(files)} Ray log file(s) with errors{since}, newest first:")
    for entry in files:
        r.say(f"--- {entry['path']} (pod {entry['pod']})")
        for line in entry["tail"][-min(lines, 20):]:
            r.say(f"  {line}")


def _check_id(id_: Any) -> None:
    """A bad run id is a usage error before any kubectl call."""
    from .. import jobspec

    if id_:
        jobspec.check_run_id(str(id_))


@context.task(help={"id_": ID_HELP, "grace": "Seconds between SIGTERM and SIGKILL (default 30)."})
def stop(c: Context, id_: str | None = None, grace: int = 30) -> None:
    """Stop a run: its supervisor and driver (the whole process group); a stopped run is never restarted."""
    import json

    from .. import jobscript
    from ..settings import ConfigError

    _check_id(id_)
    if not 0 <= grace <= 3600:
        raise ConfigError("--grace", grace, "seconds from 0 to 3600.")
    s = context.settings(c)
    r = context.runner(c, s)
    pod = head_pod.reading_head(r, s)
    script = jobscript.reader_script("stop", id_ or "", stop_grace_seconds=float(grace))
    result = r.run(head_pod.kubectl_exec(s, pod), stdin=script, stdin_label="stop the run's process group",
                   show_stdin=r.dry, dry_stdout="{}", ok_codes=(0, 1, 3))
    if r.dry:
        return
    from ..tools import ToolError

    if result.exit_code == 3:
        raise ToolError(head_pod.remote_error(result), 1)
    if result.exit_code == 1 and not result.stdout.strip():  # kubectl's own failure: the script never answered
        raise r.failure(result)
    answer = json.loads(result.stdout or "{}")
    r.say(answer.get("message", result.stdout.strip()))
    if result.exit_code != 0:
        raise ToolError(f"run {answer.get('id')} did not stop: {answer.get('message')}", 1)


@context.task(help={"id_": ID_HELP})
def checkpoints(c: Context, id_: str | None = None) -> None:
    """List a run's checkpoints on Lustre (training_info.json figures) and what was exported to the bucket."""
    import json

    from .. import jobscript

    _check_id(id_)
    s = context.settings(c)
    r = context.runner(c, s)
    result = head_pod.query(r, s, jobscript.reader_script("checkpoints", id_ or ""))
    if result is None:  # a dry run: nothing asked
        context.dry_read(r, "job.checkpoints", "lists the run's checkpoints and what the bucket holds of them")
        return
    answer = json.loads(result.stdout)
    rows = []
    for ckpt in answer["checkpoints"]:
        info = ckpt.get("training_info", {})
        epoch = info.get("current_epoch")
        epoch_text = str(epoch + 1) if isinstance(epoch, int) else "-"
        rows.append((str(ckpt["step"]), ckpt["path"].rsplit("/", 1)[-1], epoch_text,
                     str(info.get("consumed_samples", "-")), _number(info.get("val:accuracy"))))
    if rows:
        context.print_table(f"checkpoints of {answer['id']} on Lustre ({answer.get('checkpoint_dir')})",
                            ("step", "dir", "epoch", "consumed_samples", "val:accuracy"), rows)
    else:
        r.say(f"no checkpoints yet for {answer['id']} in {answer.get('checkpoint_dir')}")
    _exported(r, s, answer["id"])


def _number(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, int | float) else "-" if value is None else str(value)


def _exported(r: Runner, s: Settings, run_id: str) -> None:
    """What `storage.export` copied to gs://BUCKET/runs/<id>/ (best effort: no bucket is no error)."""
    from .. import gcs
    from ..commands import exports

    _, uri, prefix = exports.export_paths(s, run_id)
    try:
        objects = gcs.list_prefix(s, prefix)
    except Exception as exc:  # noqa: BLE001 - credentials, network: say so, the Lustre part stands
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        r.say(f"bucket: not listed ({reason[:160]})")
        return
    steps = sorted({name.split("/")[3] for name, _ in objects
                    if len(name.split("/")) > 4 and name.split("/")[3].startswith("step_")})
    if not objects:
        r.say(f"bucket: nothing exported to {uri} yet (invoke storage.export --run={run_id})")
        return
    total = sum(size for _, size in objects)
    r.say(f"bucket: {len(objects)} objects, {total / 2**20:.1f} MiB in {uri}"
          + (f"; checkpoints {', '.join(steps)}" if steps else ""))


@context.task(optional=["plot"], help={
    "id_": ID_HELP,
    "plot": "Also write a PNG plot of reward, accuracy and step time: to FILE.png, or with no value to "
            "metrics-<run id>.png here."})
def metrics(c: Context, id_: str | None = None, plot: str | bool | None = None) -> None:
    """Per-step reward, validation accuracy and step time from the driver log, as a table (and a PNG)."""
    from .. import jobmetrics, jobscript
    from ..settings import ConfigError

    _check_id(id_)
    path = job_views.plot_path(plot) if plot not in (None, False) else None
    s = context.settings(c)
    r = context.runner(c, s)
    result = head_pod.query(r, s, jobscript.reader_script("log", id_ or ""))
    if result is None:  # a dry run: nothing asked
        context.dry_read(r, "job.metrics", "shows the run's reward, accuracy and step time per step")
        return
    parsed = jobmetrics.parse(result.stdout)
    if parsed.steps:
        context.print_table("metrics", ("step", "avg reward", "val accuracy", "step time"),
                            jobmetrics.rows(parsed))
    r.say(jobmetrics.summary(parsed))
    if path is not None:
        if plot is True:
            run_id = id_ or head_pod.ask(r, s, jobscript.reader_script("resolve", "")).stdout.strip()
            path = path.with_name(f"metrics-{run_id}.png")
        try:
            jobmetrics.plot(parsed, str(path), title=f"run {id_ or 'latest'}")
        except OSError as exc:
            raise ConfigError("--plot", str(path), f"cannot write the PNG there ({exc.strerror or exc}).") from None
        r.say(f"plot written to {path}")


ns = Collection("job", submit, list_, status, logs, stop, checkpoints, metrics)

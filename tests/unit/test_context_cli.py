"""context.task's CliTask: equality by body (chained tasks are not deduped away), no automatic -h, int flags
that refuse a bad value with exit 2; and install_usage_exit_codes on a Program."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from invoke import Collection, Exit, Program
from invoke.parser import Parser

from nemo_rl_gke.tasks import context
from support.fake import press_ctrl_c, signals_as_a_terminal_gives_them


def _make(name: str):
    @context.task(name=name)
    def body(c):
        return name

    return body


def test_context_cli_same_named_tasks_of_two_modules_differ():
    first, second = _make("create"), _make("create")
    assert first.name == second.name and first.body.__code__ is second.body.__code__
    assert first != second and len({first, second}) == 2


def test_context_cli_a_task_equals_itself_and_its_copy():
    import copy

    made = _make("create")
    assert made == copy.deepcopy(made)  # Collection.from_module deep-copies tasks


def test_context_cli_h_is_never_an_automatic_short_flag():
    @context.task
    def render(c, head_cpu: int | None = None, hours=1):
        pass

    flags = {name for arg in render.get_arguments() for name in arg.names}
    assert "h" not in flags and "head-cpu" in flags


def test_context_cli_int_annotation_and_int_default_make_int_flags():
    @context.task
    def deploy(c, nodes: int | None = None, port=8265, name=None, spot=False):
        pass

    kinds = {arg.attr_name or arg.name: arg.kind for arg in deploy.get_arguments()}
    assert kinds == {"nodes": int, "port": int, "name": str, "spot": bool}


@pytest.mark.parametrize("value", ["abc", "٣", "9" * 5000, "1.5", "", "0x10"])
def test_context_cli_a_bad_int_value_exits_2(value):
    @context.task
    def deploy(c, head_cpu: int | None = None):
        pass

    parser = Parser(contexts=Collection(deploy).to_contexts())
    with pytest.raises(Exit) as caught:
        parser.parse_argv(["deploy", f"--head-cpu={value}"])
    assert caught.value.code == 2 and "--head-cpu=" in caught.value.message
    assert len(caught.value.message) < 120


@pytest.mark.parametrize(("value", "expected"), [("4", 4), (" 12 ", 12), ("-1", -1), ("0", 0)])
def test_context_cli_a_good_int_value_arrives_as_int(value, expected):
    @context.task
    def deploy(c, nodes: int | None = None):
        pass

    (ctx,) = Parser(contexts=Collection(deploy).to_contexts()).parse_argv(["deploy", f"--nodes={value}"])
    assert ctx.as_kwargs["nodes"] == expected


def _program(capsys):
    @context.task
    def submit(c, name):
        print(f"submitted {name}")

    program = Program(namespace=Collection(submit), name="t", binary="t")
    context.install_usage_exit_codes(program)
    return program


@pytest.mark.parametrize(("argv", "code", "stream", "text"), [
    (["submit", "--help"], 0, "out", "Usage: t [--core-opts] submit"),
    (["submit", "-h"], 0, "out", "Usage: t [--core-opts] submit"),
    (["submit", "--nope"], 2, "err", "needs NAME before any flag"),
    (["submit"], 2, "err", "did not receive required positional arguments"),
    (["submit", "x", "--nope"], 2, "err", "No idea what '--nope' is!"),
    (["submit", "x"], 0, "out", "submitted x"),
])
def test_context_cli_usage_exit_codes(capsys, argv, code, stream, text):
    program = _program(capsys)
    with pytest.raises(SystemExit) as caught:
        program.run(["t", *argv])
        raise SystemExit(0)
    out, err = capsys.readouterr()
    assert (caught.value.code or 0) == code
    assert text in (out if stream == "out" else err)


def test_context_cli_install_is_idempotent(capsys):
    program = _program(capsys)
    wrapped = program.parse_tasks
    context.install_usage_exit_codes(program)
    assert program.parse_tasks is wrapped


def test_context_cli_the_real_invoke_ends_without_the_last_collection_and_keeps_its_output():
    """tasks.py registers gc.freeze as the last exit handler: a handler registered before tasks.py loads runs
    after it and sees the objects frozen; the task's output still arrives whole."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    probe = ("import atexit, gc, sys\n"
             "atexit.register(lambda: sys.stderr.write(f'frozen={gc.get_freeze_count() > 0}\\n'))\n"
             "from invoke.main import program\n"
             "program.run(['invoke', '--search-root', sys.argv[1], '--dry', 'net.create'])\n")
    done = subprocess.run([sys.executable, "-c", probe, str(repo)], capture_output=True, text=True, timeout=60,
                          cwd=repo, env={"PATH": "/usr/bin:/bin", "ENV_FILE": str(repo / ".env.example")})
    assert done.returncode == 0, done.stderr
    assert "frozen=True" in done.stderr, done.stderr
    assert done.stdout.rstrip().endswith("--range=192.168.8.0/24 --description=managed-by=nemo-rl-gke"), done.stdout


def test_context_task_sigterm_ends_it_as_ctrl_c_does_and_a_nohup_sighup_stays_ignored(monkeypatch, pythons_sigint):
    """A task's body gets SIGTERM: it raises there (every `finally` runs), the task exits 128 + 15 and says so,
    and the handlers are as they were afterwards (here a sentinel, in place of Python's default, which would end
    pytest). SIGHUP ignored (`nohup invoke up &`) is left ignored."""
    import os
    import signal
    import time

    from invoke import Context

    from nemo_rl_gke import tools

    monkeypatch.setattr(context, "ENDED_BY", [])
    monkeypatch.setattr(tools, "_EVERY", [])
    monkeypatch.setattr(tools, "_SEAMS", [])  # the other seams of this pytest process are not ours to end
    missed: list[int] = []

    def sentinel(number, _frame):  # what SIGTERM would meet without the task's handler: noted, not the end of pytest
        missed.append(number)

    term, hup = signal.signal(signal.SIGTERM, sentinel), signal.signal(signal.SIGHUP, signal.SIG_IGN)
    seen: list[str] = []

    @context.task(name="long")
    def long(c):
        seen.append(f"SIGHUP {'ignored' if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN else 'handled'}")
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
            seen.append("went on")
        finally:
            seen.append("finally")

    try:
        with pytest.raises(Exit) as ended:
            long(Context())
        after = (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGHUP))
    finally:
        signal.signal(signal.SIGTERM, term)
        signal.signal(signal.SIGHUP, hup)
    assert (ended.value.code, str(ended.value.message).startswith("ended by SIGTERM"), missed) == (143, True, [])
    assert (seen, after) == (["SIGHUP ignored", "finally"], (sentinel, signal.SIG_IGN))


def test_context_task_ctrl_c_is_held_through_a_deferred_step_and_raised_at_once_elsewhere(monkeypatch,
                                                                                         pythons_sigint):
    """Ctrl-C in a step that must not be cut in two (tools.deferring: the lease's take, its release, a command's
    fork) comes as KeyboardInterrupt at the step's end; anywhere else at once, as Python's own handler raises it.
    The task exits 130; the handler left for Invoke's exit (`_leaving`) gives the next task run in-process a
    first Ctrl-C again."""
    import signal

    from nemo_rl_gke import tools

    monkeypatch.setattr(context, "ENDED_BY", [])
    seen: list[str] = []

    @context.task(name="steps")
    def steps(c):
        with tools.deferring():
            press_ctrl_c(0.2)
            seen.append("step done")
        seen.append("after the step")

    @context.task(name="plain")
    def plain(c):
        press_ctrl_c(5)
        seen.append("went on")

    codes = [_exit_code(steps), _exit_code(plain)]
    assert (codes, seen, signal.getsignal(signal.SIGINT)) == ([130, 130], ["step done"], context._leaving)


def test_context_task_a_second_ctrl_c_does_not_cut_the_ending_short_and_a_third_leaves(monkeypatch, capfd,
                                                                                      pythons_sigint):
    """The first Ctrl-C ends the body; a second during its ending (the `finally` that ends the steps and lets go
    of the lock) is said, not raised: raised there it cut the ending short. A third leaves at once."""
    monkeypatch.setattr(context, "ENDED_BY", [])
    seen: list[str] = []

    @context.task(name="ending")
    def ending(c):
        try:
            press_ctrl_c(5)
            seen.append("went on")
        finally:
            press_ctrl_c(0.2)
            seen.append("ending done")
            try:
                press_ctrl_c(5)
                seen.append("third ignored")
            except KeyboardInterrupt:
                seen.append("third raised")
                raise

    assert (_exit_code(ending), seen) == (130, ["ending done", "third raised"])
    assert capfd.readouterr().err.count("interrupted again: still stopping what was under way") == 1


def test_context_task_a_third_ctrl_c_leaves_even_a_step_the_first_one_waits_for(monkeypatch, pythons_sigint):
    """A step a Ctrl-C waits for (tools.deferring: the lease's take or release on a slow bucket) can last: the
    first press waits for it, the second is said, the third leaves at once, as the note promises."""
    from nemo_rl_gke import tools

    monkeypatch.setattr(context, "ENDED_BY", [])
    seen: list[str] = []

    @context.task(name="stuck")
    def stuck(c):
        with tools.deferring():
            for _ in range(3):
                press_ctrl_c(0.2)
                seen.append("pressed")
            seen.append("step done")

    assert (_exit_code(stuck), seen) == (130, ["pressed", "pressed"])


def test_context_task_after_a_signal_came_sigint_stays_with_leaving_until_a_task_ends_well(monkeypatch,
                                                                                        pythons_sigint):
    """A task ended by Ctrl-C, or one whose Ctrl-C a followed log took, leaves SIGINT with `_leaving` for
    Invoke's exit (the next test presses there); the next task run in-process starts from Python's handler again
    and, ending well, puts it back."""
    import signal

    from invoke import Context

    from nemo_rl_gke import tools

    monkeypatch.setattr(context, "ENDED_BY", [])

    @context.task(name="ended")
    def ended(c):
        press_ctrl_c(5)

    @context.task(name="followed")
    def followed(c):
        try:
            press_ctrl_c(5)
        except KeyboardInterrupt:  # what a stream that takes it does: the task goes on, and ends well
            tools.CTRL_C.clear()

    @context.task(name="fine")
    def fine(c):
        pass

    handlers = []
    for run in (lambda: _exit_code(ended), lambda: followed(Context()), lambda: fine(Context())):
        run()
        handlers.append(signal.getsignal(signal.SIGINT))
    assert handlers == [context._leaving, context._leaving, signal.default_int_handler]


def test_context_task_a_ctrl_c_in_invokes_exit_after_the_task_leaves_130_not_1(tmp_path):
    """An impatient user's second Ctrl-C, once the first one's ending is done: Invoke's Program.run is turning
    the task's Exit into its message and exit code. Python's handler, back by then, raised KeyboardInterrupt
    there, and Invoke exited 1 without a word (CI saw it once: two presses 30 ms apart). It leaves at once, 130.
    Here the real Program.run, the press where CI's came."""
    import subprocess
    import sys

    program = ("import os, signal, sys, time\n"
               "from invoke import Collection, Program\n"
               "from nemo_rl_gke.tasks import context\n"
               "@context.task(name='ended')\n"
               "def ended(c):\n"
               "    os.kill(os.getpid(), signal.SIGINT); time.sleep(5)\n"
               "class Late(Program):\n"
               "    def execute(self):\n"
               "        try:\n"
               "            super().execute()\n"
               "        finally:\n"
               "            print('task over', flush=True)\n"
               "            os.kill(os.getpid(), signal.SIGINT); time.sleep(1)\n"
               "Late(namespace=Collection(ended)).run(['invoke', 'ended'])\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, preexec_fn=signals_as_a_terminal_gives_them)
    assert (done.returncode, done.stdout, "Traceback" in done.stderr) == (130, "task over\n", False), done.stderr


def _exit_code(task: Callable[..., Any]) -> int:
    """The exit code a task's run ends with (its guard's Exit)."""
    from invoke import Context

    with pytest.raises(Exit) as ended:
        task(Context())
    return int(ended.value.code)


def test_context_task_a_lost_sigterm_still_ends_the_task(monkeypatch, pythons_sigint):
    """The handler's raise can be lost (raised in a hook that ignores exceptions, or caught on its way): the body
    then returns, and the task still ends 128 + the signal instead of 0."""
    from invoke import Context

    @context.task(name="quiet")
    def quiet(c):
        context.ENDED_BY.append(15)  # the handler ran; its Ended went nowhere

    monkeypatch.setattr(context, "ENDED_BY", [])
    with pytest.raises(Exit) as ended:
        quiet(Context())
    assert ended.value.code == 143

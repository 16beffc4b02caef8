"""The live board at 80×24: running steps and waits always visible (finished steps fold first), one row per wait
with its elapsed time, the runner's echo above the live region, plain lines without a terminal."""

from __future__ import annotations

import io
import re
from types import SimpleNamespace

import pytest
from rich.console import Console

from nemo_rl_gke.board import Board
from nemo_rl_gke.resources import all_steps
from nemo_rl_gke.settings import load

STEPS = all_steps(load(allow_example=True))
WAIT = "Lustre instance nemo-lustre ACTIVE"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _board(done: int, running: int, *, clock: Clock, **kwargs) -> Board:
    board = Board(STEPS, live=False, title="up nemo-rl", clock=clock, out=io.StringIO(), **kwargs)
    for step in STEPS[:done]:
        board.listener(step, "running", 0.0)
        board.listener(step, "created", 1.0)
    for step in STEPS[done:done + running]:
        board.listener(step, "running", 0.0)
    return board


def _screen(board: Board, width: int = 80, height: int = 24) -> list[str]:
    console = Console(file=io.StringIO(), width=width, height=height, force_terminal=False)
    console.print(board.render(height))
    return console.file.getvalue().splitlines()


@pytest.mark.parametrize("done", range(0, len(STEPS) - 2, 3))
def test_board_at_80x24_shows_every_running_step_and_wait(done):
    clock = Clock()
    board = _board(done, 3, clock=clock)
    board.wait_display(WAIT, 0.0, False)
    clock.now += 125
    lines = _screen(board)
    assert len(lines) < 24 and max(len(line) for line in lines) <= 80
    text = "\n".join(lines)
    for step in STEPS[done:done + 3]:
        assert step.title[:40] in text
    (wait_line,) = [line for line in lines if WAIT in line]
    assert wait_line.rstrip().endswith("125 s")
    assert "..." not in text


def test_board_folds_finished_steps_before_steps_to_go():
    clock = Clock()
    lines = _screen(_board(14, 3, clock=clock))
    text = "\n".join(lines)
    assert "14 steps done" in text
    assert STEPS[-1].title in text  # the steps to go still fit once the finished ones are folded
    assert STEPS[0].title not in text


def test_board_early_folds_steps_to_go_too_when_they_do_not_fit():
    clock = Clock()
    lines = _screen(_board(0, 2, clock=clock), height=12)
    text = "\n".join(lines)
    assert len(lines) < 12 and STEPS[0].title in text and STEPS[1].title in text
    assert STEPS[2].title in text  # the next to start stay; the last ones fold
    assert re.search(r"\d+ more to go", text) and STEPS[-1].title not in text


def test_board_plain_mode_a_finished_wait_says_how_long():
    out = io.StringIO()
    board = Board(STEPS[:1], out=out, live=False)
    board.wait_display(WAIT, 0.0, False)
    board.wait_display(WAIT, 4.25, True)
    assert out.getvalue().splitlines() == [f"… waiting: {WAIT}", f"  waited 4.2 s: {WAIT}"]


def test_board_wait_row_goes_when_the_wait_ends():
    clock = Clock()
    board = _board(2, 1, clock=clock)
    board.wait_display(WAIT, 0.0, False)
    board.wait_display(WAIT, 3.0, True)
    assert board.wait_rows() == []


def test_board_plain_mode_prints_lines_for_steps_and_waits():
    runner = SimpleNamespace(out=io.StringIO(), err=io.StringIO(), wait_display=None)
    out = io.StringIO()
    with Board(STEPS[:1], out=out, live=False, runner=runner) as board:
        assert runner.wait_display == board.wait_display
        runner.wait_display(WAIT, 0.0, False)
        runner.wait_display(WAIT, 1.0, False)
        runner.wait_display(WAIT, 2.5, "timed out")
        board.listener(STEPS[0], "running", 0.0)
        board.listener(STEPS[0], "created", 2.5)
    lines = out.getvalue().splitlines()
    assert lines[:3] == [f"… waiting: {WAIT}", f"  wait timed out after 2.5 s: {WAIT}",
                         f"✓ {STEPS[0].title}: created (2.5 s)"]
    assert lines[3].startswith("done in ")
    assert runner.wait_display is None  # given back


class Writes(io.StringIO):
    """A stream that keeps each write: a line and its newline in two writes can be split by another thread."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def write(self, text: str) -> int:
        self.calls.append(text)
        return super().write(text)


def test_board_plain_mode_writes_each_line_with_its_newline_at_once():
    # Graph workers print step lines while other workers' runners echo `$ …` commands to the same stream:
    # with print()'s two writes, an echo landed between a line and its newline (one echo glued, lost to a grep).
    out = Writes()
    board = Board(STEPS[:1], out=out, live=False)
    board.listener(STEPS[0], "running", 0.0)
    board.listener(STEPS[0], "created", 1.0)
    assert out.calls and all(call.endswith("\n") and call.count("\n") == 1 for call in out.calls), out.calls


def test_board_live_prints_the_runner_echo_above_the_region_and_gives_the_streams_back():
    screen = io.StringIO()
    console = Console(file=screen, width=80, height=24, force_terminal=True, color_system=None)
    err, out = io.StringIO(), io.StringIO()
    runner = SimpleNamespace(out=out, err=err, wait_display=None)
    with Board(STEPS[:3], live=True, console=console, runner=runner, title="create nemo-rl") as board:
        assert runner.err is board.stream and runner.wait_display == board.wait_display
        board.listener(STEPS[0], "running", 0.0)
        print("$ gcloud compute networks create default", file=runner.err, flush=True)
        runner.wait_display(WAIT, 0.0, False)
        board.listener(STEPS[0], "created", 1.0)
    assert runner.err is err and runner.out is out and runner.wait_display is None
    text = screen.getvalue()
    echo = text.index("$ gcloud compute networks create default")
    # The echo was printed once, as its own line, and the region redrawn below it.
    assert text.count("$ gcloud compute networks create default") == 1
    assert text.rfind("create nemo-rl") > echo
    assert err.getvalue() == ""  # nothing went around the board


def test_board_live_stops_redrawing_while_a_question_waits_then_goes_on_below_it():
    # Asked inside the live region, a question went through rich's redirected stdout as markup: its "[y/N]" was
    # taken for a style and dropped, and the region was redrawn over what was typed. Replayed on a terminal
    # emulator: the question and its answer stay on the screen, a line printed meanwhile comes after the answer
    # (not onto the question's line), and the board goes on below them.
    import pyte

    from nemo_rl_gke.board import paused

    screen = io.StringIO()
    console = Console(file=screen, width=80, height=24, force_terminal=True, color_system=None)
    with Board(STEPS[:6], live=True, console=console, title="down nemo-rl") as board:
        board.listener(STEPS[0], "running", 0.0)
        live = board._live
        with paused():
            assert live is not None and not live.is_started
            screen.write("Delete Lustre instance nemo-lustre? [y/N] ")
            board.print_above("$ gcloud container clusters delete nemo-rl")  # another step's echo meanwhile
            screen.write("y\n")  # what the terminal echoes of the answer
        assert board._live is not None and board._live.is_started
        board.listener(STEPS[0], "deleted", 1.0)
    terminal = pyte.Screen(80, 200)
    pyte.Stream(terminal).feed(screen.getvalue().replace("\n", "\r\n"))
    lines = [line.rstrip() for line in terminal.display]
    asked = lines.index("Delete Lustre instance nemo-lustre? [y/N] y")
    echo = lines.index("$ gcloud container clusters delete nemo-rl")
    last_board = max(i for i, line in enumerate(lines) if line.startswith("down nemo-rl"))
    assert asked < echo < last_board, "\n".join(lines[:60])
    with paused():  # no board on the screen: nothing to stop
        pass


def test_board_live_shows_a_label_with_brackets_as_it_is():
    # A row's text read as rich markup lost what its brackets held, and a "[/…" ended the run on a MarkupError.
    screen = io.StringIO()
    console = Console(file=screen, width=120, height=24, force_terminal=True, color_system=None)
    label = "claim [lustre-pvc] bound, /data as [/data/runs]"
    with Board(STEPS[:2], live=True, console=console, title="up [nemo-rl]") as board:
        board.wait_display(label, 0.0, False)
    assert label in screen.getvalue() and "up [nemo-rl]" in screen.getvalue()


def test_board_live_says_a_second_ctrl_c_that_a_line_under_it_would_lose(monkeypatch, capfd, pythons_sigint):
    # A second Ctrl-C during the ending is said, not raised: "interrupted again: … once more leaves at once". It
    # was written under the live board, which drew over it at its next redraw (a quarter of a second later): the
    # user never read that a third press leaves the lock behind. The board says it now, under its rows.
    import pyte

    from nemo_rl_gke.tasks import context
    from support.fake import press_ctrl_c

    monkeypatch.setattr(context, "ENDED_BY", [])
    screen = io.StringIO()
    console = Console(file=screen, width=80, height=24, force_terminal=True, color_system=None)
    with pytest.raises(KeyboardInterrupt), context.ended_like_ctrl_c():
        with Board(STEPS, live=True, console=console, title="down nemo-rl") as board:
            board.listener(STEPS[0], "running", 0.0)
            try:
                press_ctrl_c(5)
            finally:  # the ending, on the board
                press_ctrl_c(0.3)
                board.listener(STEPS[0], "interrupted", 1.0)
    terminal = pyte.Screen(80, 200)
    pyte.Stream(terminal).feed(screen.getvalue().replace("\n", "\r\n"))
    lines = [line.rstrip() for line in terminal.display if line.strip()]
    note = [i for i, line in enumerate(lines) if line.startswith("interrupted again: still stopping")]
    assert (len(note), capfd.readouterr().err.count("interrupted again")) == (1, 0), "\n".join(lines)
    assert lines[note[0] + 2].endswith("until it expires).") and lines[note[0] + 3] == "down nemo-rl"
    assert len(lines) < 24  # the rows gave it their lines


def test_board_the_second_ctrl_c_note_stays_when_running_rows_overflow_the_terminal(monkeypatch):
    # Running steps are never folded: more of them than the terminal's lines are cropped at the bottom, and the
    # note, last, went with them.
    from nemo_rl_gke import tools

    monkeypatch.setattr(tools, "CTRL_C", [2, 2])
    lines = _screen(_board(0, 12, clock=Clock()), height=12)
    assert any(line.startswith("interrupted again: still stopping") for line in lines[:12]), "\n".join(lines)


def test_board_stopped_by_a_ctrl_c_at_a_question_draws_no_note(monkeypatch):
    # A Ctrl-C at a question leaves the board stopped until its end: it draws nothing more, so the second Ctrl-C's
    # note is written as a line (the board said it drew it, and it was shown nowhere).
    from nemo_rl_gke.board import paused

    console = Console(file=io.StringIO(), width=80, height=24, force_terminal=True, color_system=None)
    with Board(STEPS[:3], live=True, console=console, title="down nemo-rl") as board:
        drawing = [board.drawing()]
        with pytest.raises(KeyboardInterrupt), paused():
            drawing.append(board.drawing())
            raise KeyboardInterrupt
        drawing.append(board.drawing())
    assert drawing == [True, False, False]

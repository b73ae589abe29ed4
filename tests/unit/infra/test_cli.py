"""``lineage-lab --help``: the entry point (infra/cli.py) lists the stack's commands and the app's it mounts
(lineage_assets/cli.py), each with its one-line summary, and each command answers to its own --help."""

import subprocess
import sys

import pytest

from infra.cli import parser

STACK_COMMANDS = ["stack", "service", "artifacts"]
APP_COMMANDS = ["lineage", "pipeline", "verify", "impact", "reconcile"]
COMMANDS = STACK_COMMANDS + APP_COMMANDS


def _help() -> str:
    return parser().format_help()


def test_the_help_lists_every_command_in_order():
    text = _help()
    assert "{stack,service,artifacts,lineage,pipeline,verify,impact,reconcile}" in text
    positions = [text.index(f"\n    {name} ") for name in COMMANDS]  # each command's line under the choices
    assert positions == sorted(positions)


@pytest.mark.parametrize("name", COMMANDS)
def test_the_summary_names_every_command(name):
    summary = _help().split("\n\n")[2]  # after the usage and the first line: one line per command
    assert f"lineage-lab {name} " in summary


def test_the_entry_point_prints_the_help():
    out = subprocess.run(
        [sys.executable, "-c", "import sys; from infra.cli import main; sys.exit(main(['--help']))"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0
    for name in COMMANDS:
        assert f"\n    {name} " in out.stdout


@pytest.mark.parametrize(
    ("argv", "needs"),
    [
        (["lineage", "outbox", "--help"], "--flush"),
        (["pipeline", "run", "--help"], "--orders"),
        (["verify", "--help"], "--html"),
        (["impact", "--help"], "--depth"),
        (["reconcile", "--help"], "--confirm-after"),
        (["stack", "logs", "--help"], "--follow"),
    ],
)
def test_every_command_has_its_own_help(argv, needs, capsys):
    with pytest.raises(SystemExit) as done:
        parser().parse_args(argv)
    assert done.value.code == 0
    assert needs in capsys.readouterr().out

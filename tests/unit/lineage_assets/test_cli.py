"""lineage_assets/cli.py, the ``lineage-lab`` entry point: ``--help`` lists the stack's commands (infra/cli.py) and the
app's, each with its one-line summary, and each command answers to its own --help; ``stack`` gets the app's hooks;
the endpoints scripts/run.sh evaluates, the stack's plus the orders' lineage page."""

import subprocess
import sys

import pytest

from infra import cli as stack_cli
from infra.endpoints import endpoints as stack_endpoints
from infra.settings import StackSettings
from lineage_assets import cli
from lineage_assets.cli import endpoints, parser

STACK_COMMANDS = ["stack", "service", "artifacts"]
APP_COMMANDS = ["lineage", "pipeline", "verify", "impact", "reconcile"]
COMMANDS = STACK_COMMANDS + APP_COMMANDS


def test_the_app_adds_the_orders_lineage_page_after_the_marquez_api():
    settings = StackSettings()
    values = endpoints(settings)
    assert values["ORDERS_LINEAGE_URL"] == (
        f"{settings.marquez_web_url}/lineage/dataset/"
        f"kafka%3A%2F%2F{settings.kafka_bootstrap.replace(':', '%3A')}/orders?depth=5"
    )
    keys = list(values)
    assert keys[keys.index("MARQUEZ_API_URL") + 1] == "ORDERS_LINEAGE_URL"
    assert {k: v for k, v in values.items() if k != "ORDERS_LINEAGE_URL"} == stack_endpoints(settings)


def test_the_module_prints_them_for_eval():
    out = subprocess.run(
        [sys.executable, "-m", "lineage_assets.cli", "--shell"], capture_output=True, text=True, check=True
    ).stdout
    assert out.splitlines()[3].startswith("ORDERS_LINEAGE_URL='http")


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
        [sys.executable, "-c", "import sys; from lineage_assets.cli import main; sys.exit(main(['--help']))"],
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


def test_stack_up_and_down_get_the_apps_flink_steps(monkeypatch):
    seen = []
    monkeypatch.setattr(stack_cli, "stack", lambda args, settings, hooks: seen.append(hooks) or 0)
    settings = StackSettings()
    assert cli.HANDLERS["stack"](parser().parse_args(["stack", "down"]), settings) == 0
    assert seen == [cli.STACK_HOOKS]
    assert cli.STACK_HOOKS.on_flink_up is cli.resume_flink_jobs
    assert cli.STACK_HOOKS.before_flink_down is cli.suspend_flink_jobs


def test_the_module_is_the_entry_point_when_given_a_command():
    out = subprocess.run(
        [sys.executable, "-m", "lineage_assets.cli", "pipeline", "run", "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0
    assert "--orders" in out.stdout

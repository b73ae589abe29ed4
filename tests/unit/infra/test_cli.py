"""infra/cli.py alone (``python -m infra.cli``): the stack's commands, without the app's and without its hooks; the
whole ``lineage-lab`` is tested in tests/unit/lineage_assets/test_cli.py."""

import subprocess
import sys

from infra.cli import HANDLERS, StackHooks, parser


def test_the_stack_commands_alone():
    text = parser().format_help()
    assert "{stack,service,artifacts}" in text
    assert sorted(HANDLERS) == ["artifacts", "service", "stack"]
    assert StackHooks() == StackHooks(on_flink_up=None, before_flink_down=None)


def test_the_module_prints_the_help_without_the_app():
    out = subprocess.run(
        [sys.executable, "-c", "import sys; from infra.cli import main; sys.exit(main(['--help']))"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0
    assert "\n    stack " in out.stdout
    assert "\n    pipeline " not in out.stdout

"""infra/endpoints.py: the stack's own addresses only (infra imports nothing of the app), printed for a reader or
for ``eval``."""

import shlex

from infra.endpoints import endpoints, lines
from infra.settings import StackSettings


def test_the_stack_endpoints_name_no_page_of_the_pipeline():
    values = endpoints(StackSettings())
    assert "ORDERS_LINEAGE_URL" not in values
    assert values["MARQUEZ_UI_URL"] == StackSettings().marquez_web_url


def test_shell_lines_evaluate_back_to_the_values():
    values = {"A_URL": "http://h/x?depth=5", "LOGS_DIR": "/tmp/with space"}
    shell = lines(values, shell=True)
    assert [shlex.split(line.partition("=")[2])[0] for line in shell] == list(values.values())
    assert lines(values, shell=False)[0] == f"{'A_URL':<20} http://h/x?depth=5"

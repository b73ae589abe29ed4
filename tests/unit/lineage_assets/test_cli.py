"""lineage_assets/cli.py: the endpoints scripts/run.sh evaluates, the stack's plus the orders' lineage page."""

import subprocess
import sys

from infra.endpoints import endpoints as stack_endpoints
from infra.settings import StackSettings
from lineage_assets.cli import endpoints


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

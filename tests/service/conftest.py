"""Service tests talk to the real embedded stack; they fail (not skip) when it is down, naming the fix."""

from __future__ import annotations

import pytest

from infra.services import build_stack


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/service/" in str(item.path):
            item.add_marker(pytest.mark.service)


@pytest.fixture(scope="session", autouse=True)
def stack_is_up(settings) -> None:
    down = [s.name for s in build_stack(settings) if not s.is_healthy()]
    if down:
        pytest.fail(f"embedded stack services not healthy: {down}; run `lineage-lab stack up` first", pytrace=False)

"""Shared fixtures. Service tests (marker ``service``) need `lineage-lab stack up`; unit tests need nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.settings import StackSettings
from tests.support.cpu_by_module import register as register_cpu_by_module


@pytest.fixture(scope="session")
def settings() -> StackSettings:
    return StackSettings.from_env()


# pytest-timeout: a test that names no limit of its own gets the ini's (60 s, unit tests) or, in these folders of tests
# that talk to services, this one. A limit only detects a hung test; no test asserts a duration.
SERVICE_TIMEOUT_S = 600
SERVICE_FOLDERS = {"service", "compose", "after_suite"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        folders = item.path.relative_to(Path(__file__).parent).parts[:1]
        if item.get_closest_marker("timeout") is None and set(folders) & SERVICE_FOLDERS:
            item.add_marker(pytest.mark.timeout(SERVICE_TIMEOUT_S))


def pytest_configure(config: pytest.Config) -> None:
    register_cpu_by_module(config)  # CPU per module, when LINEAGE_LAB_CPU_BY_MODULE names its table

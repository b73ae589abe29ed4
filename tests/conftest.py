"""Shared fixtures. Service tests (marker ``service``) need `lineage-lab stack up`; unit tests need nothing."""

from __future__ import annotations

import pytest

from infra.settings import StackSettings


@pytest.fixture(scope="session")
def settings() -> StackSettings:
    return StackSettings.from_env()

"""Fixtures of the pipeline's service tests."""

from __future__ import annotations

import pytest

from lineage_assets.resources import LineageResource, build_resources


def private_lineage(settings, directory) -> LineageResource:
    """A lineage resource with its own outbox, so a test reads exactly the events it caused."""
    return LineageResource(outbox_path=str(directory / "outbox.sqlite"), backend_url=settings.marquez_url)


@pytest.fixture(scope="module")
def resources(settings, tmp_path_factory):
    """The deployment's resources, but with a private lineage outbox for the test module."""
    return {**build_resources(settings), "lineage": private_lineage(settings, tmp_path_factory.mktemp("lineage"))}

"""A schema registry that does not answer: the latest schema is unknown (None), a compatibility rule cannot be set
(RegistryError naming the registry), never an unhandled transport error."""

from __future__ import annotations

import pytest

from lineage_assets.kafka.registry import Registry, RegistryError, ensure_compatibility, latest_schema


def test_a_registry_that_never_answers_has_no_latest_schema(hung_url):
    assert latest_schema(Registry(hung_url, timeout_s=1.0), "orders") is None


def test_a_registry_that_refuses_connections_has_no_latest_schema(refused_url):
    assert latest_schema(Registry(refused_url, timeout_s=1.0), "orders") is None


def test_setting_a_rule_on_a_registry_that_never_answers_names_the_registry_and_the_subject(hung_url):
    with pytest.raises(RegistryError, match=f"orders-value at {hung_url} failed"):
        ensure_compatibility(Registry(hung_url, timeout_s=1.0), "orders")

"""The Iceberg catalog as pyiceberg reads it gives up on a catalog that accepts connections and never answers
(``hung_url``: a real listening socket that never accepts)."""

from __future__ import annotations

import pytest
import requests
from pyiceberg.catalog import load_catalog

from infra.iceberg_rest import TimedRestCatalog, bound
from infra.services.iceberg_catalog import CATALOG_NAME, pyiceberg_properties_for


def props(url: str, **extra: str) -> dict:
    return {**pyiceberg_properties_for(url, "http://127.0.0.1:1", "ak", "sk", "us-east-1", 1.0, 1.5), **extra}


def test_the_properties_select_the_timed_catalog_with_both_limits_for_catalog_and_store():
    p = pyiceberg_properties_for("http://c", "http://s3", "ak", "sk", "r", 2.0, 7.0)
    assert p["py-catalog-impl"] == "infra.iceberg_rest.TimedRestCatalog"
    assert "type" not in p  # pyiceberg refuses a type beside py-catalog-impl
    assert (p["rest.connect-timeout"], p["rest.read-timeout"]) == ("2.0", "7.0")
    assert (p["s3.connect-timeout"], p["s3.request-timeout"]) == ("2.0", "7.0")


def test_a_catalog_that_never_answers_raises_a_read_timeout(hung_url):
    # loading the catalog already asks the server for its configuration (GET /v1/config)
    with pytest.raises(requests.exceptions.ReadTimeout):
        load_catalog(CATALOG_NAME, **props(hung_url))


def test_the_token_exchange_of_a_catalog_with_client_credentials_is_bounded_too(hung_url):
    with pytest.raises(requests.exceptions.ReadTimeout):
        load_catalog(CATALOG_NAME, **props(hung_url, credential="client:secret"))


def test_the_loaded_catalog_is_the_timed_one_with_its_limits(monkeypatch):
    monkeypatch.setattr(TimedRestCatalog, "_fetch_config", lambda self: None)  # no server: the config call is skipped
    catalog = load_catalog(CATALOG_NAME, **props("http://127.0.0.1:1"))
    assert isinstance(catalog, TimedRestCatalog)
    assert catalog._session.default_timeout == (1.0, 1.5)


def test_a_request_with_its_own_timeout_keeps_it_and_binding_twice_wraps_once():
    sent = []

    class Recording(requests.Session):
        def request(self, method, url, **kwargs):
            sent.append(kwargs.get("timeout"))

    session = bound(bound(Recording(), (1.0, 2.0)), (1.0, 2.0))
    session.get("http://x")
    session.get("http://x", timeout=9)
    assert sent == [(1.0, 2.0), 9]

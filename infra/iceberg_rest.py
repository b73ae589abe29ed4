"""pyiceberg's REST catalog with a connect and a read timeout on every request.

pyiceberg 0.10 sets no timeout on its HTTP session, so a catalog that accepts connections and never answers (a
stopped or overloaded server) would hold a sensor tick until Dagster kills it, and ``lineage-lab reconcile`` for
good. ``TimedRestCatalog`` is selected with ``py-catalog-impl`` (``TIMED_CATALOG_IMPL``) and reads the two limits
from the catalog properties ``rest.connect-timeout`` and ``rest.read-timeout`` (seconds); a request that passes its
own timeout keeps it. A catalog that does not answer in time raises ``requests.Timeout``, which callers report as
the catalog not answering.
"""

from __future__ import annotations

from pyiceberg.catalog.rest import RestCatalog
from requests import Session

from infra.services.iceberg_catalog import (
    CONNECT_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_READ_TIMEOUT_S,
    READ_TIMEOUT,
)


def bound(session: Session, timeout: tuple[float, float]) -> Session:
    """``session`` with ``timeout`` as the default of every request it sends (wrapped once; a later call sets the
    default it uses)."""
    if getattr(session, "default_timeout", None) is None:
        send = session.request

        def request(method, url, **kwargs):
            if kwargs.get("timeout") is None:
                kwargs["timeout"] = session.default_timeout  # type: ignore[attr-defined]
            return send(method, url, **kwargs)

        session.request = request  # type: ignore[method-assign]
    session.default_timeout = timeout  # type: ignore[attr-defined]
    return session


class TimedRestCatalog(RestCatalog):
    """A REST catalog whose every request, the OAuth2 token exchange included, has a connect and a read timeout."""

    def timeout(self) -> tuple[float, float]:
        return (
            float(self.properties.get(CONNECT_TIMEOUT, DEFAULT_CONNECT_TIMEOUT_S)),
            float(self.properties.get(READ_TIMEOUT, DEFAULT_READ_TIMEOUT_S)),
        )

    def _create_session(self) -> Session:
        return bound(super()._create_session(), self.timeout())

    def _create_legacy_oauth2_auth_manager(self, session: Session):
        # the token is fetched here, before _create_session returns the session
        return super()._create_legacy_oauth2_auth_manager(bound(session, self.timeout()))

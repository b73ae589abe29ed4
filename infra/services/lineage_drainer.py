"""The lineage drainer: one process that delivers the shared lineage outbox to the lineage backend.

Producers (sensors, assets, Flink job clients) only append to the outbox, so an unreachable backend never slows
them; this service retries with backoff until the backend takes the events.
"""

from __future__ import annotations

import sys
from pathlib import Path

from infra.services.base import Launch, Service, read_pid


class LineageDrainer(Service):
    name = "lineage-drainer"
    startup_timeout = 30.0

    @property
    def ports(self) -> tuple[int, ...]:
        return ()

    def launch(self) -> Launch:
        cli = Path(sys.executable).with_name("lineage-lab")
        return Launch([str(cli), "lineage", "drain"], env=self.settings.as_env())

    def is_healthy(self) -> bool:
        # no port: healthy while its process runs and the outbox it serves exists
        return read_pid(self) is not None and self.settings.lineage_outbox.exists()

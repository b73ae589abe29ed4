"""The stores a reconciliation reads, built from the same Dagster resources the assets use (so a deployment that
points a resource elsewhere is reconciled there too), each client made once and only when a hop needs it."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from flink_jobs import deployment
from infra.settings import StackSettings
from lineage_assets.conservation.balance import StoreUnavailable
from lineage_assets.conservation.count_store import CountStore
from lineage_assets.conservation.kafka_counts import KafkaCounter
from lineage_assets.lineage.identity import CONSUMER_GROUPS, GROUP_OVERRIDE, Pipeline, sink_group

#: the resources a reconciliation reads (never Spark: building it starts a Spark session)
RESOURCE_KEYS = ("kafka", "iceberg", "object_store", "flink", "connect", "source_db")


def count_store_path(settings: StackSettings) -> Path:
    """Where reconciliation remembers its counts (LINEAGE_LAB_CONSERVATION_STORE, else under the data directory):
    read by the wiring (build_definitions, the CLI) and handed to ``Stores``."""
    if settings.conservation_store:
        return Path(settings.conservation_store)
    return settings.data_dir / "conservation" / "counts.sqlite"


@dataclass
class Stores:
    """``resources``: name -> initialized resource (``kafka``, ``iceberg``, ``object_store``, ``flink``,
    ``connect``, ``source_db``), as Dagster hands them to a check or ``dg.build_resources`` yields them;
    ``count_store``: the count store's file (``count_store_path``)."""

    pipeline: Pipeline
    resources: Any
    count_store: Path
    #: per-key audit over the chosen range (``reconcile --deep``) instead of counts alone
    deep: bool = False
    deep_range: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def counts(self) -> CountStore:
        return CountStore(self.count_store)

    @cached_property
    def kafka(self) -> KafkaCounter:
        return KafkaCounter(self.resources.kafka.connection(), self.counts)

    @cached_property
    def catalog(self):
        return self.resources.iceberg.catalog()

    @cached_property
    def s3(self):
        return self.resources.object_store.client()

    @cached_property
    def flink(self):
        return self.resources.flink.client()

    @cached_property
    def connect(self):
        return self.resources.connect.client()

    def source_db(self):
        return self.resources.source_db.connect()

    def table(self, name: str, missing_ok: bool = False):
        """Iceberg table ``name`` (None when it does not exist and ``missing_ok``). A catalog that does not answer,
        or a table that is not there, is ``StoreUnavailable`` saying what to do."""
        from pyiceberg.exceptions import NoSuchTableError

        try:
            return self.catalog.load_table(name)
        except NoSuchTableError as exc:
            if missing_ok:
                return None
            tables = [ds for ds in self.pipeline.datasets.values() if ds.store_kind == "iceberg_table"]
            made_by = [ds for ds in tables if ds.table_name == name]
            by = f"asset {'/'.join(made_by[0].asset_key)}" if made_by else "the asset that creates it"
            raise StoreUnavailable(
                f"Iceberg REST catalog at {self._catalog_uri} has no table {name}; materialize {by} (it creates the "
                "table), then reconcile again"
            ) from exc
        except StoreUnavailable:
            raise
        except Exception as exc:  # connection refused, HTTP 5xx, S3 unreachable for the metadata file...
            raise self.catalog_unavailable(f"loading table {name}", exc) from exc

    def catalog_unavailable(self, what: str, exc: Exception) -> StoreUnavailable:
        return StoreUnavailable(
            f"Iceberg REST catalog at {self._catalog_uri} did not answer while {what}, or the object store of its "
            f"files did not ({exc.__class__.__name__}: {exc}); start it (`lineage-lab stack up iceberg-catalog`; "
            "`lineage-lab stack status` shows the object store) or point the iceberg resource at the catalog, then "
            "reconcile again"
        )

    @property
    def _catalog_uri(self) -> str:
        return getattr(self.resources.iceberg, "uri", "the Iceberg REST catalog")

    def consumer_group(self, job_name: str) -> tuple[str, str]:
        """(the consumer group a job reads its input under, where it was read), from the engine running it: a
        Connect sink's ``consumer.override.group.id`` (else Connect's own ``connect-<name>``); a Flink job's
        ``--group-id`` while it runs, else the one the identity module declares (``CONSUMER_GROUPS``, what its
        asset deploys with)."""
        job = self.pipeline.jobs.get(job_name)
        if job is not None and job.integration == "KAFKA_CONNECT":
            return self._connect_group(job_name)
        try:
            running = self.flink.current(job_name)
            if running is not None:
                args = deployment.decode_args(self.flink.user_config(running.jid).get(deployment.ARGS, "")) or []
                for i, arg in enumerate(args[:-1]):
                    if arg == "--group-id":
                        return args[i + 1], f"--group-id of Flink job {running.jid}"
        except Exception as exc:  # Flink is not needed for the figures: the deployed group is the declared one
            why = f"Flink REST did not answer: {exc.__class__.__name__}"
        else:
            why = "no running deployment gives --group-id"
        if job_name not in CONSUMER_GROUPS:
            raise StoreUnavailable(
                f"no consumer group for Flink job {job_name!r} ({why}): declare it in CONSUMER_GROUPS "
                "(lineage_assets/lineage/identity.py), then reconcile again"
            )
        return CONSUMER_GROUPS[job_name], f"the declared group ({why})"

    def _connect_group(self, connector: str) -> tuple[str, str]:
        try:
            config = self.connect.config(connector) or {}
        except Exception as exc:  # the group is Connect's default unless the config overrode it
            return sink_group(connector), f"Connect's default (Connect REST did not answer: {exc.__class__.__name__})"
        how = f"{GROUP_OVERRIDE} of connector {connector}" if config.get(GROUP_OVERRIDE) else "Connect's default"
        return sink_group(connector, config), how

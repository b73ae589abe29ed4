"""One deployer of a job at a time on this host: a second one waits, and says who to look for when it waits too long
(the lock is a real file lock; no cluster is called)."""

from types import SimpleNamespace

import pytest

from lineage_assets.flink.client import FlinkError
from lineage_assets.flink.one_deployer import one_deployer


def test_a_second_deployer_of_the_same_job_is_held_off_and_told_what_to_look_for(tmp_path):
    client = SimpleNamespace(settings=SimpleNamespace(data_dir=tmp_path))
    with one_deployer(client, "supplier-stats"):  # type: ignore[arg-type]
        with (
            pytest.raises(FlinkError, match="another deployment of Flink job supplier-stats on this host"),
            one_deployer(client, "supplier-stats", wait_s=0.3),  # type: ignore[arg-type]
        ):
            pass
        with one_deployer(client, "iceberg-ingestion", wait_s=0.3):  # type: ignore[arg-type]
            pass  # another job deploys meanwhile
    with one_deployer(client, "supplier-stats", wait_s=0.3):  # type: ignore[arg-type]
        pass  # free again once the first deployer is done

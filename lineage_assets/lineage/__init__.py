"""The lineage core: dataset identity, OpenLineage event building and delivery.

Only ``dagster_runs.py`` imports dagster (it opens and closes a Dagster run as a run of the ``dagster`` job around
the batch work it parents); every other module here imports without it.
"""

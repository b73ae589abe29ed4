"""The lineage core: dataset identity, OpenLineage event building and delivery.

Only ``dagster_runs.py`` (it opens and closes a Dagster run as a run of the ``dagster`` job around the batch work it
parents) and ``resource.py`` (the Dagster resource of the outbox and Marquez) import dagster; every other module
here imports without it.
"""

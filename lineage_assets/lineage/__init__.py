"""The lineage core: dataset identity, OpenLineage event building and delivery.

Importable without Dagster (the Flink jobs' environment has only openlineage-python), so nothing here imports
dagster.
"""

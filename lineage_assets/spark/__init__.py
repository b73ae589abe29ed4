"""Spark: the supplier_stats batch asset, its PySpark resource and the delivery of its listener's lineage."""

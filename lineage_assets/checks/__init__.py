"""Cross-checks of Dagster's assets against the lineage graph (what the lineage backend holds)."""

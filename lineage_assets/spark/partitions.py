"""The day partitions of supplier_stats: one module, so the asset, its sensor and the increment planner share them
without importing each other."""

import dagster as dg

DAILY = dg.DailyPartitionsDefinition(start_date="2024-01-01", timezone="UTC", end_offset=1)

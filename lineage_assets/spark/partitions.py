"""The day partitions of supplier_stats, and how a run of one day executes: one module, so the asset, its sensor, its
schedule and the increment planner share them without importing each other."""

import dagster as dg

DAILY = dg.DailyPartitionsDefinition(start_date="2024-01-01", timezone="UTC", end_offset=1)

#: the executor of the jobs the daemon runs for one day (the new-orders sensor's, the finalise schedule's): every step
#: in the run's own process. A day's run is the Spark step and three small check steps; the multiprocess executor
#: started a Python process per step (8-10 s each on two cores): 35 s of a 55 s run whose Spark step took 16 s.
DAY_RUN_EXECUTOR = dg.in_process_executor

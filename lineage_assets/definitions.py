"""The lineage_assets code location."""

from __future__ import annotations

import dagster as dg

defs = dg.Definitions()

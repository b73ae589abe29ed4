"""A copy's checksum: where the column lineage says an output column copies one input column (identity or cast), a
copy hop balances a digest of those columns as well as the counts, so a copy that changes a price, an item or a
time and keeps every count right still fails.

Each record weighs the CRC-32 of its copied columns, each in a canonical text that both sides of the hop agree on
whatever their store: a decimal as its units (``values.units_of``: an Avro price text and an Iceberg decimal
weigh the same), a timestamp as epoch milliseconds (an Avro timestamp, an ISO text in a JSON line, an Iceberg
timestamp), anything else as its text (None as empty). A hop's checksum is the sum of its records' weights, an
exact integer below 2**32 times the records: sums add up like counts, so the input's are remembered per offset
range (``KafkaCounter.sum``) and an output's per object or snapshot. A record that does not decode weighs 0.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from lineage_assets.conservation.hops import Hop
from lineage_assets.conservation.values import CHECKSUM, units_of
from lineage_assets.lineage.identity import ColumnSource

Canon = Literal["units", "millis", "text"]
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SEPARATOR = "\x1f"


@dataclass(frozen=True)
class Field:
    output: str  # the column's name in the output
    input: str  # the name of the input column it copies
    canon: Canon


def canon_of(input_type: str, output_type: str) -> Canon:
    types = (input_type.lower(), output_type.lower())
    if any(t.startswith("decimal") for t in types):
        return "units"
    if any(t.startswith("timestamp") for t in types):
        return "millis"
    return "text"


def copies(source: ColumnSource, hop: Hop) -> bool:
    """The source is copied as it is or cast (the column lineage's IDENTITY, or a transformation described CAST)."""
    kept = source.subtype == "IDENTITY" or source.description.upper() == "CAST"
    return source.type == "DIRECT" and kept and not source.sums and source.dataset == hop.input.key


def copied_fields(hop: Hop) -> tuple[Field, ...]:
    """The output's columns that copy one column of the hop's input, in the output's declared order."""
    lineage = hop.job.column_lineage.get(hop.output.key, {})
    inputs = {c.name: c.type for c in hop.input.columns}
    found = []
    for column in hop.output.columns:
        sources = lineage.get(column.name, ())
        if len(sources) == 1 and copies(sources[0], hop) and sources[0].column in inputs:
            found.append(Field(column.name, sources[0].column, canon_of(inputs[sources[0].column], column.type)))
    return tuple(found)


def millis_of(value: Any) -> int | None:
    """Epoch milliseconds of a timestamp as any side stores it: a datetime (naive is UTC), epoch millis, ISO text."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            return None
    if isinstance(value, datetime):
        value = value if value.tzinfo else value.replace(tzinfo=UTC)
        return (value - _EPOCH) // timedelta(milliseconds=1)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def _text(value: Any, canon: Canon) -> str:
    if canon == "units":
        return str(units_of(value))
    if canon == "millis":
        found = millis_of(value)
        return "" if found is None else str(found)
    return "" if value is None else str(value)


def weigh(record: Mapping[str, Any] | None, fields: tuple[Field, ...], side: Literal["input", "output"]) -> int:
    """One record's weight: the CRC-32 of its copied columns' canonical texts (0: no record)."""
    if record is None:
        return 0
    names = [f.input if side == "input" else f.output for f in fields]
    text = _SEPARATOR.join(_text(record.get(n), f.canon) for n, f in zip(names, fields, strict=True))
    return zlib.crc32(text.encode("utf-8", "surrogatepass"))


def measure_of(fields: tuple[Field, ...]) -> str:
    """The name the input's sums are remembered under: every copy of the same input columns shares them."""
    return f"{CHECKSUM}({','.join(f'{f.input}:{f.canon}' for f in fields)})"


def source_text(fields: tuple[Field, ...]) -> str:
    """The copied columns as a report names them."""
    return ", ".join(f.output for f in fields)

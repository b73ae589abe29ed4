"""A copy's checksum (checksums.py) and the archive's per-object weights (archive_values.fill). The canonical texts
and their CRC-32 are written here by hand from the rule in the module's doc, not taken from the module."""

import zlib
from datetime import UTC, datetime
from decimal import Decimal

from infra.settings import StackSettings
from lineage_assets.conservation.archive_values import Held, fill, line_weigher
from lineage_assets.conservation.checksums import Field, copied_fields, measure_of, millis_of, weigh
from lineage_assets.conservation.hops import hops
from lineage_assets.lineage.identity import Pipeline

FIELDS = (Field("order_id", "order_id", "text"), Field("price", "price", "units"), Field("at", "bid_time", "millis"))


def crc(text: str) -> int:
    return zlib.crc32(text.encode())


def test_the_copies_weigh_every_column_they_copy_each_in_the_canon_both_sides_share():
    pipeline = Pipeline.from_settings(StackSettings())
    found = hops(pipeline)
    archive = copied_fields(found["orders-s3-sink"])
    assert [(f.output, f.input, f.canon) for f in archive] == [
        ("supplier", "supplier", "text"),
        ("item", "item", "text"),
        ("price", "price", "text"),  # text on both sides: the archive keeps the price as the order wrote it
        ("bid_time", "bid_time", "millis"),
        ("order_id", "order_id", "text"),
        ("currency", "currency", "text"),
    ]
    iceberg = {f.output: f.canon for f in copied_fields(found["iceberg-ingestion"])}
    assert iceberg == {
        "order_id": "text",
        "item": "text",
        "price": "units",
        "supplier": "text",
        "bid_time": "millis",
        "currency": "text",
    }
    # the windows copy the supplier alone (the times are transformed, the totals are sums)
    assert copied_fields(found["supplier-stats"]) == (Field("supplier", "supplier", "text"),)


def test_a_record_weighs_the_crc_of_its_canonical_texts_whatever_its_store():
    expected = crc("o-1\x1f1234\x1f1765108439869")
    avro = {"order_id": "o-1", "price": "12.34", "bid_time": datetime(2025, 12, 7, 11, 53, 59, 869000, tzinfo=UTC)}
    iceberg = {"order_id": "o-1", "price": Decimal("12.340"), "at": datetime(2025, 12, 7, 11, 53, 59, 869000)}
    line = {"order_id": "o-1", "price": "12.34", "at": "2025-12-07T11:53:59.869Z"}
    assert weigh(avro, FIELDS, "input") == expected
    assert weigh(iceberg, FIELDS, "output") == expected
    assert weigh(line, FIELDS, "output") == expected
    assert weigh({"order_id": "o-1", "price": "12.35", "at": 1765108439869}, FIELDS, "output") != expected
    assert weigh({}, FIELDS, "output") == crc("\x1f0\x1f")  # missing columns: empty, a price of no value 0
    assert weigh(None, FIELDS, "input") == 0


def test_timestamps_and_measures():
    assert millis_of("1970-01-01T00:00:01.5+00:00") == 1500
    assert millis_of(42) == 42
    assert millis_of("not a time") is None
    assert millis_of(True) is None
    assert measure_of(FIELDS) == "checksum(order_id:text,price:units,bid_time:millis)"


def test_a_json_line_that_is_no_object_weighs_nothing():
    weigh_line = line_weigher(FIELDS)
    assert weigh_line(b"not json") == 0
    assert weigh_line(b"[1, 2]") == 0
    assert weigh_line(b'{"order_id": "o-1", "price": "1", "at": 0}') == crc("o-1\x1f100\x1f0")


def test_each_object_is_expected_to_weigh_the_records_of_its_range_its_line_count_long():
    chain = [Held("a", 10, 2), Held("b", 14, 3), Held("c", 20, 1)]
    records = [(o, o * 100) for o in range(10, 25)]
    # a: 10, 11 (its two lines); b: 14, 16, 17 (15 is a dead letter); c: 20
    assert fill(chain, {"a", "b", "c"}, records, dead={15}) == {"a": 2100, "b": 4700, "c": 2000}
    # an object whose range ends before it has its lines holds what its range has
    assert fill([Held("a", 10, 9), Held("b", 12, 1)], {"a", "b"}, records, dead=set()) == {"a": 2100, "b": 1200}
    # read from the first wanted object on; objects not wanted are not weighed
    assert fill(chain, {"c"}, [(o, w) for o, w in records if o >= 20], dead=set()) == {"c": 2000}
    # no record of its range: weighs 0
    assert fill([Held("z", 99, 1)], {"z"}, records, dead=set()) == {"z": 0}


def test_an_objects_lines_are_weighed_chunk_by_chunk_and_an_overlong_line_weighs_nothing():
    from lineage_assets.conservation import archive_objects
    from lineage_assets.conservation.archive_objects import weighed_lines

    def size(line: bytes) -> int:
        return len(line)

    assert weighed_lines([b""], size) == (0, 0)
    assert weighed_lines([b"a\nb", b"b\n"], size) == (2, 3)  # a line across two chunks
    assert weighed_lines([b"a\nbb"], size) == (2, 3)  # the last line without its newline
    long = b"x" * (archive_objects.LONGEST_LINE + 1)
    # a line longer than any record is counted and weighs 0, without being held whole
    assert weighed_lines([b"a\n", long, long, b"\nbb\n"], size) == (3, 3)
    assert weighed_lines([b"a\n", long], size) == (2, 1)

"""HopBalance arithmetic and its JSON shape, judged by figures worked out by hand."""

from lineage_assets.conservation.balance import (
    HopBalance,
    OtherWriter,
    difference_of,
    duplicates_of,
    figures_known,
    is_lost_or_doubled,
    missing_of,
    status_of,
    unexplained,
)


def hop(**figures) -> HopBalance:
    return HopBalance("iceberg-ingestion", "kafka://b/orders", ("s3://w/default/orders", "kafka://b/dlq"), **figures)


def test_everything_accounted_for_balances():
    b = hop(in_=1000, out=990, dead_letters=7, pending=3)
    assert (b.missing, b.duplicates, b.status) == (0, 0, "pending")
    assert hop(in_=10, out=10, dead_letters=0, pending=0).status == "balanced"


def test_ten_rows_deleted_are_missing():
    b = hop(in_=1000, out=980, dead_letters=7, pending=3)
    assert (b.missing, b.duplicates, b.status) == (10, 0, "missing")
    assert b.lost_or_doubled


def test_a_copied_object_is_duplicates():
    b = hop(in_=500, out=600, dead_letters=0, pending=0)
    assert (b.missing, b.duplicates, b.status) == (0, 100, "duplicates")


def test_a_figure_not_read_concludes_nothing():
    b = hop(in_=500, out=None, dead_letters=0, pending=0)
    assert (b.missing, b.duplicates, b.status, b.lost_or_doubled) == (None, None, "unknown", False)
    down = hop(in_=1, out=1, dead_letters=0, pending=0, unknown="Kafka at 127.0.0.1:9092 did not answer")
    assert down.status == "unknown"
    assert "did not answer" in down.summary()


def test_pending_age_only_when_something_is_pending():
    assert hop(in_=5, out=2, dead_letters=0, pending=3, pending_since=100.0).pending_age(160.0) == 60.0
    assert hop(in_=5, out=5, dead_letters=0, pending=0, pending_since=100.0).pending_age(160.0) is None


def test_json_shape_of_reconcile():
    writer = OtherWriter("s3://w/default/orders", "snapshot 42 (delete, pyiceberg)", -10)
    b = hop(
        in_=1000,
        out=980,
        dead_letters=7,
        pending=3,
        range={"orders offsets": {"0": [0, 1000]}},
        other_writers=(writer,),
    )
    assert b.as_dict() == {
        "job": "iceberg-ingestion",
        "input": "kafka://b/orders",
        "outputs": ["s3://w/default/orders", "kafka://b/dlq"],
        "in": 1000,
        "out": 980,
        "dead_letters": 7,
        "pending": 3,
        "missing": 10,
        "duplicates": 0,
        "range": {"orders offsets": {"0": [0, 1000]}},
        "status": "missing",
        "other_writers": [
            {
                "output": "s3://w/default/orders",
                "what": "snapshot 42 (delete, pyiceberg)",
                "rows": -10,
                "ref": "snapshot 42 (delete, pyiceberg)",
                "position": None,
                "figure": "out",
            }
        ],
        "accepted": [],
        "pending_since": None,
        "unknown": None,
        "notes": [],
        "took_s": None,
        "values": {},
    }
    assert b.summary() == (
        "iceberg-ingestion: kafka://b/orders -> s3://w/default/orders, kafka://b/dlq: missing: in 1000, out 980, "
        "dead letters 7, pending 3, missing 10, duplicates 0; other writers: snapshot 42 (delete, pyiceberg): -10 "
        "rows in s3://w/default/orders [snapshot 42 (delete, pyiceberg)]"
    )


def test_the_arithmetic_figure_by_figure():
    assert unexplained(100, 90, 7, 3) == 0
    assert unexplained(100, 80, 7, 3) == 10
    assert unexplained(100, 95, 7, 3) == -5
    for missing_one in range(4):
        figures = [100, 90, 7, 3]
        figures[missing_one] = None
        assert unexplained(*figures) is None
    assert [status_of(d, p) for d, p in [(None, 0), (1, 0), (-1, 0), (0, 2), (0, 0), (0, None)]] == [
        "unknown",
        "missing",
        "duplicates",
        "pending",
        "balanced",
        "balanced",
    ]


def test_accepting_changes_only_the_accepted_writers():
    a = OtherWriter("o", "snapshot 1", -10, "snapshot:1")
    b = OtherWriter("o", "snapshot 2", 4, "snapshot:2")
    start = hop(in_=100, out=94, dead_letters=0, pending=0, other_writers=(a, b))
    assert start.with_accepted(set()) is start
    assert start.with_accepted({"snapshot:9"}) is start
    one = start.with_accepted({"snapshot:1"})
    assert (one.out, one.other_writers, one.accepted) == (104, (b,), (a,))
    both = one.with_accepted({"snapshot:2"})
    assert (both.out, both.other_writers, both.accepted, both.status) == (100, (), (a, b), "balanced")
    unread = hop(in_=100, out=None, dead_letters=0, pending=0, other_writers=(a,))
    assert unread.with_accepted({"snapshot:1"}) is unread


def test_pending_age_never_negative():
    assert hop(in_=5, out=2, dead_letters=0, pending=3, pending_since=200.0).pending_age(160.0) == 0.0
    assert hop(in_=5, out=2, dead_letters=0, pending=3).pending_age(160.0) is None


def test_the_properties_arithmetic():
    assert figures_known("", 1, 0, 0, 0)
    assert not figures_known("Kafka did not answer", 1, 0, 0, 0)
    assert not figures_known("", 1, None, 0, 0)
    assert (difference_of("", 10, 4, 1, 2), difference_of("down", 10, 4, 1, 2)) == (3, None)
    assert difference_of("", 10, None, 1, 2) is None
    assert [missing_of(d) for d in (3, 0, -2, None)] == [3, 0, 0, None]
    assert [duplicates_of(d) for d in (3, 0, -2, None)] == [0, 0, 2, None]
    assert [is_lost_or_doubled(s) for s in ("missing", "duplicates", "pending", "balanced", "unknown")] == [
        True,
        True,
        False,
        False,
        False,
    ]


def test_an_acceptance_covers_a_change_up_to_its_position_only():
    grew = OtherWriter("o", "producer x", 3, "records:t:0@5", "0@9")
    start = hop(in_=10, out=13, dead_letters=0, pending=0, other_writers=(grew,))
    assert start.with_accepted({"records:t:0@5": "0@7"}) is start  # reviewed up to 0@7; it reaches 0@9 now
    taken = start.with_accepted({"records:t:0@5": "0@9"})
    assert (taken.out, taken.accepted, taken.other_writers) == (10, (grew,), ())
    assert start.with_accepted({"records:t:0@5": None}).out == 10  # None: any position


def test_an_accepted_change_leaves_the_figure_it_is_in():
    dlq = OtherWriter("kafka://b/dlq", "producer y", 2, "records:dlq:0@0", figure="dead_letters")
    table = OtherWriter("s3://w/t", "snapshot 3", 5, "snapshot:3")
    start = hop(in_=10, out=15, dead_letters=2, pending=0, other_writers=(dlq, table))
    only_dlq = start.with_accepted({"records:dlq:0@0"})
    assert (only_dlq.out, only_dlq.dead_letters, only_dlq.accepted) == (15, 0, (dlq,))
    both = start.with_accepted({"records:dlq:0@0": None, "snapshot:3": None})
    assert (both.out, both.dead_letters, both.status) == (10, 0, "balanced")
    no_dlq_figure = hop(in_=10, out=15, dead_letters=None, pending=0, other_writers=(table,))
    assert no_dlq_figure.with_accepted({"snapshot:3"}) is no_dlq_figure

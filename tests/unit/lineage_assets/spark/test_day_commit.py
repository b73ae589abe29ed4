"""What a day's commit says it read: the properties, written out by hand."""

from lineage_assets.spark.day_commit import RunRead, commit_properties, optional_id


def test_an_incremental_commit_states_the_day_cumulatively_and_what_the_run_read():
    read = RunRead("incremental", "2 orders snapshot(s) since 10", start=10, base=900, rows=7, rejected=1)
    assert commit_properties("2026-03-02", 12, 27, 3, 9, 24, read) == {
        "lineage-lab.day": "2026-03-02",
        "lineage-lab.input-snapshot-id": "12",
        "lineage-lab.input-rows": "27",
        "lineage-lab.rejected-orders": "3",
        "lineage-lab.output-rows": "9",
        "lineage-lab.output-orders": "24",
        "lineage-lab.mode": "incremental",
        "lineage-lab.mode-reason": "2 orders snapshot(s) since 10",
        "lineage-lab.start-snapshot-id": "10",
        "lineage-lab.base-snapshot-id": "900",
        "lineage-lab.read-rows": "7",
        "lineage-lab.read-rejected": "1",
    }


def test_a_full_commit_of_an_empty_table_says_none():
    read = RunRead("full", "the whole day was asked for", start=None, base=None, rows=0, rejected=0)
    props = commit_properties("2026-03-02", None, 0, 0, 0, 0, read)
    assert props["lineage-lab.input-snapshot-id"] == "none"
    assert props["lineage-lab.start-snapshot-id"] == "none"
    assert props["lineage-lab.base-snapshot-id"] == "none"


def test_optional_ids():
    assert [optional_id(t) for t in ("42", "-7", "none", "", None, "4x")] == [42, -7, None, None, None, None]

"""The connector sensor's archive listing when the object store does not answer: the previous tick's figures and a
message that says what to check, instead of an exception that would lose the whole tick."""

from botocore.exceptions import EndpointConnectionError

from lineage_assets.connect.sensor import archive_listing


class DownStore:
    def get_paginator(self, name: str):
        raise EndpointConnectionError(endpoint_url="http://127.0.0.1:9000/orders-archive")


class OneObjectStore:
    def get_paginator(self, name: str):
        return self

    def paginate(self, **kwargs):
        yield {"Contents": [{"Key": f"{kwargs['Prefix']}orders+0+00000000000000000007.jsonl", "Size": 120}]}


BEFORE = {"after": {"0": "topics/orders/partition=0/orders+0+00000000000000000000.jsonl"}, "objects": 3, "bytes": 900}


def test_a_down_store_keeps_the_previous_figures_and_says_so():
    listed, why = archive_listing(DownStore(), "orders-archive", "topics/orders/", {0: 10}, BEFORE)
    assert listed == BEFORE
    assert why is not None
    assert "s3://orders-archive/topics/orders/ cannot be listed this tick (EndpointConnectionError" in why
    assert "previous tick's" in why and "lineage-lab stack status" in why


def test_a_down_store_on_the_first_tick_reports_nothing_listed():
    listed, why = archive_listing(DownStore(), "orders-archive", "topics/orders/", {0: 10}, None)
    assert listed == {"after": {}, "objects": 0, "bytes": 0}
    assert why is not None


def test_a_store_that_answers_adds_what_it_lists():
    listed, why = archive_listing(OneObjectStore(), "orders-archive", "topics/orders/", {0: 10}, BEFORE)
    assert why is None
    assert listed["objects"] == 4 and listed["bytes"] == 1020
    assert listed["after"] == {"0": "topics/orders/partition=0/orders+0+00000000000000000007.jsonl"}

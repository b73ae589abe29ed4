from lineage_assets.connect.client import invalid_config_message


def test_a_worker_without_exactly_once_source_support_is_named_with_what_to_do():
    errors = ["exactly.once.support: This worker does not have exactly-once source support enabled."]
    message = invalid_config_message("orders-source", errors)
    assert message.startswith(
        "connector 'orders-source' config is invalid: exactly.once.support: This worker does not have exactly-once "
        "source support enabled."
    )
    assert "exactly.once.source.support=enabled" in message
    assert "lineage-lab stack down && lineage-lab stack up" in message


def test_other_errors_are_passed_on_as_connect_wrote_them():
    errors = ["tasks.max: Invalid value -1", "topics: Missing required configuration"]
    assert invalid_config_message("orders-s3-sink", errors) == (
        "connector 'orders-s3-sink' config is invalid: tasks.max: Invalid value -1; topics: Missing required "
        "configuration"
    )

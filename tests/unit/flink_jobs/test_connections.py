import json

from flink_jobs import connections


def test_nothing_is_added_for_an_unsecured_deployment():
    assert connections.kafka_sql_options({}) == ""
    assert connections.registry_sql_options("value.avro-confluent", {}) == ""
    assert connections.catalog_sql_options({}) == ""


def test_secrets_become_quoted_connector_options():
    env = {
        connections.KAFKA_PROPERTIES: json.dumps({"sasl.jaas.config": 'x required password="it\'s";'}),
        connections.REGISTRY_USER_INFO: "u:p'w",
        connections.CATALOG_TOKEN: "tok",
    }
    assert connections.kafka_sql_options(env) == (
        ",\n            'properties.sasl.jaas.config' = 'x required password=\"it''s\";'"
    )
    registry = connections.registry_sql_options("value.avro-confluent", env)
    assert "'value.avro-confluent.basic-auth.credentials-source' = 'USER_INFO'" in registry
    assert "'value.avro-confluent.basic-auth.user-info' = 'u:p''w'" in registry
    assert connections.catalog_sql_options(env) == ",\n            'token' = 'tok'"

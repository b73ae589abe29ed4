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


def test_the_catalog_and_its_files_get_connect_and_read_limits():
    assert connections.timeout_sql_options(2000, 9000) == (
        ",\n            'rest.client.connection-timeout-ms' = '2000'"
        ",\n            'rest.client.socket-timeout-ms' = '9000'"
        ",\n            'http-client.apache.connection-timeout-ms' = '2000'"
        ",\n            'http-client.apache.socket-timeout-ms' = '9000'"
    )


def test_the_object_store_keys_reach_the_catalog_from_the_environment():
    env = {connections.S3_ACCESS_KEY: "AK", connections.S3_SECRET_KEY: "s'k"}
    assert connections.s3_sql_options(env) == (
        ",\n            's3.access-key-id' = 'AK',\n            's3.secret-access-key' = 's''k'"
    )
    assert connections.s3_sql_options({}) == ""


def test_the_deploying_asset_hands_every_secret_to_the_driver_environment():
    from lineage_assets.flink.deploy import job_environment
    from lineage_assets.kafka.resource import KafkaResource
    from lineage_assets.storage import IcebergResource

    kafka = KafkaResource(
        bootstrap_servers="b:9093",
        schema_registry_url="https://registry",
        security_protocol="SASL_SSL",
        sasl_mechanism="PLAIN",
        sasl_username="u",
        sasl_password="kafka-pw",
        schema_registry_user_info="r:registry-pw",
    )
    iceberg = IcebergResource(
        uri="https://catalog",
        s3_endpoint="https://s3",
        access_key_id="AK",
        secret_access_key="s3-pw",
        region="r",
        token="catalog-token",
    )
    env = job_environment(kafka, iceberg)
    assert "kafka-pw" in json.loads(env[connections.KAFKA_PROPERTIES])["sasl.jaas.config"]
    assert env[connections.REGISTRY_USER_INFO] == "r:registry-pw"
    assert (env[connections.S3_ACCESS_KEY], env[connections.S3_SECRET_KEY]) == ("AK", "s3-pw")
    assert env[connections.CATALOG_TOKEN] == "catalog-token"
    assert connections.CATALOG_CREDENTIAL not in env


def test_a_dead_letter_table_is_an_exactly_once_json_sink_with_the_secured_cluster_settings():
    env = {connections.KAFKA_PROPERTIES: json.dumps({"security.protocol": "SASL_SSL"})}
    ddl = connections.dead_letter_table(
        "dead_letters", ("src_topic STRING", "reason STRING"), "dlq", "b:9093", 5000, "job-dlq", env
    )
    assert ddl == (
        "\n        CREATE TEMPORARY TABLE dead_letters (\n"
        "            src_topic STRING,\n"
        "            reason STRING\n"
        "        ) WITH (\n"
        "            'connector' = 'kafka',\n"
        "            'topic' = 'dlq',\n"
        "            'properties.bootstrap.servers' = 'b:9093',\n"
        "            'properties.transaction.timeout.ms' = '600000',\n"
        "            'sink.delivery-guarantee' = 'exactly-once',\n"
        "            'properties.max.request.size' = '5000',\n"
        "            'sink.transactional-id-prefix' = 'job-dlq',\n"
        "            'format' = 'json',\n"
        "            'properties.security.protocol' = 'SASL_SSL'\n"
        "        )"
    )

import pytest

from infra.settings import StackSettings
from lineage_assets.kafka.connection import KafkaConfigError, KafkaConnection


def test_the_embedded_broker_needs_no_security_settings():
    conn = KafkaConnection.from_settings(StackSettings())
    assert conn.client_config() == {"bootstrap.servers": "127.0.0.1:9092"}
    assert conn.java_properties() == {}
    assert conn.job_args() == ["--bootstrap", "127.0.0.1:9092"]


def test_sasl_ssl_in_librdkafka_and_java_names():
    conn = KafkaConnection(
        "b1:9093,b2:9093", "sasl_ssl", "SCRAM-SHA-512", "svc", 'pa"ss\\word', ssl_ca_location="/etc/ca.pem"
    ).validated()
    assert conn.client_config(**{"group.id": "g"}) == {
        "bootstrap.servers": "b1:9093,b2:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "svc",
        "sasl.password": 'pa"ss\\word',
        "ssl.ca.location": "/etc/ca.pem",
        "group.id": "g",
    }
    java = conn.java_properties()
    assert java["security.protocol"] == "SASL_SSL" and java["sasl.mechanism"] == "SCRAM-SHA-512"
    # JAAS quoting: a quote or backslash in the password cannot end the value early
    assert java["sasl.jaas.config"] == (
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="svc" password="pa\\"ss\\\\word";'
    )
    assert java["ssl.truststore.type"] == "PEM" and java["ssl.truststore.location"] == "/etc/ca.pem"


@pytest.mark.parametrize(
    ("conn", "says"),
    [
        (KafkaConnection("b:9092", "SASL_SSL"), "LINEAGE_LAB_KAFKA_SASL_MECHANISM"),
        (KafkaConnection("b:9092", "SASL_SSL", "PLAIN", "user"), "LINEAGE_LAB_KAFKA_SASL_PASSWORD"),
        (KafkaConnection("b:9092", "TLS"), "LINEAGE_LAB_KAFKA_SECURITY_PROTOCOL='TLS'"),
        (KafkaConnection("b:9092", "", "PLAIN", "u", "p"), "SASL credentials are set"),
        (KafkaConnection("b:9092", "SASL_PLAINTEXT", "GSSAPI", "u", "p"), "PLAIN, SCRAM-SHA-256"),
        (KafkaConnection("b:9092", "PLAINTEXT", ssl_ca_location="/ca.pem"), "use SSL or SASL_SSL"),
        (KafkaConnection(" "), "LINEAGE_LAB_EXTERNAL_KAFKA"),
    ],
)
def test_contradicting_settings_name_the_variable_to_fix(conn, says):
    with pytest.raises(KafkaConfigError, match=says.replace("(", r"\(")):
        conn.validated()


SECURITY_SETTINGS = ("security_protocol", "sasl_mechanism", "sasl_username", "sasl_password", "ssl_ca_location")
SECURED_ENV = {
    "LINEAGE_LAB_EXTERNAL_KAFKA": "b:9093",
    "LINEAGE_LAB_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
    "LINEAGE_LAB_KAFKA_SASL_MECHANISM": "PLAIN",
    "LINEAGE_LAB_KAFKA_SASL_USERNAME": "svc",
    "LINEAGE_LAB_KAFKA_SASL_PASSWORD": "pw",
    "LINEAGE_LAB_KAFKA_SSL_CA_LOCATION": "/etc/ca.pem",
}


def test_the_dagster_resource_takes_every_security_setting_as_a_config_field():
    from lineage_assets.kafka.resource import KafkaResource

    assert set(SECURITY_SETTINGS) <= set(KafkaResource.model_fields)


def test_the_settings_and_the_resource_give_the_same_secured_connection(monkeypatch):
    import dagster as dg

    from lineage_assets.resources import build_resources

    want = KafkaConnection("b:9093", "SASL_SSL", "PLAIN", "svc", "pw", "/etc/ca.pem")
    settings = StackSettings.from_env(SECURED_ENV)
    assert KafkaConnection.from_settings(settings) == want
    for name, value in SECURED_ENV.items():
        monkeypatch.setenv(name, value)
    kafka = build_resources(settings)["kafka"]
    assert (kafka.sasl_username, kafka.sasl_password) == (
        dg.EnvVar("LINEAGE_LAB_KAFKA_SASL_USERNAME"),
        dg.EnvVar("LINEAGE_LAB_KAFKA_SASL_PASSWORD"),
    ), "the secrets stay references to the environment in Dagster's config"
    with dg.build_resources({"kafka": kafka}) as resources:
        assert resources.kafka.connection() == want

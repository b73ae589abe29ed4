import pytest

from lineage_assets.lineage import naming


@pytest.mark.parametrize(
    "bootstrap",
    ["127.0.0.1:9092", "127.0.0.1:9092,127.0.0.2:9092", "PLAINTEXT://127.0.0.1:9092", " 127.0.0.1:9092 ,b2:9093"],
)
def test_any_bootstrap_list_gives_one_kafka_namespace(bootstrap):
    assert naming.kafka(bootstrap, "orders") == ("kafka://127.0.0.1:9092", "orders")


def test_bootstrap_without_port_is_rejected():
    with pytest.raises(naming.NamingError, match="host:port"):
        naming.kafka("broker", "orders")


@pytest.mark.parametrize(
    "uri", ["s3://warehouse/default/orders", "s3a://warehouse/default/orders/", "s3n://warehouse//default/orders"]
)
def test_s3a_and_s3n_are_s3(uri):
    ns, name = naming.s3(uri)
    assert ns == "s3://warehouse"
    assert name == "default/orders"


def test_iceberg_location_matches_what_spark_reports():
    # the OpenLineage Spark listener reports namespace s3://warehouse, name default/orders for this location
    # (asserted against the real listener in tests/service/infra/test_iceberg_spark.py)
    assert naming.iceberg_table("s3a://warehouse/default/orders/") == ("s3://warehouse", "default/orders")


def test_bucket_without_key_and_other_schemes_are_errors():
    with pytest.raises(naming.NamingError, match="names a bucket"):
        naming.s3("s3://warehouse/")
    with pytest.raises(naming.NamingError, match="not an s3://"):
        naming.s3("gs://warehouse/x")


def test_namespace_characters_marquez_would_rewrite_are_refused():
    with pytest.raises(naming.NamingError, match="rewrites"):
        naming.kafka("my broker:9092", "orders")


# --- exact values (issue 28: each pins a mutant of the naming functions; see docs/mutation.md) -----------------
@pytest.mark.parametrize(
    "bootstrap, namespace",
    [
        ("SASL_SSL://b1:9093", "kafka://b1:9093"),
        ("PLAINTEXT://b1:9092,PLAINTEXT://b2:9092", "kafka://b1:9092"),
        ("::1:9092", "kafka://::1:9092"),  # the port is after the last colon
    ],
)
def test_the_namespace_is_the_first_broker_without_its_listener_name(bootstrap, namespace):
    assert naming.kafka(bootstrap, "orders") == (namespace, "orders")


def test_only_the_first_scheme_is_cut():
    assert naming.kafka("a://b://c:1", "orders") == ("kafka://b://c:1", "orders")


@pytest.mark.parametrize("bootstrap", [":9092", "broker:", "broker:x", "broker"])
def test_a_broker_needs_a_host_and_a_numeric_port(bootstrap):
    with pytest.raises(naming.NamingError, match="is not host:port"):
        naming.kafka(bootstrap, "orders")


def test_an_s3_key_loses_only_its_slashes_at_the_ends():
    assert naming.s3("s3://bucket/X/a/X") == ("s3://bucket", "X/a/X")


def test_postgres_namespace_names_host_and_port():
    assert naming.postgres("db.local", 5432, "orders_source", "public", "orders") == (
        "postgres://db.local:5432",
        "orders_source.public.orders",
    )


@pytest.mark.parametrize(
    "identity, key",
    [
        (("s3a://Warehouse", "/default/orders/"), ("s3://warehouse", "default/orders")),
        (("S3N://bucket/", "t"), ("s3://bucket", "t")),
        (("kafka://LOCALHOST:9092", "orders"), ("kafka://127.0.0.1:9092", "orders")),
        (("kafka://[::1]:9092", "orders"), ("kafka://127.0.0.1:9092", "orders")),
        (("kafka://broker.example:9092", "orders"), ("kafka://broker.example:9092", "orders")),
        (("postgres://db:5432", "orders_source.public.orders"), ("postgres://db:5432", "orders_source.public.orders")),
        (("file", "/tmp/x/"), ("file://", "tmp/x")),
        (("http://host/a/b/", "n"), ("http://host/a/b", "n")),
        (("HDFS://nn", "XX/p/XX"), ("hdfs://nn", "XX/p/XX")),
        (("s3://bucket/pathX/", "n"), ("s3://bucket/pathX", "n")),
    ],
)
def test_physical_key_removes_only_what_does_not_change_the_data(identity, key):
    assert naming.physical_key(*identity) == key

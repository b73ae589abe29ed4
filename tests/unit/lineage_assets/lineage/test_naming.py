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

"""Spark's configuration: local mode keeps everything on the driver; a cluster master URL ships the jars and the AWS
SDK's environment to the executors, and the catalog stays the same."""

import dataclasses
from pathlib import Path

import pytest

from infra import spark
from infra.settings import StackSettings


@pytest.fixture(autouse=True)
def jars(monkeypatch):
    monkeypatch.setattr(spark, "spark_jars", lambda settings: [Path("/j/iceberg.jar"), Path("/j/openlineage.jar")])


def test_local_mode_keeps_the_jars_on_the_driver():
    conf = spark.spark_conf(StackSettings(), "app")
    assert conf["spark.master"] == "local[2]"
    assert conf["spark.driver.extraClassPath"] == "/j/iceberg.jar:/j/openlineage.jar"
    assert "spark.jars" not in conf and not any(k.startswith("spark.executorEnv.") for k in conf)


def test_a_cluster_master_ships_jars_and_environment_to_the_executors():
    settings = dataclasses.replace(StackSettings(), spark_master="spark://10.0.0.5:7077", spark_executor_memory="3g")
    conf = spark.spark_conf(settings, "app")
    assert conf["spark.master"] == "spark://10.0.0.5:7077"
    assert conf["spark.jars"] == "/j/iceberg.jar,/j/openlineage.jar"
    assert conf["spark.executor.memory"] == "3g"
    assert conf["spark.executorEnv.AWS_REGION"] == settings.s3_region
    assert (
        conf["spark.sql.catalog.lakehouse.uri"]
        == spark.spark_conf(StackSettings(), "app")["spark.sql.catalog.lakehouse.uri"]
    )


def test_the_master_is_read_from_the_environment():
    settings = StackSettings.from_env({"LINEAGE_LAB_SPARK_MASTER": "spark://127.0.0.1:7177"})
    assert settings.spark_master == "spark://127.0.0.1:7177"


def test_the_catalog_client_has_the_stores_connect_and_read_timeouts_in_milliseconds():
    settings = StackSettings.from_env(
        {"LINEAGE_LAB_STORE_CONNECT_TIMEOUT_S": "2.5", "LINEAGE_LAB_STORE_READ_TIMEOUT_S": "45"}
    )
    conf = spark.spark_conf(settings, "app")
    assert conf["spark.sql.catalog.lakehouse.rest.client.connection-timeout-ms"] == "2500"
    assert conf["spark.sql.catalog.lakehouse.rest.client.socket-timeout-ms"] == "45000"


def test_the_driver_jvm_gets_the_short_job_options_unless_they_are_empty():
    conf = spark.spark_conf(StackSettings.from_env({"LINEAGE_LAB_JOB_CLIENT_JAVA_OPTIONS": "-XX:+UseSerialGC"}), "app")
    assert conf["spark.driver.extraJavaOptions"] == "-XX:+UseSerialGC"
    assert StackSettings().job_client_java_options == "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    empty = spark.spark_conf(dataclasses.replace(StackSettings(), job_client_java_options=""), "app")
    assert "spark.driver.extraJavaOptions" not in empty  # the JVM's defaults

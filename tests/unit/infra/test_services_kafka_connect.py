"""The registry password's variable: the Connect worker's launch sets it and the connector configs reference it, and
both take its name from infra.settings (the worker is started by infra, the configs are rendered by the app)."""

import dataclasses

from infra.services.kafka_connect import KafkaConnect
from infra.settings import REGISTRY_PASSWORD_ENV, StackSettings


def test_the_worker_gets_the_registry_password_in_the_variable_the_configs_name(tmp_path, monkeypatch):
    monkeypatch.setattr("infra.services.kafka_connect.classpath", lambda *_: "")
    settings = dataclasses.replace(StackSettings(home=tmp_path), schema_registry_user_info="lab:s3cret:x")
    env = KafkaConnect(settings).launch().env
    assert REGISTRY_PASSWORD_ENV == "LINEAGE_LAB_SCHEMA_REGISTRY_PASSWORD"
    assert env[REGISTRY_PASSWORD_ENV] == "s3cret:x"

"""resources.py only wires: each technology's Dagster resource is defined in that technology's folder (so no
technology folder imports the wiring back), and build_resources gives every key the definitions use."""

from infra.settings import StackSettings
from lineage_assets.resources import build_resources

#: resource key -> the module that defines its class
HOMES = {
    "kafka": "lineage_assets.kafka.resource",
    "connect": "lineage_assets.connect.resource",
    "flink": "lineage_assets.flink.resource",
    "source_db": "lineage_assets.source.resource",
    "object_store": "lineage_assets.storage",
    "lineage": "lineage_assets.lineage.resource",
    "spark": "lineage_assets.spark.resource",
    "iceberg": "lineage_assets.storage",
}


def test_every_resource_is_defined_in_its_technology_module():
    resources = build_resources(StackSettings())
    assert {key: type(r).__module__ for key, r in resources.items()} == HOMES


def test_the_wiring_defines_no_resource_of_its_own():
    import dagster as dg

    from lineage_assets import resources

    own = [
        name
        for name, value in vars(resources).items()
        if isinstance(value, type)
        and issubclass(value, dg.ConfigurableResource)
        and value.__module__ == resources.__name__
    ]
    assert own == []

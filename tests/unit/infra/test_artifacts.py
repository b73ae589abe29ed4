import xml.etree.ElementTree as ET

import pytest

from infra.artifacts import ArtifactError, Bundle, Coordinate, classpath, load_manifest

NS = {"m": "http://maven.apache.org/POM/4.0.0"}


def test_manifest_pins_every_artifact_exactly():
    bundles = load_manifest()
    assert bundles, "the manifest lists no bundle"
    for bundle in bundles.values():
        for c in bundle.artifacts:
            assert c.version[0].isdigit(), f"{c} is not pinned to an exact version"
            assert not any(ch in c.version for ch in "[](),"), f"{c} uses a version range"


def test_coordinate_parsing_and_file_name():
    c = Coordinate.parse("io.apicurio:apicurio-registry-app:3.0.9:zip:all")
    assert (c.group, c.artifact, c.version, c.type, c.classifier) == (
        "io.apicurio",
        "apicurio-registry-app",
        "3.0.9",
        "zip",
        "all",
    )
    assert c.file_name == "apicurio-registry-app-3.0.9-all.zip"
    with pytest.raises(ArtifactError, match="group:artifact:version"):
        Coordinate.parse("just-a-name")


def test_generated_pom_carries_exclusions():
    bundle = Bundle(
        name="demo", purpose="", artifacts=(Coordinate.parse("g:a:1.0"),), exclude=("org.apache.kafka:kafka-clients",)
    )
    root = ET.fromstring(bundle.pom())
    excl = root.findall(".//m:exclusion", NS)
    assert [(e.find("m:groupId", NS).text, e.find("m:artifactId", NS).text) for e in excl] == [
        ("org.apache.kafka", "kafka-clients")
    ]


def test_fingerprint_changes_with_versions():
    a = Bundle("x", "", (Coordinate.parse("g:a:1.0"),))
    b = Bundle("x", "", (Coordinate.parse("g:a:1.1"),))
    assert a.fingerprint != b.fingerprint


def test_classpath_of_unresolved_bundle_says_how_to_fix(tmp_path):
    name = next(iter(load_manifest()))
    with pytest.raises(ArtifactError, match="lineage-lab artifacts resolve"):
        classpath(tmp_path, name)


def test_unreachable_maven_central_is_a_clear_error():
    from infra.artifacts import check_maven_central

    with pytest.raises(
        ArtifactError, match=r"Maven Central is not reachable at http://127\.0\.0\.1:9/.*network or proxy"
    ):
        check_maven_central("http://127.0.0.1:9/", timeout=2)

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


# --- vendor fallback ------------------------------------------------------------------------------------------
def _vendor_bundle(tmp_path, content: bytes, *, artifacts=("g.x:tool:1.0",), file_name="tool-1.0.jar", digest=None):
    import hashlib

    folder = tmp_path / "vendor" / "tool"
    folder.mkdir(parents=True)
    (folder / file_name).write_bytes(content)
    sha = digest or hashlib.sha256(content).hexdigest()
    return Bundle(
        "tool",
        "",
        tuple(Coordinate.parse(a) for a in artifacts),
        transitive=False,
        vendor="tool",
        sha256=((file_name, sha),),
    )


@pytest.fixture
def central_404(monkeypatch, tmp_path):
    """A Maven Central stand-in on loopback that answers 404 to everything, and an empty local repository."""
    import http.server
    import threading

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_error(404)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setattr("infra.artifacts.maven_central_url", lambda: f"http://127.0.0.1:{server.server_port}/")
    monkeypatch.setattr("pathlib.Path.home", lambda: tmp_path / "home")
    monkeypatch.setenv("LINEAGE_LAB_VENDOR_DIR", str(tmp_path / "vendor"))
    yield
    server.shutdown()


def test_artifact_missing_on_central_comes_from_the_checked_vendor_copy(tmp_path, central_404):
    from infra.artifacts import resolve_bundle

    bundle = _vendor_bundle(tmp_path, b"jar bytes")
    out = resolve_bundle(tmp_path / "jars", bundle, log=lambda _: None)
    assert (out / "tool-1.0.jar").read_bytes() == b"jar bytes"


def test_vendor_copy_with_another_digest_is_refused(tmp_path, central_404):
    from infra.artifacts import resolve_bundle

    bundle = _vendor_bundle(tmp_path, b"tampered", digest="0" * 64)
    with pytest.raises(ArtifactError, match=r"SHA-256 .* the manifest expects 0000"):
        resolve_bundle(tmp_path / "jars", bundle, log=lambda _: None)
    assert not (tmp_path / "jars" / "tool").exists()


def test_neither_central_nor_vendor_names_both_places(tmp_path, central_404, monkeypatch):
    from infra.artifacts import resolve_bundle

    bundle = _vendor_bundle(tmp_path, b"x")
    monkeypatch.setenv("LINEAGE_LAB_VENDOR_DIR", str(tmp_path / "elsewhere"))
    with pytest.raises(ArtifactError) as err:
        resolve_bundle(tmp_path / "jars", bundle, log=lambda _: None)
    text = str(err.value)
    assert "HTTP 404" in text and str(tmp_path / "elsewhere" / "tool") in text and "LINEAGE_LAB_VENDOR_DIR" in text


def test_vendor_only_file_is_unpacked(tmp_path, central_404):
    import io
    import tarfile

    from infra.artifacts import resolve_bundle

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = b"console.log('ui')"
        info = tarfile.TarInfo("ui-1.0/server.js")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    bundle = _vendor_bundle(tmp_path, buf.getvalue(), artifacts=(), file_name="ui-1.0.tar.gz")
    bundle = Bundle(**{**bundle.__dict__, "unpack": True})
    out = resolve_bundle(tmp_path / "jars", bundle, log=lambda _: None)
    assert (out / "ui-1.0" / "server.js").read_text() == "console.log('ui')"


def test_manifest_marquez_bundles_pin_their_vendor_digests():
    bundles = load_manifest()
    assert dict(bundles["marquez"].sha256).keys() == {"marquez-api-0.51.1.jar"}
    assert bundles["marquez"].artifacts[0].artifact == "marquez-api"
    assert all(len(d) == 64 for _, d in bundles["marquez-web"].sha256)

"""Resolve the JVM artifacts of ``infra/artifacts.toml`` from Maven Central into a local cache.

The manifest is the single list of every jar the stack runs, with exact versions. Each bundle is resolved by a
throw-away POM and ``mvn dependency:copy-dependencies`` (or ``unpack-dependencies`` for distributions shipped as a
zip), so transitive dependencies come from Maven's own resolver. A stamp per bundle records the manifest entry it
was built from; an unchanged bundle is not resolved again.

A bundle may name a vendor folder (``vendor``, under ``LINEAGE_LAB_VENDOR_DIR``, by default ``../shared/vendor``
beside the repository) and the SHA-256 of each file it expects there (``sha256``): an artifact Maven Central does
not serve (Marquez's API jar on some mirrors) is then taken from that folder after its digest is checked, and a
file that is no Maven artifact at all (Marquez's web UI) comes only from there.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

MANIFEST = Path(__file__).with_name("artifacts.toml")
REPO_ROOT = MANIFEST.parent.parent
STAMP = ".bundle.json"


class ArtifactError(RuntimeError):
    """A bundle could not be resolved; the message says why and what to do."""


@dataclass(frozen=True)
class Coordinate:
    group: str
    artifact: str
    version: str
    type: str = "jar"
    classifier: str = ""

    @classmethod
    def parse(cls, text: str) -> Coordinate:
        """``group:artifact:version[:type[:classifier]]``, the order Maven's dependency:get uses."""
        parts = text.split(":")
        if len(parts) not in (3, 4, 5) or not all(parts):
            raise ArtifactError(
                f"manifest entry {text!r} is not group:artifact:version[:type[:classifier]]; fix infra/artifacts.toml"
            )
        return cls(*parts)  # type: ignore[arg-type]

    @property
    def file_name(self) -> str:
        suffix = f"-{self.classifier}" if self.classifier else ""
        return f"{self.artifact}-{self.version}{suffix}.{self.type}"

    def pom_xml(self, exclusions: Iterable[str]) -> str:
        excl = "".join(
            f"<exclusion><groupId>{escape(g)}</groupId><artifactId>{escape(a)}</artifactId></exclusion>"
            for g, a in (e.split(":", 1) for e in exclusions)
        )
        classifier = f"<classifier>{escape(self.classifier)}</classifier>" if self.classifier else ""
        return (
            "<dependency>"
            f"<groupId>{escape(self.group)}</groupId><artifactId>{escape(self.artifact)}</artifactId>"
            f"<version>{escape(self.version)}</version><type>{escape(self.type)}</type>{classifier}"
            f"<exclusions>{excl}</exclusions></dependency>"
        )


@dataclass(frozen=True)
class Bundle:
    """A set of artifacts resolved together into one folder (one classpath or one unpacked distribution)."""

    name: str
    purpose: str
    artifacts: tuple[Coordinate, ...]
    exclude: tuple[str, ...] = ()
    #: artifacts taken without their own dependencies (group:artifact)
    intransitive: tuple[str, ...] = ()
    transitive: bool = True
    unpack: bool = False
    #: a Maven module of this repository whose ``mvn package`` leaves the bundle in ``target/plugin``
    build: str = ""
    #: a folder under the vendor root holding files Central may lack, and the SHA-256 of each (file name -> digest)
    vendor: str = ""
    sha256: tuple[tuple[str, str], ...] = ()

    @property
    def fingerprint(self) -> str:
        spec: dict[str, object] = {
            "artifacts": [c.__dict__ for c in self.artifacts],
            "exclude": list(self.exclude),
            "intransitive": list(self.intransitive),
            "transitive": self.transitive,
            "unpack": self.unpack,
        }
        if self.vendor:
            spec["vendor"] = [self.vendor, list(self.sha256)]
        if self.build:
            spec["sources"] = _tree_digest(REPO_ROOT / self.build)
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]

    def pom(self) -> str:
        def exclusions(c: Coordinate) -> list[str]:
            if not self.transitive or f"{c.group}:{c.artifact}" in self.intransitive:
                return ["*:*"]
            return list(self.exclude)

        deps = "".join(c.pom_xml(exclusions(c)) for c in self.artifacts)
        return (
            '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
            f"<groupId>lineage-lab</groupId><artifactId>bundle-{escape(self.name)}</artifactId>"
            "<version>0</version><packaging>pom</packaging>"
            f"<dependencies>{deps}</dependencies></project>"
        )


def _tree_digest(root: Path) -> str:
    """Digest of a module's sources (pom and src/), so a source change rebuilds its bundle."""
    digest = hashlib.sha256()
    for path in sorted([root / "pom.xml", *(root / "src").rglob("*")]):
        if path.is_file():
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def load_manifest(path: Path = MANIFEST) -> dict[str, Bundle]:
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ArtifactError(f"cannot read the artifact manifest {path}: {exc}") from exc
    bundles: dict[str, Bundle] = {}
    for name, spec in data.get("bundles", {}).items():
        bundles[name] = Bundle(
            name=name,
            purpose=spec.get("purpose", ""),
            artifacts=tuple(Coordinate.parse(a) for a in spec["artifacts"]),
            exclude=tuple(spec.get("exclude", ())),
            intransitive=tuple(spec.get("intransitive", ())),
            transitive=spec.get("transitive", True),
            unpack=spec.get("unpack", False),
            build=spec.get("build", ""),
            vendor=spec.get("vendor", ""),
            sha256=tuple(sorted(spec.get("sha256", {}).items())),
        )
    return bundles


def vendor_root() -> Path:
    """Where vendored files live: ``LINEAGE_LAB_VENDOR_DIR``, else ``../shared/vendor`` beside the repository."""
    override = os.environ.get("LINEAGE_LAB_VENDOR_DIR")
    return Path(override).expanduser() if override else REPO_ROOT.parent / "shared" / "vendor"


def _vendored(bundle: Bundle, file_name: str, why_not_central: str) -> Path:
    """The vendored copy of ``file_name``, its SHA-256 checked against the manifest; a clear error naming both
    places when neither has it."""
    folder = vendor_root() / bundle.vendor if bundle.vendor else None
    expected = dict(bundle.sha256).get(file_name)
    candidate = folder / file_name if folder else None
    if candidate is None or expected is None or not candidate.is_file():
        where = f"the vendor folder {folder}" if folder else "no vendor folder (the manifest names none)"
        raise ArtifactError(
            f"bundle {bundle.name!r}: {file_name} is neither on Maven Central ({why_not_central}) nor in {where}. "
            "Use a network that reaches a Maven Central serving it, or put the file (with its SHA-256 as in "
            "infra/artifacts.toml) into a folder and point LINEAGE_LAB_VENDOR_DIR at that folder's parent."
        )
    digest = hashlib.sha256()
    with open(candidate, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    if digest.hexdigest() != expected:
        raise ArtifactError(
            f"bundle {bundle.name!r}: {candidate} has SHA-256 {digest.hexdigest()}, the manifest expects {expected}; "
            "the file is damaged or another version: replace it with the one the manifest names"
        )
    return candidate


def bundle_dir(jars_dir: Path, name: str) -> Path:
    return jars_dir / name


def is_resolved(jars_dir: Path, bundle: Bundle) -> bool:
    stamp = bundle_dir(jars_dir, bundle.name) / STAMP
    try:
        return json.loads(stamp.read_text()).get("fingerprint") == bundle.fingerprint
    except (OSError, ValueError):
        return False


def maven_central_url() -> str:
    """Maven Central's address as the installed Maven itself defines it (its super POM), so this project names
    no repository host of its own."""
    import zipfile

    lib = Path(os.path.realpath(_mvn())).parent.parent / "lib"
    for jar in sorted(lib.glob("maven-model-builder*.jar")):
        with zipfile.ZipFile(jar) as zf:
            root = ET.fromstring(zf.read("org/apache/maven/model/pom-4.0.0.xml"))
        for repo in root.findall("{*}repositories/{*}repository"):
            if repo.findtext("{*}id") == "central":
                return repo.findtext("{*}url").rstrip("/") + "/"
    raise ArtifactError(f"cannot find Maven's super POM under {lib}; is Maven installed correctly?")


def check_maven_central(repo_url: str | None = None, timeout: float = 15.0) -> None:
    """Fail fast, with a message that says what to do, when Maven Central cannot be reached."""
    repo_url = repo_url or maven_central_url()
    probe = repo_url + "org/apache/maven/maven-core/maven-metadata.xml"
    try:
        with urllib.request.urlopen(urllib.request.Request(probe, method="HEAD"), timeout=timeout):
            return
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise ArtifactError(
            f"Maven Central is not reachable at {repo_url} ({exc}). The stack's jars come from there: check the "
            "network or proxy (Maven honours ~/.m2/settings.xml), or point LINEAGE_LAB_JARS_DIR at a folder "
            "already resolved by `lineage-lab artifacts resolve` on another machine."
        ) from exc


def _mvn() -> str:
    mvn = shutil.which("mvn")
    if not mvn:
        raise ArtifactError("Maven (mvn) is not installed: run scripts/bootstrap.sh or `apt-get install maven`.")
    return mvn


def resolve_bundle(jars_dir: Path, bundle: Bundle, log: Callable[[str], None] = print) -> Path:
    """Resolve one bundle into ``jars_dir/<name>`` unless its stamp says it already is."""
    target = bundle_dir(jars_dir, bundle.name)
    if is_resolved(jars_dir, bundle):
        return target
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    if bundle.build:
        _build_module(bundle, staging, log)
    elif bundle.transitive:
        with tempfile.TemporaryDirectory(prefix=f"lineage-lab-{bundle.name}-") as tmp:
            _run_maven(bundle, _maven_command(bundle, Path(tmp), staging), staging, log)
    else:
        for coordinate in bundle.artifacts:
            _fetch_file(coordinate, staging, bundle.unpack, log, bundle)
        # vendored files that are no Maven artifact (nothing to try on Central first)
        from_maven = {c.file_name for c in bundle.artifacts}
        for file_name, _ in bundle.sha256:
            if file_name not in from_maven:
                log(f"    {file_name}: from the vendor folder (not published on Maven Central)")
                _place(_vendored(bundle, file_name, "not a Maven artifact"), staging, bundle.unpack)
    (staging / STAMP).write_text(json.dumps({"fingerprint": bundle.fingerprint, "bundle": bundle.name}))
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target


def _maven_command(bundle: Bundle, tmp: Path, out: Path) -> list[str]:
    pom = tmp / "pom.xml"
    pom.write_text(bundle.pom())
    goal = "unpack-dependencies" if bundle.unpack else "copy-dependencies"
    return [
        _mvn(),
        "-B",
        "-f",
        str(pom),
        f"org.apache.maven.plugins:maven-dependency-plugin:3.8.1:{goal}",
        f"-DoutputDirectory={out}",
        "-DincludeScope=runtime",
    ]


def _build_module(bundle: Bundle, out: Path, log: Callable[[str], None]) -> None:
    """Build a Maven module of this repository (its unit tests run too) and take its plugin folder."""
    module = REPO_ROOT / bundle.build
    log(f"    building {bundle.build} with Maven (unit tests included) ...")
    _run_maven(bundle, [_mvn(), "-B", "-f", str(module / "pom.xml"), "clean", "package"], out, log)
    built = module / "target" / "plugin"
    if not built.is_dir():
        raise ArtifactError(f"{bundle.build}: `mvn package` left no target/plugin folder")
    for item in built.iterdir():
        shutil.copy2(item, out / item.name)


def _fetch_file(
    c: Coordinate, out: Path, unpack: bool, log: Callable[[str], None], bundle: Bundle | None = None
) -> None:
    """Fetch one file as published, into Maven's local repository, checked against Central's SHA-1.

    Used for self-contained distributions (transitive = false): Maven's resolver refuses some of them because
    Central lacks their parent POM, although the file itself is there. When Central answers 404 and the bundle
    names a vendor folder, the vendored copy is used after its SHA-256 check.
    """
    rel = f"{c.group.replace('.', '/')}/{c.artifact}/{c.version}/{c.file_name}"
    central = maven_central_url()
    local = Path.home() / ".m2" / "repository" / rel
    if not local.exists():
        log(f"    downloading {c.file_name} ...")
        local.parent.mkdir(parents=True, exist_ok=True)
        partial = local.with_name(local.name + ".part")
        digest = hashlib.sha1()
        try:
            with urllib.request.urlopen(central + rel, timeout=60) as resp, open(partial, "wb") as fh:
                while chunk := resp.read(1 << 20):
                    digest.update(chunk)
                    fh.write(chunk)
            with urllib.request.urlopen(central + rel + ".sha1", timeout=30) as resp:
                expected = resp.read().decode().split()[0].strip()
        except urllib.error.HTTPError as exc:
            partial.unlink(missing_ok=True)
            if exc.code == 404 and bundle is not None and bundle.vendor:
                log(f"    {c.file_name}: not on Maven Central (HTTP 404), taking the vendored copy")
                _place(_vendored(bundle, c.file_name, f"{central}{rel}: HTTP 404"), out, unpack)
                return
            raise ArtifactError(f"cannot download {central}{rel}: {exc}") from exc
        except (urllib.error.URLError, OSError) as exc:
            partial.unlink(missing_ok=True)
            raise ArtifactError(f"cannot download {central}{rel}: {exc}") from exc
        if digest.hexdigest() != expected:
            partial.unlink(missing_ok=True)
            raise ArtifactError(f"{rel}: SHA-1 mismatch (got {digest.hexdigest()}, Central says {expected})")
        partial.rename(local)
    _place(local, out, unpack)


def _place(path: Path, out: Path, unpack: bool) -> None:
    if unpack:
        shutil.unpack_archive(path, out)
    else:
        shutil.copy2(path, out / path.name)


def _run_maven(bundle: Bundle, cmd: list[str], staging: Path, log: Callable[[str], None]) -> None:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=staging.parent)
    assert proc.stdout is not None
    errors: list[str] = []
    downloads = 0
    for line in proc.stdout:
        if line.startswith("Downloaded from"):
            downloads += 1
            if downloads % 25 == 0:
                log(f"    {bundle.name}: {downloads} files downloaded ...")
        elif "[ERROR]" in line:
            errors.append(line.rstrip())
    if proc.wait() != 0:
        shutil.rmtree(staging, ignore_errors=True)
        detail = "\n".join(errors[:8]) or "(no [ERROR] lines; rerun the command by hand)"
        raise ArtifactError(
            f"Maven could not resolve bundle {bundle.name!r} from infra/artifacts.toml:\n{detail}\n"
            f"Command: {' '.join(cmd)}"
        )


def resolve_all(
    jars_dir: Path, names: Iterable[str] | None = None, log: Callable[[str], None] = print
) -> dict[str, Path]:
    """Resolve the named bundles (all by default), printing one progress line per bundle (one line in all when
    every one is resolved already)."""
    bundles = load_manifest()
    wanted = list(names) if names else list(bundles)
    unknown = [n for n in wanted if n not in bundles]
    if unknown:
        raise ArtifactError(f"unknown bundle(s) {unknown}; the manifest has {sorted(bundles)}")
    todo = [bundles[n] for n in wanted if not is_resolved(jars_dir, bundles[n])]
    if not todo:  # one line, not one per bundle
        log(f"JVM artifacts: all {len(wanted)} bundle(s) resolved in {jars_dir} (infra/artifacts.toml)")
        return {name: bundle_dir(jars_dir, name) for name in wanted}
    check_maven_central()
    out: dict[str, Path] = {}
    for i, name in enumerate(wanted, 1):
        bundle = bundles[name]
        state = "cached" if bundle not in todo else "resolving"
        log(f"[{i}/{len(wanted)}] {name}: {state} ({len(bundle.artifacts)} artifact(s)) - {bundle.purpose}")
        out[name] = resolve_bundle(jars_dir, bundle, log)
    return out


def classpath(jars_dir: Path, *names: str) -> str:
    """A java -cp value of the named bundles, failing clearly if one has not been resolved yet."""
    parts = []
    bundles = load_manifest()
    for name in names:
        if not is_resolved(jars_dir, bundles[name]):
            raise ArtifactError(f"bundle {name!r} is not resolved in {jars_dir}; run `lineage-lab artifacts resolve`")
        parts.append(str(bundle_dir(jars_dir, name) / "*"))
    return ":".join(parts)


if __name__ == "__main__":  # pragma: no cover - convenience
    resolve_all(Path(sys.argv[1]))

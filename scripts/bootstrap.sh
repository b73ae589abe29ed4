#!/usr/bin/env bash
# Installs everything lineage-lab needs on a fresh Debian machine, idempotently:
#   system packages (Java 17 JDK, Maven, PostgreSQL, Node.js, Chromium, acl), the Dagster venv (.venv), the PyFlink venv
#   (.venv-flink) and the JVM artifacts of infra/artifacts.toml (resolved by Maven into ~/.cache/lineage-lab/jars).
# Re-running it only does what changed. Both README commands call it first.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

say() { printf '\033[1m[bootstrap]\033[0m %s\n' "$*"; changed=1; }
changed=0  # anything installed: a run with nothing to do prints one line (the artifacts')
die() { printf '\033[31m[bootstrap] %s\033[0m\n' "$*" >&2; exit 1; }

# --- system packages ------------------------------------------------------------------------------------------
missing=()
command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)  # javac: the catalog launcher
command -v mvn >/dev/null 2>&1 || missing+=(maven)
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing+=(postgresql)
command -v node >/dev/null 2>&1 || missing+=(nodejs)  # Marquez's web UI server
command -v chromium >/dev/null 2>&1 || missing+=(chromium)  # the UI tests' browser (Playwright drives it)
command -v setfacl >/dev/null 2>&1 || missing+=(acl)  # lets the postgres OS user reach a data dir under /root etc.
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    die "missing system packages: ${missing[*]}. Install them (sudo apt-get install -y ${missing[*]}) and rerun."
  fi
  say "installing system packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# --- Python environments --------------------------------------------------------------------------------------
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' \
  || die "Python 3.11 is required (found $("$PYTHON" --version 2>&1)); set PYTHON=/path/to/python3.11"
if ! "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1; then
  [[ $(id -u) -eq 0 ]] || die "Python's venv module is missing: sudo apt-get install -y python3-venv, then rerun"
  say "installing python3-venv"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
fi

# Each venv is installed by uv (from PyPI, its version pinned here) with its lock as constraints: requirements.lock
# and flink_jobs/requirements.lock pin the whole dependency set (`uv pip compile`, the command in each file's header;
# tests/unit/scripts/test_locks.py holds them to the pins of pyproject.toml and flink_jobs/requirements.txt), so a new
# machine installs the versions CI ran. uv's cache first (--offline: seconds, where pip took a minute a venv); PyPI
# when the cache lacks something (a new machine, a changed lock). The cache is only a faster source of the same pins.
UV_VERSION=0.13.9
# uv installs no bytecode, and where PYTHONDONTWRITEBYTECODE is set (as on CI's machine) no import writes any either:
# then every Python process (each CLI call, Dagster run worker, PyFlink client) compiled some 1,600 modules again,
# 2.5 s of a 4.5 s `lineage-lab reconcile`. So each venv's site-packages is compiled once, when it is installed; the
# project's own source is left to the user's setting. Bump BYTECODE to compile existing venvs again.
BYTECODE=1
# venv <dir> <lock> <uv pip install args...>: (re)install only when the lock or what it pins from changed
venv() {
  local dir=$1 lock=$2; shift 2
  local stamp="$dir/.lineage-lab-stamp" want uv=(uv pip install -q --python "$dir/bin/python" -c "$lock")
  want=$({ echo "bytecode $BYTECODE"; cat "$lock" "${stamp_sources[@]}"; } | sha256sum | cut -d' ' -f1)
  if [[ -f $stamp && $(cat "$stamp") == "$want" ]]; then return 0; fi
  say "installing $dir from $lock"
  [[ -x $dir/bin/python ]] || "$PYTHON" -m venv "$dir"
  if [[ $("$dir/bin/uv" --version 2>/dev/null) != "uv $UV_VERSION"* ]]; then
    "$dir/bin/python" -m pip install -q --disable-pip-version-check "uv==$UV_VERSION"
  fi
  uv[0]="$dir/bin/uv"
  "${uv[@]}" --offline "$@" 2>/dev/null || "${uv[@]}" "$@"
  # (a file that does not compile, e.g. a package's template, only stays slower to import: said, not fatal)
  "$dir/bin/python" -m compileall -q -j 0 "$("$dir/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
    >"$dir/.lineage-lab-compileall.log" 2>&1 || say "some files in $dir did not compile to bytecode (see $dir/.lineage-lab-compileall.log): imports of those stay slower"
  echo "$want" >"$stamp"
}
stamp_sources=(pyproject.toml)
venv "$ROOT/.venv" requirements.lock -e "$ROOT[dev]"
stamp_sources=(flink_jobs/requirements.txt)
venv "${LINEAGE_LAB_FLINK_VENV:-$ROOT/.venv-flink}" flink_jobs/requirements.lock -r flink_jobs/requirements.txt

# --- JVM artifacts --------------------------------------------------------------------------------------------
"$ROOT/.venv/bin/lineage-lab" artifacts resolve  # a line per bundle it resolves; one line when all are
if ((changed)); then say "done"; fi

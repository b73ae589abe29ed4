#!/usr/bin/env bash
# lineage-lab.env: the deployment's secrets, never committed. Kept when it exists (its passwords are those of the
# data in the volumes); else written from lineage-lab.env.example with a random value for every `change-me`.
set -euo pipefail
cd "$(dirname "$0")"
[[ -s lineage-lab.env ]] && exit 0
printf '\033[1m[compose]\033[0m %s\n' "writing lineage-lab.env with random secrets (keep it while you keep the volumes)"
umask 077
secret() { head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 24; }
while IFS= read -r line; do
  [[ $line == *=change-me ]] && line="${line%=change-me}=$(secret)"
  printf '%s\n' "$line"
done <lineage-lab.env.example >lineage-lab.env

#!/usr/bin/env bash
# Re-records this study: starts four fio servers on 127.0.0.2-5 (port 8765), runs
# `benchlib run plan.toml` (about 8 minutes; resumable: run it again after an
# interruption) and stops the servers. fio writes only to the files benchlib creates
# under /var/tmp/benchlib-loopback/ (4 x 256 MiB); remove that folder afterwards.
# To record afresh, first move this folder's results away (keep plan.toml, record.sh, README.md).
set -euo pipefail
cd "$(dirname "$0")"
benchlib=${BENCHLIB:-../../../.venv/bin/benchlib}
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
for host in 127.0.0.2 127.0.0.3 127.0.0.4 127.0.0.5; do
  fio --server="ip:$host,8765" >/dev/null 2>&1 &
  pids+=($!)
done
sleep 1
"$benchlib" run plan.toml "$@"

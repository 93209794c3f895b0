#!/usr/bin/env bash
# Re-records this sample study with the fio on PATH (recorded with fio-3.33 on Debian 12,
# a 2-core VM, ext4 on virtio disk). Runs take about 30 s and write a 64 MiB scratch file
# that this script creates and removes; nothing else is written outside this folder.
set -euo pipefail
cd "$(dirname "$0")"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
common=(--filename="$scratch/target" --size=64M --ioengine=psync --runtime=3 --time_based
        --ramp_time=1 --numjobs=2 --group_reporting)
for bs in 4k 64k; do
  for rep in 1 2 3; do
    mkdir -p "bs-$bs"
    fio --name="randread-$bs" --rw=randread --bs="$bs" "${common[@]}" \
        --output-format=json+ --output="bs-$bs/randread-rep$rep.json"
  done
done
# One run in every output form fio has, with per-second logs and a histogram log.
mkdir -p formats
( cd formats
  fio --name=randrw-4k --rw=randrw --rwmixread=70 --bs=4k --filename="$scratch/target" --size=64M \
      --ioengine=psync --runtime=3 --time_based --numjobs=2 \
      --write_bw_log=randrw --write_iops_log=randrw --write_lat_log=randrw --log_avg_msec=1000 \
      --write_hist_log=randrw --log_hist_msec=1000 \
      --output-format=json+,normal,terse --output=randrw-4k.out )

#!/usr/bin/env bash
# The claim of a partition whose state names 10,000 files, against the S3
# server of infra/ (make bench-claim): the server is started (and left
# running), the files are made once under bench-claim-10000/ of its scratch
# bucket, and BenchmarkClaim reports the time of one claim (ms/claim).
#
# usage: infra/bench-claim.sh
set -euo pipefail
source "$(dirname "$0")/lib.sh"
"$INFRA_DIR/install.sh" >/dev/null
"$INFRA_DIR/start.sh" s3
cd "$REPO_DIR"
CDCLAKE_TEST_S3_URL="s3://scratch?endpoint=http://$HOST:$S3_PORT&use_path_style=true&disable_https=true&region=us-east-1" \
  AWS_ACCESS_KEY_ID=$S3_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$S3_SECRET_KEY AWS_REGION=us-east-1 \
  go test -run '^$' -bench '^BenchmarkClaim$' -benchtime 5x ./pipelines/

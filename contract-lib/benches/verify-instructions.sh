#!/usr/bin/env bash
# Instructions per call of verify, the pre-keyed HMAC floor and the bare HMAC, counted with
# callgrind (repeatable on a busy machine, unlike timings), and the ratios the verify bench
# prints. Needs valgrind. Each case runs twice, N and 0 times, so that start-up cancels out.
#
# Under valgrind SHA-256 takes its portable path (no SHA extensions), so the HMAC floor costs
# several times its native instructions: the ratios here weigh verify's own work less than a
# native run does. Compare runs of this script with each other, and timings with timings.
#
# Run: contract-lib/benches/verify-instructions.sh [iterations, default 2000]
set -euo pipefail
cd "$(dirname "$0")/../.."

iterations=${1:-2000}
bench=$(cargo bench -p svc-contract --bench verify --no-run --message-format=json 2>/dev/null |
    sed -n 's/.*"executable":"\([^"]*verify-[^"]*\)".*/\1/p' | tail -n 1)
if [ -z "$bench" ]; then
    echo "could not build the verify bench" >&2
    exit 1
fi

count() { # case/body iterations -> instructions of the whole run
    SVC_VERIFY_ONLY=$1 SVC_VERIFY_ITERS=$2 valgrind --tool=callgrind \
        --callgrind-out-file=/dev/null "$bench" 2>&1 |
        sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}

per_call() { # case/body -> instructions per call
    local base loaded
    base=$(count "$1" 0)
    loaded=$(count "$1" "$iterations")
    echo $(((loaded - base) / iterations))
}

printf '%-16s %12s %14s %14s %12s %12s\n' body verify pre-keyed verify/pre-k. bare verify/bare
for body in realistic_453B 100B 1KiB; do
    v=$(per_call "verify/$body")
    p=$(per_call "prekeyed/$body")
    b=$(per_call "bare/$body")
    printf '%-16s %12d %14d %14s %12d %12s\n' "$body" "$v" "$p" \
        "$(awk "BEGIN { printf \"%.3f\", $v / $p }")" "$b" \
        "$(awk "BEGIN { printf \"%.3f\", $v / $b }")"
done

#!/bin/sh
# A study driven only by `tune ask` and `tune tell`, one process per step, the way a user's
# shell script or Makefile drives one:
#
#   ask_tell_study.sh TUNE STORAGE_URL STUDY N_TRIALS single|multi
#
# The objective is computed here with awk from the params that `tune ask --format csv` prints:
#   single: (x - 2)^2 + 0.1 (n - 3)^2 + 0.5 [opt = sgd], minimised;
#   multi:  that value (minimised) and n - |x| (maximised).
# A trial whose x is above 4 is told PRUNED; one whose x is below -4 is told FAIL (a crashed
# run). Everything else is COMPLETE.
set -eu
TUNE=$1
STORAGE=$2
STUDY=$3
N=$4
MODE=$5

SPACE='{"x": {"name": "FloatDistribution", "attributes": {"step": null, "low": -5.0, "high": 5.0, "log": false}},
        "n": {"name": "IntDistribution", "attributes": {"log": false, "step": 1, "low": 1, "high": 8}},
        "opt": {"name": "CategoricalDistribution", "attributes": {"choices": ["adam", "sgd"]}}}'

if [ "$MODE" = multi ]; then
  "$TUNE" create-study --study-name "$STUDY" --storage "$STORAGE" \
    --directions minimize maximize --skip-if-exists --log-level warn
else
  "$TUNE" create-study --study-name "$STUDY" --storage "$STORAGE" \
    --direction minimize --skip-if-exists --log-level warn
fi

# The column KEY of `tune ask --format csv` (a header line, then one line of values).
field() {
  printf '%s\n' "$ASKED" | awk -F, -v k="$1" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == k) c = i }
                                               NR == 2 { print $c }'
}

i=0
while [ "$i" -lt "$N" ]; do
  ASKED=$("$TUNE" ask --study-name "$STUDY" --storage "$STORAGE" --search-space "$SPACE" \
            --sampler TPESampler --sampler-kwargs '{"n_startup_trials": 5}' --seed 11 \
            --format csv --log-level warn)
  number=$(field number)
  x=$(field params_x)
  n=$(field params_n)
  opt=$(field params_opt)
  outcome=$(awk -v x="$x" 'BEGIN { print (x > 4) ? "pruned" : (x < -4) ? "fail" : "complete" }')
  if [ "$outcome" != complete ]; then
    "$TUNE" tell --study-name "$STUDY" --storage "$STORAGE" --trial-number "$number" \
      --state "$outcome" --log-level warn
  else
    v1=$(awk -v x="$x" -v n="$n" -v o="$opt" \
           'BEGIN { printf "%.12g", (x - 2) ^ 2 + 0.1 * (n - 3) ^ 2 + (o == "sgd" ? 0.5 : 0) }')
    if [ "$MODE" = multi ]; then
      v2=$(awk -v x="$x" -v n="$n" 'BEGIN { printf "%.12g", n - (x < 0 ? -x : x) }')
      "$TUNE" tell --study-name "$STUDY" --storage "$STORAGE" --trial-number "$number" \
        --values "$v1" "$v2" --log-level warn
    else
      "$TUNE" tell --study-name "$STUDY" --storage "$STORAGE" --trial-number "$number" \
        --values "$v1" --log-level warn
    fi
  fi
  i=$((i + 1))
done

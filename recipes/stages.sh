# Sourced by recipes/*/run.sh: the stage helpers every recipe shares (like Kaldi's utils/parse_options.sh).
# run_stage N        true when stage N is inside --stage .. --stop-stage
# done_or MARKER     true when the stage must run (its .done marker is absent); says so when it is skipped
run_stage() { [ "$1" -ge "$stage" ] && [ "$1" -le "$stop_stage" ]; }
done_or() {
  if [ -f "$1" ]; then echo "  (done: $1)"; return 1; fi
  return 0
}

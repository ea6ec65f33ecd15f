#!/usr/bin/env bash
# CMU AN4 (real read speech): prepare, then recipes/template/run.sh on the prepared dirs (speed perturbation
# -> fbank -> tokenizer + LM -> BLSTM CTC + attention -> decode -> WER/CER -> packed model).
#
#   bash recipes/an4/run.sh AN4_DIR [--dev-utts N (100)] [--work DIR] [--stage N] [--stop-stage N]
#        [any option of recipes/template/run.sh: --config, --fbank-conf, --set key=value, --seed, --tag,
#         --decode-sets, --factors, --vocab-size, --lm-weights, --word-bonuses, --oov-penalties,
#         --att-weights, --nj, --dump]
#
# AN4_DIR is CMU's an4_sphere.tar.gz unpacked (it holds etc/ and wav/; download it from CMU). Splits as
# ESPnet's egs2/an4: train = the training list minus dev, dev = its first 100 utterances (sorted ids),
# test = every test utterance with a transcript.
#
# Stages: 0 prepares the corpus into data/{train,dev,test} (asrtrain prepare an4); 1-7 are the template's
# (recipes/template/run.sh --help) with AN4's choices, each made on dev (recipes/an4/README.md):
# conf/train.yaml, conf/fbank.yaml (16 kHz, dither 1.0, per-speaker CMVN), speed factors 0.8 ... 1.2
# (choice 8), 30 unigram pieces (choice 7). Everything is written below --work (default: the recipe dir).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
an4_dir=
stage=0
stop_stage=100
work=$here
dev_utts=100
pass=()

while [ $# -gt 0 ]; do
  case "$1" in
    --stage) stage=$2; shift 2 ;;
    --stop-stage|--stop_stage) stop_stage=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --dev-utts) dev_utts=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    -*) if [ $# -lt 2 ]; then echo "run.sh: $1 needs a value (see --help)" >&2; exit 1; fi
        pass+=("$1" "$2"); shift 2 ;;
    *) if [ -z "$an4_dir" ]; then an4_dir=$1; shift; else echo "run.sh: unexpected argument $1" >&2; exit 1; fi ;;
  esac
done

asrtrain=${ASRTRAIN:-asrtrain}
data=$work/data
mkdir -p "$work"

. "$here/../stages.sh"  # run_stage, done_or

if run_stage 0; then
  echo "stage 0: prepare AN4 from ${an4_dir:-?}"
  if done_or "$data/.stage0.done"; then
    if [ -z "$an4_dir" ]; then echo "run.sh: give AN4_DIR (CMU's an4_sphere, unpacked)" >&2; exit 1; fi
    $asrtrain prepare an4 "$an4_dir" "$data" --dev-utts "$dev_utts"
    touch "$data/.stage0.done"
  fi
fi
if [ ! -f "$data/.stage0.done" ]; then
  echo "run.sh: AN4 is not prepared in $data (run stage 0: give AN4_DIR)" >&2; exit 1
fi

# AN4's choices first; the caller's options come after them and win.
exec bash "$here/../template/run.sh" --train "$data/train" --dev "$data/dev" --test "$data/test" \
  --work "$work" --stage "$stage" --stop-stage "$stop_stage" \
  --config "$here/conf/train.yaml" --fbank-conf "$here/conf/fbank.yaml" \
  --factors 0.8,0.9,1.0,1.1,1.2 --vocab-size 30 "${pass[@]}"

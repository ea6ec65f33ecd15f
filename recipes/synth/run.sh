#!/usr/bin/env bash
# The embedded synthetic recipe: espeak-ng speech -> fbank -> sentencepiece -> BLSTM-CTC -> decode -> WER.
#
#   bash recipes/synth/run.sh [--stage N] [--stop-stage N] [--hours H] [--nj N] [--strategy S --learners N]
#        [--strategy-config FILE] [--set section.key=value] [--vocab-size 150] [--tag NAME]
#        [--decode-sets "dev test"]
#   e.g. --strategy adpsgd --learners 2 --strategy-config recipes/synth/conf/strategy/adpsgd-dp.yaml
#   (--strategy and --learners win over the file's dist.strategy / dist.learners: give both)
#
# Stages (each skipped when its .done marker exists; delete the marker to redo it):
#   0  synthesise the corpus            data/{train,dev,test}     (asrtrain prepare synth)
#   1  features + CMVN                  dump/{train,dev,test}     (asrtrain features)
#   2  tokenizer and word trigram LM    exp/tokenizer exp/lm      (asrtrain tokenizer train, lm train)
#   3  train the BLSTM-CTC model        exp/TAG (default blstm)   (asrtrain train)
#   4  decode dev and test (LM fused)   exp/TAG/decode_{dev,test}
#   5  score                            WER table (last line: test)
# While choosing anything (epochs, sizes, LM weights), run with --decode-sets dev and a --tag per try.
# Everything is written below the recipe dir (or --work DIR). The shell only sequences asrtrain calls.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
stage=0
stop_stage=100
hours=6  # chosen on dev over 4 h x 6 and 4 h x 9 epochs, 3 seeds each (docs/results/index.md)
vocab_size=150
seed=1
nj=2
work=$here
config=$here/conf/train.yaml
fbank_conf=$here/conf/fbank.yaml
strategy=single
learners=1
tag=blstm
decode_sets="dev test"
extra=()

while [ $# -gt 0 ]; do
  case "$1" in
    --stage) stage=$2; shift 2 ;;
    --stop-stage|--stop_stage) stop_stage=$2; shift 2 ;;
    --hours) hours=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --nj) nj=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --config) config=$2; shift 2 ;;
    --vocab-size) vocab_size=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    --decode-sets) decode_sets=$2; shift 2 ;;
    --strategy) strategy=$2; shift 2 ;;
    --learners) learners=$2; shift 2 ;;
    --set) extra+=(--set "$2"); shift 2 ;;
    --strategy-config) extra+=(--strategy-config "$2"); shift 2 ;;  # e.g. conf/strategy/adpsgd-dp.yaml
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option $1 (see --help)" >&2; exit 1 ;;
  esac
done

asrtrain=${ASRTRAIN:-asrtrain}
data=$work/data
dump=$work/dump
exp=$work/exp
mkdir -p "$work"

. "$(cd "$(dirname "$0")" && pwd)/../stages.sh"  # run_stage, done_or

if run_stage 0; then
  echo "stage 0: synthesise ${hours} h of training speech"
  if done_or "$data/.stage.done"; then
    $asrtrain prepare synth "$data" --hours "$hours" --seed "$seed" --nj "$nj"
    for part in train dev test; do $asrtrain data validate "$data/$part"; done
    touch "$data/.stage.done"
  fi
fi

if run_stage 1; then
  echo "stage 1: fbank features and CMVN"
  for part in train dev test; do
    if done_or "$dump/$part/.stage.done"; then
      $asrtrain features "$data/$part" "$dump/$part" --nj "$nj" --conf "$fbank_conf"
      touch "$dump/$part/.stage.done"
    fi
  done
fi

if run_stage 2; then
  echo "stage 2: tokenizer and language model"
  if done_or "$exp/tokenizer/.done"; then
    $asrtrain tokenizer train --text "$data/train/text" --out "$exp/tokenizer" --model-type unigram --vocab-size "$vocab_size"
    touch "$exp/tokenizer/.done"
  fi
  if done_or "$exp/lm/.done"; then
    $asrtrain lm train --text "$data/train/text" --out "$exp/lm" --order 3
    touch "$exp/lm/.done"
  fi
fi

if run_stage 3; then
  echo "stage 3: train ($strategy, $learners learner(s))"
  if done_or "$exp/$tag/.done"; then
    resume=()
    [ -f "$exp/$tag/checkpoints/latest" ] && resume=(--resume)
    $asrtrain train --config "$config" --train-data "$dump/train" --dev-data "$dump/dev" \
      --tokenizer "$exp/tokenizer/tokenizer.model" --exp-dir "$exp/$tag" \
      --strategy "$strategy" --learners "$learners" "${resume[@]}" "${extra[@]}"
    touch "$exp/$tag/.done"
  fi
fi

if run_stage 4; then
  echo "stage 4: decode"
  for part in $decode_sets; do
    if done_or "$exp/$tag/decode_$part/.done"; then
      $asrtrain decode "$exp/$tag" "$dump/$part" "$exp/$tag/decode_$part" --lm "$exp/lm/lm.arpa"
      touch "$exp/$tag/decode_$part/.done"
    fi
  done
fi

if run_stage 5; then
  echo "stage 5: score"
  for part in $decode_sets; do
    $asrtrain score "$data/$part/text" "$exp/$tag/decode_$part/text" --name "$part" \
      --out-dir "$exp/$tag/decode_$part/scoring"
  done
fi

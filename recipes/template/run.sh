#!/usr/bin/env bash
# Your own corpus, already in Kaldi data dirs: validate -> speed perturbation -> fbank -> tokenizer + LM ->
# BLSTM (CTC + attention) -> decode -> WER/CER -> a packed model that `asrtrain transcribe` reads.
#
#   bash recipes/template/run.sh --train DIR --dev DIR [--test DIR] [--lm-text FILE] [--work DIR]
#        [--stage N] [--stop-stage N] [--config YAML] [--fbank-conf YAML] [--set key=value ...] [--nj N]
#        [--seed N] [--tag NAME] [--decode-sets "dev test"] [--factors 0.9,1.0,1.1 | 1.0]
#        [--vocab-size N (100)] [--lm-order N (3)] [--lm-weights 0.3,0.5,0.8,1.2] [--word-bonuses 0,1,2,3]
#        [--oov-penalties closed] [--att-weights auto] [--dump DIR]
#
# DIR: a Kaldi data dir (wav.scp, utt2spk, spk2utt, text; segments optional; `asrtrain data validate` and
# `asrtrain data fix` check and repair one). --lm-text: a Kaldi text file (<utt-id> <words...>) for the word
# LM (default: the training transcripts). --factors 1.0 turns speed perturbation off. Without --fbank-conf
# the features follow the training audio's sample rate: conf/fbank_16k.yaml at 16 kHz and above,
# conf/fbank_8k.yaml below (other rates are resampled to the chosen one). --config defaults to
# conf/train.yaml (AN4's tuned model, sized for a few hours of speech).
#
# Stages (each skipped when its .done marker exists; delete the marker to redo it):
#   0  validate the data dirs (audio too when stages 1-2 will run)      (asrtrain data validate)
#   1  speed perturbation (--factors)      data/train_sp                (asrtrain data perturb-speed)
#   2  features + CMVN                     dump/{train_sp|train,dev,test} (asrtrain features)
#   3  tokenizer and word n-gram LM        exp/tokenizer exp/lm         (asrtrain tokenizer train, lm train)
#   4  train                               exp/TAG                      (asrtrain train; resumes itself)
#   5  decode greedy; choose the LM weight, word bonus and attention rescoring weight on dev
#      (exp/TAG/tune_lm_dev); decode with the lexicon + LM at those settings  (asrtrain decode, tune-lm)
#   6  score WER and CER: a %WER and a %CER line for each decoded set (asrtrain score)
#   7  pack the model with its LM and tuned parameters: exp/TAG/pack    (asrtrain pack)
#
# Discipline: every choice is made on dev (run with --decode-sets dev while you tune); decode test once.
# Everything is written below --work (default: the current directory). The shell only sequences asrtrain
# calls; recipes/an4/run.sh is this script after its own stage 0 (preparing AN4).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
train_dir=
dev_dir=
test_dir=
lm_text=
stage=0
stop_stage=100
nj=2
seed=1
work=$PWD
config=$here/conf/train.yaml
fbank_conf=
decode_sets=
tag=blstm
factors=0.9,1.0,1.1
vocab_size=100
lm_order=3
lm_weights=0.3,0.5,0.8,1.2
word_bonuses=0,1,2,3
oov_penalties=closed
att_weights=auto  # tune-lm's rescoring weights: 0,0.5,1,2 for a model with an attention decoder, else 0
dump=
extra=()

usage() { sed -n '2,30p' "$here/run.sh"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --train) train_dir=$2; shift 2 ;;
    --dev) dev_dir=$2; shift 2 ;;
    --test) test_dir=$2; shift 2 ;;
    --lm-text) lm_text=$2; shift 2 ;;
    --stage) stage=$2; shift 2 ;;
    --stop-stage|--stop_stage) stop_stage=$2; shift 2 ;;
    --nj) nj=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --config) config=$2; shift 2 ;;
    --fbank-conf) fbank_conf=$2; shift 2 ;;
    --dump) dump=$2; shift 2 ;;
    --decode-sets) decode_sets=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    --factors) factors=$2; shift 2 ;;
    --vocab-size) vocab_size=$2; shift 2 ;;
    --lm-order) lm_order=$2; shift 2 ;;
    --lm-weights) lm_weights=$2; shift 2 ;;
    --word-bonuses) word_bonuses=$2; shift 2 ;;
    --oov-penalties) oov_penalties=$2; shift 2 ;;
    --att-weights) att_weights=$2; shift 2 ;;
    --set) extra+=(--set "$2"); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run.sh: unknown option $1 (see --help)" >&2; exit 1 ;;
  esac
done

for opt in train dev; do
  v=${opt}_dir
  if [ -z "${!v}" ]; then echo "run.sh: give --$opt DIR (a Kaldi data dir; see --help)" >&2; exit 1; fi
done
[ -n "$decode_sets" ] || decode_sets="dev${test_dir:+ test}"
if [[ " $decode_sets " == *" test "* ]] && [ -z "$test_dir" ]; then
  echo "run.sh: --decode-sets names test but no --test DIR was given" >&2; exit 1
fi
lm_text=${lm_text:-$train_dir/text}

asrtrain=${ASRTRAIN:-asrtrain}
data=$work/data
dump=${dump:-$work/dump}  # --dump: features made with another --fbank-conf live beside the default ones
exp=$work/exp
mkdir -p "$work"

. "$here/../stages.sh"  # run_stage, done_or

set_dir() {  # the data dir of a set: train (as given), dev, test
  case "$1" in dev) echo "$dev_dir" ;; test) echo "$test_dir" ;; *) echo "$train_dir" ;; esac
}
if [ "$factors" = "1.0" ] || [ "$factors" = "1" ]; then
  train_set=train; train_src=$train_dir
else
  train_set=train_sp; train_src=$data/train_sp
fi

echo "stage 0: validate the data dirs"
audio=--no-audio
if run_stage 1 || run_stage 2; then audio=; fi
for part in train dev ${test_dir:+test}; do
  $asrtrain data validate $audio "$(set_dir "$part")"
done
if [ ! -f "$lm_text" ]; then echo "run.sh: --lm-text $lm_text: no such file" >&2; exit 1; fi

if run_stage 1 && [ "$train_set" = train_sp ]; then
  echo "stage 1: speed perturbation ($factors)"
  if done_or "$data/train_sp/.stage.done"; then
    $asrtrain data perturb-speed "$train_dir" "$data/train_sp" --factors "$factors"
    touch "$data/train_sp/.stage.done"
  fi
fi

if run_stage 2; then
  if [ -z "$fbank_conf" ]; then
    rate=$($asrtrain data info "$train_dir" --key sample_rate)
    if [ "$rate" -ge 16000 ]; then fbank_conf=$here/conf/fbank_16k.yaml; else fbank_conf=$here/conf/fbank_8k.yaml; fi
    echo "stage 2: fbank features and CMVN (training audio at $rate Hz: $(basename "$fbank_conf"))"
  else
    echo "stage 2: fbank features and CMVN ($fbank_conf)"
  fi
  for part in $train_set dev ${test_dir:+test}; do
    src=$(set_dir "$part"); [ "$part" = train_sp ] && src=$train_src
    if done_or "$dump/$part/.stage.done"; then
      $asrtrain features "$src" "$dump/$part" --nj "$nj" --conf "$fbank_conf"
      touch "$dump/$part/.stage.done"
    fi
  done
fi

if run_stage 3; then
  echo "stage 3: tokenizer and language model"
  if done_or "$exp/tokenizer/.done"; then
    $asrtrain tokenizer train --text "$train_dir/text" --out "$exp/tokenizer" --model-type unigram \
      --vocab-size "$vocab_size"
    touch "$exp/tokenizer/.done"
  fi
  if done_or "$exp/lm/.done"; then
    $asrtrain lm train --text "$lm_text" --out "$exp/lm" --order "$lm_order"
    touch "$exp/lm/.done"
  fi
fi

if run_stage 4; then
  echo "stage 4: train ($tag, seed $seed)"
  if done_or "$exp/$tag/.done"; then
    resume=()
    [ -f "$exp/$tag/checkpoints/latest" ] && resume=(--resume)
    $asrtrain train --config "$config" --train-data "$dump/$train_set" --dev-data "$dump/dev" \
      --tokenizer "$exp/tokenizer/tokenizer.model" --exp-dir "$exp/$tag" \
      --set train.seed="$seed" "${resume[@]}" "${extra[@]}"
    touch "$exp/$tag/.done"
  fi
fi

if run_stage 5; then
  echo "stage 5: decode ($decode_sets)"
  for part in $decode_sets; do
    if done_or "$exp/$tag/decode_greedy_$part/.done"; then
      $asrtrain decode "$exp/$tag" "$dump/$part" "$exp/$tag/decode_greedy_$part" --method greedy
      touch "$exp/$tag/decode_greedy_$part/.done"
    fi
  done
  # The LM weight, word bonus and rescoring weight: a grid searched on dev only, then used on every set.
  if done_or "$exp/$tag/tune_lm_dev/.done"; then
    $asrtrain tune-lm "$exp/$tag" "$dump/dev" "$exp/$tag/tune_lm_dev" --lm "$exp/lm/lm.arpa" \
      --lm-weights "$lm_weights" --word-bonuses "$word_bonuses" --oov-penalties "$oov_penalties" \
      --att-weights "$att_weights"
    touch "$exp/$tag/tune_lm_dev/.done"
  fi
  for part in $decode_sets; do
    if done_or "$exp/$tag/decode_lm_$part/.done"; then
      $asrtrain decode "$exp/$tag" "$dump/$part" "$exp/$tag/decode_lm_$part" --lm "$exp/lm/lm.arpa" \
        --params "$exp/$tag/tune_lm_dev/best.yaml"
      touch "$exp/$tag/decode_lm_$part/.done"
    fi
  done
fi

if run_stage 6; then
  echo "stage 6: score"
  for search in greedy lm; do
    for part in $decode_sets; do
      $asrtrain score "$(set_dir "$part")/text" "$exp/$tag/decode_${search}_$part/text" --cer \
        --name "${tag}_${search}_$part" --out-dir "$exp/$tag/decode_${search}_$part/scoring"
    done
  done
fi

if run_stage 7; then
  echo "stage 7: pack"
  if done_or "$exp/$tag/.pack.done"; then
    rm -rf "$exp/$tag/pack"  # packed before an interrupt, but not marked (pack itself writes atomically)
    $asrtrain pack "$exp/$tag" "$exp/$tag/pack" --lm "$exp/lm/lm.arpa" --params "$exp/$tag/tune_lm_dev/best.yaml"
    touch "$exp/$tag/.pack.done"
  fi
  echo "packed model: $exp/$tag/pack (asrtrain transcribe $exp/$tag/pack AUDIO...)"
fi

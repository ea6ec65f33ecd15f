#!/usr/bin/env bash
# CMU AN4 (real read speech): prepare -> speed perturbation -> fbank -> tokenizer + LM -> BLSTM-CTC -> decode -> WER/CER.
#
#   bash recipes/an4/run.sh AN4_DIR [--stage N] [--stop-stage N] [--work DIR] [--config YAML] [--nj N]
#                           [--seed N] [--decode-sets "dev test"] [--tag NAME] [--set key=value ...]
#                           [--fbank-conf YAML] [--dump DIR]
#                           [--factors 0.8,0.9,1.0,1.1,1.2] [--vocab-size N (30)] [--dev-utts N]
#                           [--lm-weights 0.3,0.5,0.8,1.2] [--word-bonuses 0,1,2,3] [--oov-penalties closed]
#                           [--att-weights auto] (attention rescoring weights tried on dev; auto:
#                           0,0.5,1,2 for a model trained with model.att_weight > 0, else 0)
#
# AN4_DIR is CMU's an4_sphere.tar.gz unpacked (it holds etc/ and wav/; download it from CMU). Splits as
# ESPnet's egs2/an4: train = the training list minus dev, dev = its first 100 utterances (sorted ids),
# test = every test utterance with a transcript.
#
# Stages (each skipped when its .done marker exists; delete the marker to redo it):
#   0  prepare the corpus                 data/{train,dev,test}          (asrtrain prepare an4)
#   1  speed perturbation 0.8 ... 1.2     data/train_sp                  (asrtrain data perturb-speed)
#   2  features + CMVN                    dump/{train_sp,dev,test}       (asrtrain features)
#   3  tokenizer and word trigram LM      exp/tokenizer exp/lm           (asrtrain tokenizer train, lm train)
#   4  train the BLSTM (CTC + attention)  exp/TAG                        (asrtrain train)
#   5  decode greedy; choose the LM weight, word bonus and attention rescoring weight on dev (asrtrain
#      tune-lm, exp/TAG/tune_lm_dev);
#      decode with the lexicon + LM at those settings     exp/TAG/decode_{greedy,lm}_SET (asrtrain decode)
#   6  score WER and CER                  last lines: %WER / %CER of each decoded set
#
# Discipline: every choice (config, tokenizer, epochs, LM weight, beam) is made on dev. While tuning run
# with --decode-sets dev; decode test once, at the end, with the choices fixed (see README.md).
# Everything is written below --work (default: the recipe dir). The shell only sequences asrtrain calls.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
an4_dir=
stage=0
stop_stage=100
nj=2
seed=1
work=$here
config=$here/conf/train.yaml
fbank_conf=$here/conf/fbank.yaml
decode_sets="dev test"
tag=blstm
factors=0.8,0.9,1.0,1.1,1.2  # chosen on dev over 0.9,1.0,1.1 (recipes/an4/README.md, choice 8)
vocab_size=30  # chosen on dev over 60 (recipes/an4/README.md, choice 7)
dev_utts=100
lm_order=3
lm_weights=0.3,0.5,0.8,1.2
word_bonuses=0,1,2,3
oov_penalties=closed  # e.g. closed,-12,-8,-4: tune-lm also tries the open-vocabulary search (README.md)
att_weights=auto  # tune-lm's attention rescoring of the 10-best (choice 11): auto = 0,0.5,1,2 for a joint
                  # CTC/attention model (conf/train.yaml's model.att_weight 0.3), 0 for a CTC-only one
dump=
extra=()

while [ $# -gt 0 ]; do
  case "$1" in
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
    --dev-utts) dev_utts=$2; shift 2 ;;
    --lm-weights) lm_weights=$2; shift 2 ;;
    --word-bonuses) word_bonuses=$2; shift 2 ;;
    --oov-penalties) oov_penalties=$2; shift 2 ;;
    --att-weights) att_weights=$2; shift 2 ;;
    --set) extra+=(--set "$2"); shift 2 ;;
    -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
    -*) echo "run.sh: unknown option $1 (see --help)" >&2; exit 1 ;;
    *) if [ -z "$an4_dir" ]; then an4_dir=$1; shift; else echo "run.sh: unexpected argument $1" >&2; exit 1; fi ;;
  esac
done

asrtrain=${ASRTRAIN:-asrtrain}
data=$work/data
dump=${dump:-$work/dump}  # --dump: features made with another --fbank-conf live beside the default ones
exp=$work/exp
mkdir -p "$work"

. "$(cd "$(dirname "$0")" && pwd)/../stages.sh"  # run_stage, done_or

if run_stage 0; then
  echo "stage 0: prepare AN4 from ${an4_dir:-?}"
  if done_or "$data/.stage0.done"; then
    if [ -z "$an4_dir" ]; then echo "run.sh: give AN4_DIR (CMU's an4_sphere, unpacked)" >&2; exit 1; fi
    $asrtrain prepare an4 "$an4_dir" "$data" --dev-utts "$dev_utts"
    touch "$data/.stage0.done"
  fi
fi

if run_stage 1; then
  echo "stage 1: speed perturbation ($factors)"
  if done_or "$data/train_sp/.stage.done"; then
    $asrtrain data perturb-speed "$data/train" "$data/train_sp" --factors "$factors"
    touch "$data/train_sp/.stage.done"
  fi
fi

if run_stage 2; then
  echo "stage 2: fbank features and CMVN"
  for part in train_sp dev test; do
    if done_or "$dump/$part/.stage.done"; then
      $asrtrain features "$data/$part" "$dump/$part" --nj "$nj" --conf "$fbank_conf"
      touch "$dump/$part/.stage.done"
    fi
  done
fi

if run_stage 3; then
  echo "stage 3: tokenizer and language model"
  if done_or "$exp/tokenizer/.done"; then
    $asrtrain tokenizer train --text "$data/train/text" --out "$exp/tokenizer" --model-type unigram \
      --vocab-size "$vocab_size"
    touch "$exp/tokenizer/.done"
  fi
  if done_or "$exp/lm/.done"; then
    $asrtrain lm train --text "$data/train/text" --out "$exp/lm" --order "$lm_order"
    touch "$exp/lm/.done"
  fi
fi

if run_stage 4; then
  echo "stage 4: train ($tag, seed $seed)"
  if done_or "$exp/$tag/.done"; then
    resume=()
    [ -f "$exp/$tag/checkpoints/latest" ] && resume=(--resume)
    $asrtrain train --config "$config" --train-data "$dump/train_sp" --dev-data "$dump/dev" \
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
  # The LM weight and word bonus: a grid searched on dev only, then used unchanged on every set.
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
      $asrtrain score "$data/$part/text" "$exp/$tag/decode_${search}_$part/text" --cer \
        --name "${tag}_${search}_$part" --out-dir "$exp/$tag/decode_${search}_$part/scoring"
    done
  done
fi

#!/usr/bin/env bash
# Switchboard-300h BLSTM-CTC recipe, scored on Hub5-2000 (SWB, CallHome and all), as Kaldi's egs/swbd/s5c
# prepares the data. This script only sequences `asrtrain` calls; the logic lives in Python.
#
# Corpora (LDC). Set the three paths below, or pass --swbd-dir, --hub5-audio-dir, --hub5-text-dir:
#
#   swbd_dir        Switchboard-1 Release 2, LDC97S62:
#                     $swbd_dir/swb1_d1/data/sw02001.sph ... $swbd_dir/swb1_d4/data/sw04940.sph
#                     (or one or two levels down, e.g. $swbd_dir/swb1_LDC97S62/swb1_d1/...), 2-channel 8 kHz
#                   plus the ISIP/MS-State transcripts (switchboard_word_alignments.tar.gz from
#                   https://www.openslr.org/resources/5, the files Kaldi downloads), unpacked as
#                     $swbd_dir/swb_ms98_transcriptions/20/2001/sw2001A-ms98-a-trans.text ...
#                     $swbd_dir/swb_ms98_transcriptions/sw-ms98-dict.text
#                   (also found in $swbd_dir/transcriptions/ or beside $swbd_dir; or pass --trans-dir)
#   hub5_audio_dir  Hub5-2000 speech, LDC2002S09 (its hub5e_00 directory):
#                     $hub5_audio_dir/english/en_4156.sph ... sw_4940.sph
#                     $hub5_audio_dir/english/hub5e_00.pem
#   hub5_text_dir   Hub5-2000 references, LDC2002T43:
#                     $hub5_text_dir/reference/hub5e00.english.000405.stm
#                     $hub5_text_dir/reference/en20000405_hub5.glm
#                   (or the same under $hub5_text_dir/2000_hub5_eng_eval_tr/)
#   fisher_dirs     optional, for the ~2,000-hour set: Fisher English LDC2004S13 (fe_03_p1_sph1..7),
#                   LDC2005S13 (fe_03_p2_sph1..7 or fisher_eng_tr_sp_d1..7), LDC2004T19 (fe_03_p1_tran),
#                   LDC2005T19 (fe_03_p2_tran); space-separated, e.g.
#                   --fisher-dirs "/c/LDC2004S13 /c/LDC2005S13 /c/LDC2004T19 /c/LDC2005T19".
#                   Training then uses data/train_nodup_fisher.
#
# LDC's .sph files are shorten-compressed: sph2pipe must be on PATH (Kaldi: cd kaldi/tools && make
# sph2pipe) or given with --sph2pipe. A missing or misnamed directory stops stage 0 with the list of
# expected paths.
#
# Stages (each leaves a .done marker next to its output and is skipped while the marker exists):
#   0  data/{train,train_dev,train_nodev,train_nodup} and data/eval2000 (with stm, glm)
#      (+ data/train_fisher and data/train_nodup_fisher with --fisher-dirs)
#   1  fbank at 8 kHz (conf/fbank.yaml) into dump/{train_nodup,train_dev,eval2000}
#   2  BPE tokenizer (2000 pieces) on dump/train_nodup/text -> exp/tokenizer
#   3  train the BLSTM (conf/train_blstm6x512.yaml) with a strategy (conf/strategy/<name>.yaml)
#   4  decode eval2000
#   5  score against the stm through the glm: SWB, CH and all
#
# Usage: ./run.sh [--stage N] [--stop-stage N] [--nj N]
#                 [--strategy single|ssgd|adpsgd|h-adpsgd|adpsgd-dp|periodic|periodic-adaptive]
#                 [--train-config conf/train_blstm4x320.yaml] [--exp exp/blstm] [--sph2pipe PATH]
#                 [--trans-dir DIR] [--swbd-dir DIR] [--hub5-audio-dir DIR] [--hub5-text-dir DIR]
#                 [--fisher-dirs "DIR ..."] [--drop-noise] [--no-acronyms]
# --drop-noise and --no-acronyms go to `asrtrain prepare swbd` (stage 0; delete data/.stage0.done to redo it).
# The asrtrain command is $ASRTRAIN if set (e.g. ASRTRAIN="python -m asrtrain"), else `asrtrain`.
set -euo pipefail

swbd_dir=/export/corpora3/LDC/LDC97S62
hub5_audio_dir=/export/corpora2/LDC/LDC2002S09/hub5e_00
hub5_text_dir=/export/corpora2/LDC/LDC2002T43
trans_dir=
fisher_dirs=
sph2pipe=
prep_flags=()
stage=0
stop_stage=100
nj=4
strategy=adpsgd
train_config=conf/train_blstm6x512.yaml
exp=exp/blstm
asrtrain=${ASRTRAIN:-asrtrain}

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --stage) stage=$2; shift 2 ;;
    --stop-stage|--stop_stage) stop_stage=$2; shift 2 ;;
    --nj) nj=$2; shift 2 ;;
    --strategy) strategy=$2; shift 2 ;;
    --train-config) train_config=$2; shift 2 ;;
    --exp) exp=$2; shift 2 ;;
    --sph2pipe) sph2pipe=$2; shift 2 ;;
    --trans-dir) trans_dir=$2; shift 2 ;;
    --swbd-dir) swbd_dir=$2; shift 2 ;;
    --hub5-audio-dir) hub5_audio_dir=$2; shift 2 ;;
    --hub5-text-dir) hub5_text_dir=$2; shift 2 ;;
    --fisher-dirs) fisher_dirs=$2; shift 2 ;;
    --drop-noise|--no-acronyms) prep_flags+=("$1"); shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "$0: unknown option '$1' (see --help)" >&2; exit 1 ;;
  esac
done
case "$stage$stop_stage" in *[!0-9]*) echo "$0: --stage and --stop-stage take numbers" >&2; exit 1 ;; esac

# Corpus paths are taken relative to where run.sh was called from; everything else (conf/, data/, dump/,
# exp/, --train-config, --exp) is relative to the recipe directory, where the script works.
abspath() { case "$1" in /*|'') echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
swbd_dir=$(abspath "$swbd_dir"); hub5_audio_dir=$(abspath "$hub5_audio_dir")
hub5_text_dir=$(abspath "$hub5_text_dir"); trans_dir=$(abspath "$trans_dir")
case "$sph2pipe" in */*) sph2pipe=$(abspath "$sph2pipe") ;; esac
fisher_abs=()
for d in $fisher_dirs; do fisher_abs+=("$(abspath "$d")"); done
train_set=train_nodup
[ ${#fisher_abs[@]} -gt 0 ] && train_set=train_nodup_fisher
cd "$(dirname "$0")"
log() { echo "$(date '+%Y-%m-%d %H:%M:%S') (run.sh) $*"; }

stage_0() {  # data preparation (Kaldi's swbd1_data_prep.sh, eval2000_data_prep.sh, dev split, nodup)
  # --force: the stage marker decides whether to run, so a run really redoes the work
  local opts=(--force)
  [ -n "$sph2pipe" ] && opts+=(--sph2pipe "$sph2pipe")
  local swbd_opts=("${opts[@]+"${opts[@]}"}")
  [ -n "$trans_dir" ] && swbd_opts+=(--trans-dir "$trans_dir")
  swbd_opts+=("${prep_flags[@]+"${prep_flags[@]}"}")
  $asrtrain prepare swbd "$swbd_dir" data "${swbd_opts[@]+"${swbd_opts[@]}"}"
  $asrtrain prepare eval2000 "$hub5_audio_dir" "$hub5_text_dir" data/eval2000 "${opts[@]+"${opts[@]}"}"
  if [ ${#fisher_abs[@]} -gt 0 ]; then
    $asrtrain prepare fisher "${fisher_abs[@]}" data/train_fisher --combine-with data/train_nodup \
      --combined-dir data/train_nodup_fisher "${opts[@]:1}"
  fi
}

stage_1() {  # features at 8 kHz
  local x
  for x in "$train_set" train_dev eval2000; do
    $asrtrain features "data/$x" "dump/$x" --nj "$nj" --conf conf/fbank.yaml
  done
}

stage_2() {  # tokenizer
  $asrtrain tokenizer train --text "dump/$train_set/text" --model-type bpe --vocab-size 2000 \
    --out exp/tokenizer
}

stage_3() {  # acoustic model
  local strategy_opts=()
  [ "$strategy" != single ] && strategy_opts=(--strategy-config "conf/strategy/$strategy.yaml")
  $asrtrain train --config "$train_config" "${strategy_opts[@]+"${strategy_opts[@]}"}" \
    --train-data "dump/$train_set" --dev-data dump/train_dev \
    --tokenizer exp/tokenizer/tokenizer.model --exp-dir "$exp"
}

stage_4() {  # decode Hub5-2000 (ctm with recording-relative times)
  $asrtrain decode "$exp" dump/eval2000 "$exp/decode_eval2000"
}

stage_5() {  # Hub5 scoring: SWB, CH and all
  $asrtrain score --stm data/eval2000/stm --ctm "$exp/decode_eval2000/ctm" --glm data/eval2000/glm \
    --out-dir "$exp/decode_eval2000/scoring"
}

markers=(data/.stage0.done dump/.stage1.done exp/tokenizer/.stage2.done "$exp/.stage3.done"
         "$exp/decode_eval2000/.stage4.done" "$exp/decode_eval2000/scoring/.stage5.done")
names=("data preparation" "features" "tokenizer" "training ($strategy)" "decoding" "scoring")

for n in 0 1 2 3 4 5; do
  if [ "$n" -lt "$stage" ] || [ "$n" -gt "$stop_stage" ]; then continue; fi
  marker=${markers[$n]}
  if [ -f "$marker" ]; then
    log "stage $n (${names[$n]}): done already; delete $marker to redo it"
    continue
  fi
  log "stage $n: ${names[$n]}"
  "stage_$n"
  mkdir -p "$(dirname "$marker")"
  touch "$marker"
done
log "finished stages $stage..$([ "$stop_stage" -gt 5 ] && echo 5 || echo "$stop_stage")"

#!/bin/bash
source $(dirname ${BASH_SOURCE[0]})/config_common_8b.sh
export MINIBS=16
export TP=2
export PP=1
export CP=1
export DGXNNODES=2
export FP8=True
if [[ "${LOAD_MINIMAL:-0}" -eq 1 ]]; then
  export TP=8
fi

#!/usr/bin/env bash
# Runs `bash bench/device/check_h200.sh` only where the card that came is an H200 (the card the ResNet-18
# goals are set on); elsewhere prints the card and, with ELSE="command", runs that instead. For calls that ask
# for an H200 and may get an H100: a few seconds of device time when the card is not the one wanted. Stage
# with scripts/stage-device-run.sh --lean, carry .devrun/stage, .devrun/fashion-mnist and
# .devrun/pytorch_baseline.py, run `bash bench/device/if_h200.sh`.
source bench/device/device_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/card.txt
case "$(cat $OUT/card.txt)" in
  *H200*) bash bench/device/check_h200.sh ;;
  *) echo "not an H200"; [ -n "${ELSE:-}" ] && bash -c "$ELSE" ;;
esac

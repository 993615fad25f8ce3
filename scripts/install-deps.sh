#!/usr/bin/env bash
# Installs, from Debian 12 packages only, exactly the build and run dependencies that are missing.
# Idempotent: a second run installs nothing. Needs root (or sudo) only when something is missing.
# Usage: scripts/install-deps.sh [--with-cuda-tools]   (CUDA itself is never installed here)
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  libtbb-dev libxnnpack-dev libpthreadpool-dev libboost-dev libspdlog-dev libfmt-dev
  libgtest-dev zlib1g-dev nlohmann-json3-dev libcli11-dev libturbojpeg0-dev libpng-dev
  dataset-fashion-mnist python3
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"

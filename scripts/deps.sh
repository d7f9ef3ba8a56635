#!/usr/bin/env bash
# Installs the Debian packages levelfeed builds and tests with, when missing.
# Quiet and fast when everything is present (one dpkg-query), so every make
# target can depend on it. Uses sudo when not root.
set -euo pipefail

packages=(
  build-essential pkg-config clang zstd time
  liburing-dev libzstd-dev libturbojpeg0-dev libjpeg62-turbo-dev
  libzmq3-dev libxxhash-dev libjansson-dev
  libopenmpi-dev openmpi-bin
  python3-pil python3-numpy python3-torch
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

if ! command -v apt-get >/dev/null; then
  echo "deps: missing packages ${missing[*]} and no apt-get to install them" >&2
  exit 1
fi
sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2

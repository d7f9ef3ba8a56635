#!/usr/bin/env bash
# Installs the Debian packages levelfeed builds and tests with, when missing.
# Quiet and fast when everything is present (one dpkg-query), so the make
# targets that build and run (all, test, bench, fuzz, demo, install) depend
# on it. Uses sudo when not root.
set -euo pipefail

# libjpeg-dev, not libjpeg62-turbo-dev: Debian's and Ubuntu's libjpeg-turbo
# development packages have different names, and libjpeg-dev pulls in the
# right one on both. libclang-rt-dev: clang's fuzzer and sanitizer runtimes
# (make fuzz), only recommended by clang. procps: pgrep, for the checks that
# no process is left behind.
packages=(
  build-essential pkg-config clang libclang-rt-dev zstd time procps
  liburing-dev libzstd-dev libturbojpeg0-dev libjpeg-dev
  libzmq3-dev libxxhash-dev libjansson-dev zlib1g-dev
  libopenmpi-dev openmpi-bin
  python3-pil python3-numpy python3-torch python3-venv python3-sentencepiece
)

# One dpkg-query for the lot; a package it does not know is missing.
installed=$(dpkg-query -W -f='${Package} ${Status}\n' "${packages[@]}" 2>/dev/null |
  awk '$2 " " $3 " " $4 == "install ok installed" {print $1}' || true)
missing=()
for p in "${packages[@]}"; do
  grep -qxF "$p" <<<"$installed" || missing+=("$p")
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
# Through env: sudo resets the environment, and without a terminal a
# configuration prompt would wait forever.
apt=($sudo env DEBIAN_FRONTEND=noninteractive apt-get)
"${apt[@]}" update -qq
"${apt[@]}" install -y -qq --no-install-recommends "${missing[@]}" >&2

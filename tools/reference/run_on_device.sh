#!/usr/bin/env bash
# strata vs HF transformers on synthetic models, on the GPU machine (transformers is installed there).
#
#   tools/reference/run_on_device.sh [OUT_DIR]        (from the repository root; strata on PATH)
#
# For each case: strata synth -> strata export-hf -> strata logits --all -> compare_hf.py (HF in
# float32, eager attention, on the GPU when there is one). Writes OUT_DIR/<case>/{compare.json,
# *.log} and OUT_DIR/summary.json, prints a summary table, and exits 1 if any case fails or errors.
# OUT_DIR defaults to $OUT (the device tool's output folder), else ./hf-reference-out. Models and
# exports go to $WORK (default /tmp/strata-hfref), which is not copied back.
# NO_HF=1: a dry run without torch/transformers (export checks + the NumPy second opinion only),
# for trying the pipeline on a machine without them.
#
# Tokens: BOS then random ids in [0, vocab), seeded per case; 128 tokens, 160 for the 12-layer
# gemma3 with window 32 (sliding layers wrap their window several times; tiny gemma3's window is 64).
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT_DIR=${1:-${OUT:-$PWD/hf-reference-out}}
WORK=${WORK:-/tmp/strata-hfref}
PY=${PYTHON:-python3}
STRATA=${STRATA:-strata}
mkdir -p "$OUT_DIR" "$WORK"

if ! command -v "$STRATA" >/dev/null; then
  echo "run_on_device: '$STRATA' is not on PATH (unpack the bundle and export PATH=/tmp/b/bin:\$PATH)" >&2
  exit 2
fi
NO_HF=${NO_HF:-0}
CHECK_ONLY=()
if [ "$NO_HF" = 1 ]; then
  CHECK_ONLY=(--check-only)
  echo "NO_HF=1: dry run, transformers is not run" | tee "$OUT_DIR/versions.txt"
elif ! "$PY" -c 'import torch, transformers; print("torch", torch.__version__, "transformers",
transformers.__version__, "cuda", torch.cuda.is_available())' | tee "$OUT_DIR/versions.txt"; then
  echo "run_on_device: torch/transformers missing (NO_HF=1 for a dry run)" >&2
  exit 2
fi

# name | arch | type | extra synth flags | n_tokens
CASES=(
  "gemma3-f32|gemma3|f32||128"
  "gemma3-q4k|gemma3|q4_k||128"
  "gemma3-12l-w32|gemma3|f32|--n-layer 12 --window 32|160"
  "llama-f32|llama|f32||128"
  "llama-q4k|llama|q4_k||128"
  "qwen3-f32|qwen3|f32||128"
  "qwen3-q4k|qwen3|q4_k||128"
)

status=0
seed=1
for c in "${CASES[@]}"; do
  IFS='|' read -r name arch type extra ntok <<<"$c"
  d="$OUT_DIR/$name"; w="$WORK/$name"
  mkdir -p "$d" "$w"
  echo "== $name"
  # shellcheck disable=SC2086  # $extra is a list of flags
  if ! "$STRATA" synth --arch "$arch" --preset tiny --type "$type" $extra --seed "$seed" --no-progress \
        -o "$w/model.gguf" >"$d/synth.log" 2>&1; then
    echo "   synth failed (see $d/synth.log)"; status=1; seed=$((seed + 1)); continue
  fi
  if ! "$STRATA" export-hf -m "$w/model.gguf" -o "$w/hf" >"$d/export.log" 2>&1; then
    echo "   export-hf failed: $(tail -1 "$d/export.log")"; status=1; seed=$((seed + 1)); continue
  fi
  cp "$w/hf/config.json" "$d/config.json"
  "$PY" - "$w/hf/config.json" "$ntok" "$seed" >"$w/tokens.txt" <<'EOF'
import json, random, sys
cfg = json.load(open(sys.argv[1]))
n, rng = int(sys.argv[2]), random.Random(int(sys.argv[3]))
bos = cfg.get("bos_token_id")
ids = ([bos] if bos is not None else []) + [rng.randrange(cfg["vocab_size"]) for _ in range(n)]
print(" ".join(map(str, ids[:n])))
EOF
  cp "$w/tokens.txt" "$d/tokens.txt"
  # The CPU engine is the reference every backend is held to (STRATA_DEVICE=cuda compares the GPU's).
  if ! "$STRATA" logits -m "$w/model.gguf" --device "${STRATA_DEVICE:-cpu}" --tokens-file "$w/tokens.txt" --all -o "$w/strata.f32" \
        >"$d/logits.log" 2>&1; then
    echo "   strata logits failed: $(tail -1 "$d/logits.log")"; status=1; seed=$((seed + 1)); continue
  fi
  # A second opinion without transformers (logged, not gating).
  "$PY" "$HERE/np_reference.py" --hf "$w/hf" --tokens "$w/tokens.txt" --strata-logits "$w/strata.f32" \
      >"$d/np_reference.log" 2>&1
  "$PY" "$HERE/compare_hf.py" --hf "$w/hf" --tokens "$w/tokens.txt" --strata-logits "$w/strata.f32" \
      --name "$name" --json "$d/compare.json" "${CHECK_ONLY[@]}" >"$d/compare.log" 2>&1
  rc=$?
  np_rc=$(grep -c PASS "$d/np_reference.log")
  [ "$NO_HF" = 1 ] && [ "$np_rc" = 0 ] && rc=1
  tail -n 3 "$d/compare.log" | sed 's/^/   /'
  sed 's/^/   np: /' "$d/np_reference.log" | tail -n 1
  [ $rc -eq 0 ] || status=1
  seed=$((seed + 1))
done

"$PY" - "$OUT_DIR" "${CASES[@]}" <<'EOF'
import json, os, sys
out, cases = sys.argv[1], [c.split("|")[0] for c in sys.argv[2:]]
rows, summary = [], []
for name in cases:
    p = os.path.join(out, name, "compare.json")
    if not os.path.exists(p):
        np_log = os.path.join(out, name, "np_reference.log")
        np_line = open(np_log).read().strip() if os.path.exists(np_log) else ""
        rows.append(f"{name:<16} no HF result; numpy: {np_line or 'ERROR (see logs)'}")
        summary.append({"name": name, "pass": False, "error": True})
        continue
    r = json.load(open(p))
    rows.append(f"{name:<16} {r['worst_ratio']:>12.3e} {r['worst_pos']:>6} {r['mean_kl']:>10.3e} "
                f"{r['top1_agree'] * 100:>6.1f}% {'PASS' if r['pass'] else 'FAIL':>5}")
    summary.append({k: r[k] for k in ("name", "pass", "worst_ratio", "worst_pos", "mean_kl", "max_kl", "top1_agree",
                                      "n_tokens", "transformers_version", "torch_version", "device", "rope_checks")})
print(f"\n{'case':<16} {'worst ratio':>12} {'at':>6} {'mean KL':>10} {'top-1':>7} {'':>5}")
print("\n".join(rows))
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
EOF
exit $status

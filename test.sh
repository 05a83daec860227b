#!/usr/bin/env bash
# Runs every test of brain on a fresh machine: installs what the tests need
# (Debian's chromium for the page handle), then gofmt, go vet, staticcheck and
# go test -race over every package.
set -euo pipefail
cd "$(dirname "$0")"

if [ ! -x /usr/lib/chromium/chromium ]; then
  echo "test.sh: installing Debian's chromium for the page handle tests" >&2
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
fi

unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then
  echo "test.sh: gofmt would change:" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet ./...
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
CI=true go test -race -timeout 10m ./...

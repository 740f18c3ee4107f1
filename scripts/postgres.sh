#!/usr/bin/env bash
# Install PostgreSQL 15 with pgvector and pg_trgm and start a throwaway cluster on 127.0.0.1 only,
# for tests and CI on a fresh Debian 12 machine (run as root). pgvector has no Debian 12 package,
# so Debian's pgvector source package (from the next release) is built against PostgreSQL 15
# through a private apt configuration; the system's apt sources stay untouched.
# Idempotent: a cluster already answering on $PGPORT is reused. Prints PG_DSN=... last.
# Stop the cluster with: runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D $WORK/data -m fast stop
set -euo pipefail
PGVER=15
PGPORT=${PGPORT:-5433}
WORK=${WORK:-/tmp/pgci}
PGBIN=/usr/lib/postgresql/$PGVER/bin
export DEBIAN_FRONTEND=noninteractive
DSN="postgresql://postgres@127.0.0.1:$PGPORT/postgres"
if command -v psql >/dev/null && psql "$DSN" -X -q -t -c "select 1 from pg_extension where extname='vector'" 2>/dev/null | grep -q 1; then
  echo "PG_DSN=$DSN"; exit 0
fi
if ! [ -x "$PGBIN/pg_ctl" ] || ! [ -x "$PGBIN/pg_config" ] || ! [ -f /usr/include/postgresql/$PGVER/server/postgres.h ]; then
  apt-get update -q
  apt-get install -y -q --no-install-recommends postgresql-$PGVER postgresql-server-dev-$PGVER make gcc libc6-dev
fi
if [ ! -f /usr/share/postgresql/$PGVER/extension/vector.control ] || [ "${FORCE_BUILD:-0}" = 1 ]; then
  # the archive this machine already uses for Debian's packages
  ARCHIVE=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [ -n "$ARCHIVE" ] || ARCHIVE=$(awk '/^deb / && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list)
  mkdir -p "$WORK/apt/lists/partial" "$WORK/apt/cache/archives/partial" "$WORK/src"
  echo "deb-src $ARCHIVE trixie main" > "$WORK/apt/sources.list"
  APTO=(-o Dir::Etc::sourcelist="$WORK/apt/sources.list" -o Dir::Etc::sourceparts=/dev/null
        -o Dir::State::Lists="$WORK/apt/lists" -o Dir::Cache="$WORK/apt/cache")
  apt-get "${APTO[@]}" update -q
  rm -rf "$WORK/src"/*; mkdir -p "$WORK/src"
  (cd "$WORK/src" && apt-get "${APTO[@]}" source --download-only pgvector && tar xzf pgvector_*.orig.tar.gz)
  SRC=$(ls -d "$WORK"/src/pgvector-*/ | head -1)
  make -C "$SRC" PG_CONFIG=$PGBIN/pg_config OPTFLAGS="" with_llvm=no >/dev/null
  make -C "$SRC" PG_CONFIG=$PGBIN/pg_config with_llvm=no install >/dev/null
fi
# initdb refuses to run as root, so the cluster belongs to the postgres user
if [ -f "$WORK/data/postmaster.pid" ]; then
  runuser -u postgres -- $PGBIN/pg_ctl -D "$WORK/data" -m fast stop || true
fi
rm -rf "$WORK/data"; mkdir -p "$WORK/data" "$WORK/sock"; chown -R postgres:postgres "$WORK/data" "$WORK/sock"
runuser -u postgres -- $PGBIN/initdb -D "$WORK/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
runuser -u postgres -- $PGBIN/pg_ctl -D "$WORK/data" -l "$WORK/data/server.log" -w \
  -o "-c listen_addresses=127.0.0.1 -p $PGPORT -k $WORK/sock" start >/dev/null
psql "host=127.0.0.1 port=$PGPORT user=postgres dbname=postgres" -v ON_ERROR_STOP=1 -X -q \
  -c "create extension if not exists vector; create extension if not exists pg_trgm;" >/dev/null
echo "PG_DSN=$DSN"

#!/usr/bin/env bash
# `make install`: programs, libraries, public headers and pkg-config files.
# Usage: scripts/install.sh DESTDIR PREFIX BUILD_DIR
# Honours DESTDIR (staging root) and PREFIX (where the files will live).
set -euo pipefail
destdir=$1 prefix=$2 B=$3
root=$(cd "$(dirname "$0")/.." && pwd)
bindir="$destdir$prefix/bin" libdir="$destdir$prefix/lib"
incdir="$destdir$prefix/include/levelfeed" pcdir="$destdir$prefix/lib/pkgconfig"
install -d "$bindir" "$libdir" "$incdir" "$pcdir"

for f in "$B"/bin/*; do [[ -x $f && -f $f ]] && install -m 0755 "$f" "$bindir/"; done
for f in "$B"/lib/*.a; do [[ -f $f ]] && install -m 0644 "$f" "$libdir/"; done
for f in "$B"/lib/*.so*; do   # keep the soname links as links
  if [[ -L $f ]]; then cp -P "$f" "$libdir/"; elif [[ -f $f ]]; then install -m 0755 "$f" "$libdir/"; fi
done
# Public headers: each library folder lists its own in PUBLIC_HEADERS.
for list in "$root"/*/PUBLIC_HEADERS; do
  [[ -f $list ]] || continue
  while read -r h; do
    [[ -n $h ]] && install -m 0644 "$(dirname "$list")/$h" "$incdir/"
  done <"$list"
done
for pc in "$root"/*/*.pc.in; do
  [[ -f $pc ]] || continue
  sed -e "s|@PREFIX@|$prefix|g" "$pc" >"$pcdir/$(basename "$pc" .in)"
done
# The Python package finds PREFIX/lib/liblevelfeed.so from its own place.
pydir="$destdir$prefix/lib/python3/dist-packages"
install -d "$pydir/levelfeed"
install -m 0644 "$root"/python/levelfeed/*.py "$pydir/levelfeed/"
echo "installed into $destdir$prefix"

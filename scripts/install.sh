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
# liblf_common.a is the programs' own command-line code (common/): no
# library or user program links it, so it is not installed.
for f in "$B"/lib/*.a; do
  [[ -f $f && $(basename "$f") != liblf_common.a ]] && install -m 0644 "$f" "$libdir/"
done
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
# The Python package, where Debian's and Ubuntu's python3 look under PREFIX
# (lib/python3.X/dist-packages: /usr/local's is on their path); it finds
# PREFIX/lib/liblevelfeed.so from its own place, three folders up.
py=/usr/bin/python3
pyver=$("$py" -c 'import sys; print("python%d.%d" % sys.version_info[:2])' 2>/dev/null || echo python3)
pydir="$destdir$prefix/lib/$pyver/dist-packages"
install -d "$pydir/levelfeed"
install -m 0644 "$root"/python/levelfeed/*.py "$pydir/levelfeed/"
if ! "$py" -c "import sys; sys.exit('$prefix/lib/$pyver/dist-packages' not in sys.path)" 2>/dev/null; then
  echo "note: $prefix/lib/$pyver/dist-packages is not on $py's path: add it to PYTHONPATH"
fi
# The dynamic linker's cache, for programs linked with pkg-config's flags
# (only for a real install: a staged one is the package manager's).
if [[ -z $destdir && $(id -u) -eq 0 ]] && command -v ldconfig >/dev/null; then ldconfig; fi
echo "installed into $destdir$prefix"

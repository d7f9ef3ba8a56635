#!/usr/bin/env bash
# The Python package as a user installs it, offline:
# - one release string: levelfeed.h's LF_VERSION_STRING, the package's
#   __version__, the library's lf_version() and levelfeed.pc's Version;
# - `pip install ./python` into a fresh venv (Debian's interpreter, with
#   --system-site-packages for its numpy and torch) builds and installs with
#   no index; outside the source tree the installed package then finds
#   liblevelfeed through LEVELFEED_LIB, beside itself, and through the
#   system loader after `make install` (LD_LIBRARY_PATH standing in for
#   ldconfig), names every place it tried when none holds it, and refuses a
#   library of another release; it reads a real server's epoch whole;
# - `make install` (scripts/install.sh) puts a package on PREFIX that finds
#   PREFIX/lib/liblevelfeed.so from its own place;
# - a wheel and an sdist build with no index on Debian's Python and on the
#   oldest and newest Python >= 3.9 that pyenv has, where it is there, and
#   the wheel installs into a fresh venv of each with the right metadata.
source "$(dirname "$0")/server_lib.sh"
source "$(dirname "$0")/python_lib.sh"
need_python_module numpy
"$PY_BIN" -m venv --help >/dev/null 2>&1 || fail "$PY_BIN has no venv module (Debian: python3-venv; make deps installs it)"
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1

# --- one release string ------------------------------------------------------------------------
header=$(sed -n 's/^#define LF_VERSION_STRING "\(.*\)"$/\1/p' "$ROOT/client/levelfeed.h")
package=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$ROOT/python/levelfeed/_version.py")
pc=$(sed -n 's/^Version: //p' "$LF_BUILD/lib/pkgconfig/levelfeed.pc")
[[ -n $header && $header == "$package" && $header == "$pc" ]] ||
  fail "release strings differ: levelfeed.h '$header', _version.py '$package', levelfeed.pc '$pc'"

# --- pip install ./python into a fresh venv ------------------------------------------------------
cp -r "$ROOT/python" "$WORK/src"          # the source tree stays as it was
"$PY_BIN" -m venv --system-site-packages "$WORK/venv" || fail "python3 -m venv"
VPY="$WORK/venv/bin/python"
# An interpreter that is itself a venv's (the GPU machines' image): the new
# venv's --system-site-packages reaches the base Python, not that venv's
# packages, so a .pth adds them and its numpy counts as installed.
parent_site=$("$PY_BIN" -c 'import sys, sysconfig
print(sysconfig.get_paths()["purelib"] if sys.prefix != sys.base_prefix else "")')
[[ -z $parent_site ]] ||
  echo "$parent_site" >"$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/parent-venv.pth"
"$VPY" -m pip install "$WORK/src" >"$WORK/pip.log" 2>&1 || { cat "$WORK/pip.log" >&2; fail "pip install ./python"; }
site=$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
[[ -f $site/levelfeed/loader.py ]] || fail "pip installed no levelfeed/loader.py under $site"

# The installed package alone: no source tree on the path, nothing that
# points at the build. "where": which library it loaded.
installed() {      # [VAR=VALUE...] -- PYTHON-CODE
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  (cd "$WORK" && unset PYTHONPATH LEVELFEED_LIB LF_BUILD &&
    { [[ ${#envs[@]} -eq 0 ]] || export "${envs[@]}"; } && py_run "$VPY" -c "$2")
}
where='import levelfeed; print(levelfeed.__version__, levelfeed.lib_path)'

out=$(installed -- "$where" 2>&1) && fail "imported with no library anywhere: $out"
[[ $out == *"no usable liblevelfeed; tried: "*"$site/levelfeed/liblevelfeed.so (absent)"*"liblevelfeed.so.1"*"LEVELFEED_LIB"* ]] ||
  fail "the import error does not name the places tried and LEVELFEED_LIB: $out"

so="$LF_BUILD/lib/liblevelfeed.so"
out=$(installed "LEVELFEED_LIB=$so" -- "$where") || fail "LEVELFEED_LIB: $out"
[[ $out == "$header $so" ]] || fail "LEVELFEED_LIB: loaded '$out'"

cp "$so" "$site/levelfeed/liblevelfeed.so"
out=$(installed -- "$where") || fail "beside the package: $out"
[[ $out == "$header $site/levelfeed/liblevelfeed.so" ]] || fail "beside the package: loaded '$out'"
rm "$site/levelfeed/liblevelfeed.so"

cat >"$WORK/other.c" <<'C'
const char *lf_version(void);
const char *lf_version(void) { return "9.9.9"; }
C
cc -shared -fPIC -o "$WORK/liblevelfeed.so" "$WORK/other.c" || fail "cannot build the other release's stand-in"
out=$(installed "LEVELFEED_LIB=$WORK/liblevelfeed.so" -- "$where" 2>&1) && fail "took release 9.9.9: $out"
[[ $out == *"$WORK/liblevelfeed.so (release 9.9.9, this package is $header)"* ]] ||
  fail "another release's library: $out"

# --- make install ----------------------------------------------------------------------------------
"$ROOT/scripts/install.sh" "" "$WORK/prefix" "$LF_BUILD" >"$WORK/install.log" 2>&1 ||
  { cat "$WORK/install.log" >&2; fail "make install (scripts/install.sh)"; }
# (the prefix first; a path already set, as a packed kit's, stays behind it)
out=$(installed "LD_LIBRARY_PATH=$WORK/prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" -- "$where") || fail "pip package + make install: $out"
[[ $out == "$header liblevelfeed.so.1" ]] || fail "pip package + make install: loaded '$out'"
pydir=$(ls -d "$WORK"/prefix/lib/python3*/dist-packages)
out=$(cd "$WORK" && unset LEVELFEED_LIB LF_BUILD && PYTHONPATH="$pydir" py_run "$PY_BIN" -c "$where") ||
  fail "make install's package: $out"
[[ $out == "$header $WORK/prefix/lib/liblevelfeed.so" ]] || fail "make install's package: loaded '$out'"

# --- the pip-installed package reads a real server's epoch ----------------------------------------
make_dataset "$WORK/ds"
start_server --data "$WORK/ds" --world 1
out=$(installed "LEVELFEED_LIB=$so" -- "
import levelfeed
ids = set()
for b in levelfeed.Loader(endpoint='$EP', rank=0, world_size=1, tensors='numpy'):
    ids.update(int(i) for i in b['sample_ids'])
print(len(ids), min(ids), max(ids))") || fail "a Loader from the pip-installed package: $out"
[[ $out == "2000 0 1999" ]] || fail "the pip-installed package read '$out', not samples 0..1999 once"
wait_server

# --- wheels and sdists on the oldest and newest Python >= 3.9 found -----------------------------
# Debian's, and pyenv's oldest and newest where pyenv is there (each venv
# costs seconds; the ends of the range are where the package could break).
pythons=("$PY_BIN")
pyenv=()
for p in "$HOME"/.pyenv/versions/3.*/bin/python3; do
  [[ -x $p ]] && "$p" -c 'import sys; sys.exit(sys.version_info < (3, 9))' 2>/dev/null && pyenv+=("$p")
done
if [[ ${#pyenv[@]} -gt 0 ]]; then
  mapfile -t pyenv < <(printf '%s\n' "${pyenv[@]}" | sort -V)
  pythons+=("${pyenv[0]}")
  [[ ${#pyenv[@]} -gt 1 ]] && pythons+=("${pyenv[-1]}")
fi
built=()
for p in "${pythons[@]}"; do
  v=$("$p" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  d="$WORK/py${#built[@]}"
  "$p" -m venv "$d/venv" >"$d.log" 2>&1 || { echo "note: $p cannot make a venv, skipped"; continue; }
  "$d/venv/bin/python" -m pip wheel --no-deps -w "$d/wheel" "$WORK/src" >>"$d.log" 2>&1 ||
    { cat "$d.log" >&2; fail "Python $v: pip wheel ./python"; }
  "$d/venv/bin/python" -m pip install --no-deps "$d"/wheel/levelfeed-"$header"-py3-none-any.whl >>"$d.log" 2>&1 ||
    { cat "$d.log" >&2; fail "Python $v: pip install the wheel"; }
  meta=$(cd "$WORK" && "$d/venv/bin/python" -c 'import importlib.metadata as m; print(m.version("levelfeed"), m.requires("levelfeed"))')
  [[ $meta == "$header ['numpy', 'torch; extra == \"torch\"']" ]] || fail "Python $v: installed metadata '$meta'"
  (cd "$WORK/src" && "$d/venv/bin/python" -c 'import sys; sys.path.insert(0, "build_backend")
import levelfeed_build as b; print(b.build_sdist(sys.argv[1]))' "$d") >>"$d.log" 2>&1 ||
    { cat "$d.log" >&2; fail "Python $v: sdist"; }
  members=$(tar tzf "$d/levelfeed-$header.tar.gz")   # whole, then searched: no SIGPIPE under pipefail
  grep -qx "levelfeed-$header/levelfeed/loader.py" <<<"$members" || fail "Python $v: the sdist lacks levelfeed/loader.py"
  built+=("$v")
done
# The sdist installs like the source folder (Debian's venv, numpy from the system).
"$VPY" -m pip install --force-reinstall --no-deps "$WORK"/py0/levelfeed-"$header".tar.gz >"$WORK/sdist.log" 2>&1 ||
  { cat "$WORK/sdist.log" >&2; fail "pip install the sdist"; }
check_python_leftovers
echo "python package $header: pip install ./python, LEVELFEED_LIB, beside, make install, another release refused, an epoch read; wheel + sdist on Python ${built[*]}: ok"

#!/usr/bin/env bash
# Packs .kit/ for a GPU machine that can reach no package registry (the
# device tool's machines: a CUDA + PyTorch image, nothing else installed):
#   .kit/build  the CUDA build's programs, libraries, tests and benchmarks
#               (BUILD_DIR without its objects, but those e2e/layering
#               reads), so tests/run.sh .kit/build
#               and tests/bench/run.sh .kit/build work there unchanged;
#   .kit/lib    every shared library those need beyond glibc, libstdc++ and
#               CUDA's own (liburing, libzstd, libjpeg-turbo, ZeroMQ, jansson,
#               Open MPI and what they pull in), copied from this machine;
#   .kit/ompi   Open MPI's runtime (mpirun, orted, its components and help
#               files) under its Debian paths, relocated there by OPAL_PREFIX;
#   .kit/bin    zstd and GNU time, which the benchmarks call.
# NCCL is not packed (218 MB): the image's PyTorch wheel brings libnccl.so.2,
# and scripts/device-check.sh puts it on the library path.
#   scripts/device-kit.sh [BUILD_DIR]     (default build/default; built first)
# Then: device run, carry [".kit"], command "scripts/device-check.sh tests".
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=${1:-build/default}
kit="$root/.kit"
die() { echo "device-kit: $*" >&2; exit 1; }

make -C "$root" B="$B" -j"$(nproc)" >/dev/null || die "make B=$B failed"
B=$(cd "$root" && cd "$B" && pwd)
[[ $("$B/bin/lf-train" --help) == *"this build: CPU and CUDA"* ]] ||
  die "$B has no CUDA build of lf-train (is nvcc at /usr/local/cuda/bin/nvcc?)"
command -v mpirun >/dev/null || die "no mpirun here to pack (apt-get install openmpi-bin)"

rm -rf "$kit"
mkdir -p "$kit/build" "$kit/lib" "$kit/ompi" "$kit/bin"
for d in bin lib tests fuzz bench fakecuda; do
  [[ -d "$B/$d" ]] && cp -a "$B/$d" "$kit/build/"
done
# e2e/layering reads the symbol graph of these folders' objects.
for d in server balancer client; do
  mkdir -p "$kit/build/obj/$d" && cp -a "$B/obj/$d"/*.o "$kit/build/obj/$d/"
done
cp -L "$(type -P zstd)" "$(type -P time)" "$kit/bin/" 2>/dev/null ||
  die "zstd and GNU time are needed (apt-get install zstd time)"

# Open MPI's files, at their paths under .kit/ompi (OPAL_PREFIX=.kit/ompi/usr).
ompi_pkgs=(libopenmpi3 openmpi-bin openmpi-common libpmix2)
# A link to a relative name stays a link; one through an absolute path
# (/etc/alternatives) becomes the file it names.
dpkg -L "${ompi_pkgs[@]}" | while read -r f; do
  [[ -f $f && $f != /usr/share/doc/* && $f != /usr/share/man/* ]] || continue
  mkdir -p "$kit/ompi$(dirname "$f")"
  if [[ -L $f && $(readlink "$f") != /* ]]; then cp -a "$f" "$kit/ompi$f"; else cp -L "$f" "$kit/ompi$f"; fi
done
# mpirun itself is Debian's alternatives link, in no package's file list.
ln -s orterun "$kit/ompi/usr/bin/mpirun"

# The shared libraries every ELF file in the kit loads, less those the
# machine has: glibc, the C++ runtime (newer there), the driver and NCCL
# (libcudart is packed: it must be the one the build's nvcc linked against).
system_lib='^(linux-vdso|ld-linux|libc|libm|libpthread|libdl|librt|libresolv|libstdc\+\+|libgcc_s|libcuda|libnccl)\.so'
elf_files() { find "$kit/build" "$kit/ompi" "$kit/bin" -type f -perm -u+x -o -type f -name '*.so*'; }
elf_files | while read -r f; do
  [[ "$(head -c 4 "$f")" == $'\x7fELF' ]] || continue   # the ELF magic (`file` may be missing)
  ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  packed="$kit/ompi$(readlink -f "$(dirname "$path")")/$name"   # /lib is /usr/lib
  [[ $name =~ $system_lib || -e $packed || -e "$kit/lib/$name" ]] && continue
  cp -L "$path" "$kit/lib/$name"
done

# The link-time names (libzmq.so) of the packed libraries, for the tests
# that link a program against liblevelfeed.a with its Libs.private.
for f in "$kit/lib"/*.so.*; do
  dev=${f%%.so.*}.so
  [[ -e $dev ]] || ln -s "$(basename "$f")" "$dev"
done

echo "device-kit: $(du -sh "$kit" | cut -f1) in $kit ($(find "$kit/lib" -type f | wc -l) libraries);" \
     "carry \".kit\" and run scripts/device-check.sh there"

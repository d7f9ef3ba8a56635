"""A PEP 517 build backend for the levelfeed Python package, with no
dependencies: pip runs it from this folder (pyproject.toml's backend-path)
in an isolated build environment that has nothing installed and, on an
offline training node, nothing it could download.

The package is pure Python (ctypes over liblevelfeed.so, which `make` builds
and `make install` installs), so a wheel is a zip of levelfeed/*.py and the
dist-info files the wheel format (PEP 427) and the core metadata spec ask
for. Editable installs (PEP 660) are a .pth file naming this folder.
"""
import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
NAME = "levelfeed"
SUMMARY = "Balanced, zero-copy batches from a per-node lf-server for data-parallel training"
REQUIRES_PYTHON = ">=3.9"
REQUIRES = ["numpy"]
EXTRAS = {"torch": ["torch"]}
TAG = "py3-none-any"


def _version():
    """__version__ from levelfeed/_version.py, read as text (the package
    itself imports liblevelfeed, which a build need not have)."""
    with open(os.path.join(HERE, NAME, "_version.py"), encoding="utf-8") as f:
        m = re.search(r'^__version__ = "([^"]+)"$', f.read(), re.M)
    if not m:
        raise RuntimeError("levelfeed_build: no __version__ line in levelfeed/_version.py")
    return m.group(1)


def _metadata():
    lines = ["Metadata-Version: 2.1", "Name: " + NAME, "Version: " + _version(),
             "Summary: " + SUMMARY, "Requires-Python: " + REQUIRES_PYTHON]
    lines += ["Requires-Dist: " + r for r in REQUIRES]
    for extra, reqs in EXTRAS.items():
        lines.append("Provides-Extra: " + extra)
        lines += ['Requires-Dist: %s; extra == "%s"' % (r, extra) for r in reqs]
    lines.append("Description-Content-Type: text/markdown")
    with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
        return ("\n".join(lines) + "\n\n" + f.read()).encode("utf-8")


def _sources():
    """(path in the wheel, bytes) of the package's modules, in name order."""
    pkg = os.path.join(HERE, NAME)
    for name in sorted(os.listdir(pkg)):
        if name.endswith(".py"):
            with open(os.path.join(pkg, name), "rb") as f:
                yield NAME + "/" + name, f.read()


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (path, digest, len(data))


def _write_wheel(wheel_directory, files):
    """Writes the wheel of `files` (path, bytes) plus its dist-info; returns
    its file name."""
    version = _version()
    info = "%s-%s.dist-info" % (NAME, version)
    files = list(files) + [
        (info + "/METADATA", _metadata()),
        (info + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: levelfeed_build\n"
                           "Root-Is-Purelib: true\nTag: %s\n" % TAG).encode()),
    ]
    record = [_record_line(p, d) for p, d in files] + [info + "/RECORD,,"]
    files.append((info + "/RECORD", ("\n".join(record) + "\n").encode()))
    name = "%s-%s-%s.whl" % (NAME, version, TAG)
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files:
            z.writestr(zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0)), data,
                       zipfile.ZIP_DEFLATED)
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, _sources())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """A wheel holding one .pth line: this folder goes on sys.path, so the
    source tree's package is the one imported."""
    return _write_wheel(wheel_directory, [(NAME + ".pth", (HERE + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (NAME, _version())
    name = base + ".tar.gz"
    members = ["pyproject.toml", "README.md", "build_backend/levelfeed_build.py"]
    members += [p for p, _ in _sources()]
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for rel in members:
            t.add(os.path.join(HERE, rel), arcname=base + "/" + rel, recursive=False)
        pkg_info = _metadata()
        ti = tarfile.TarInfo(base + "/PKG-INFO")
        ti.size = len(pkg_info)
        t.addfile(ti, io.BytesIO(pkg_info))
    return name

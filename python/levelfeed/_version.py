# The release of this package. It must equal LF_VERSION_STRING in
# client/levelfeed.h: the package refuses a liblevelfeed of another release
# (_capi._load), and tests/e2e/python_package.sh checks the two agree.
__version__ = "0.1.0"

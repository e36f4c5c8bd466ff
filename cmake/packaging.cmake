# A Debian package of what `cmake --install` installs (CPack's DEB generator):
#   cmake --build build --target package      -> build/weft_<version>_<arch>.deb
# The library, headers, pkg-config file, CMake config and the tools (each answers --help).
# Dependencies come from dpkg-shlibdeps (dpkg-dev), so they name the Debian packages that
# provide the libraries libweft.so and the tools were linked against (UCX, libffi, ...).
# tests/install/check-deb builds it, unpacks it into a scratch root and uses only those files.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME weft)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "weft developers <weft@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "distributed deep-learning backend with a stable C ABI")
set(CPACK_PACKAGE_DESCRIPTION "libweft.so: communicators and collectives over UCX, shared memory and NCCL, meshes and sharded tensors, training parallelism, pipeline schedules, MoE dispatch and plugins, behind one extern-C ABI; with its headers, pkg-config and CMake files and the weftrun, weft-bench, weft-ckpt, weft-schedule, weft-info and weft-plan tools.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
# Stripped: the build's debug info would make the package ten times larger.
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)
include(CPack)

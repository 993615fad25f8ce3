#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, builds tests/install/consumer against it with only
# find_package(Fresco CONFIG), runs it (plugins found without FRESCO_PLUGIN_PATH), and checks pkg-config.
# Usage: run_install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1; src=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
cmake -S "$src/tests/install/consumer" -B "$work/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$work/prefix" > "$work/configure.log"
cmake --build "$work/consumer" > "$work/build.log"
env -u FRESCO_PLUGIN_PATH LD_LIBRARY_PATH="$work/prefix/lib" FRESCO_LOG=warn "$work/consumer/consumer"
"$work/prefix/bin/fresco" plugins | grep -q "$work/prefix/lib/fresco/libfresco-cpu.so"
PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" pkg-config --libs --cflags fresco | grep -q -- "-lfresco"
echo "install test: OK"

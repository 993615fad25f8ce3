#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, builds tests/install/consumer and the out-of-tree op library
# example sdk/examples/swish_op against it with only find_package(Fresco CONFIG), runs both (the consumer finds the
# installed plugins without FRESCO_PLUGIN_PATH; train_swish trains a network through the custom op), checks the
# op library with fresco-plugin-check and trains a job through it with `fresco --plugin`, and builds and runs
# the consumer again with pkg-config's flags alone.
# Usage: run_install_test.sh BUILD_DIR SOURCE_DIR [CXX_FLAGS]
# CXX_FLAGS: the build's own (a sanitizer build's consumers must link the same runtime first).
set -euo pipefail
build=$1; src=$2; flags=${3:-}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
cmake -S "$src/tests/install/consumer" -B "$work/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_CXX_FLAGS="$flags" > "$work/configure.log"
cmake --build "$work/consumer" > "$work/build.log"
env -u FRESCO_PLUGIN_PATH LD_LIBRARY_PATH="$work/prefix/lib" FRESCO_LOG=warn "$work/consumer/consumer"
"$work/prefix/bin/fresco" plugins | grep -q "$work/prefix/lib/fresco/libfresco-cpu.so"
cmake -S "$src/sdk/examples/swish_op" -B "$work/swish" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_CXX_FLAGS="$flags" > "$work/swish-configure.log"
cmake --build "$work/swish" > "$work/swish-build.log"
LD_LIBRARY_PATH="$work/prefix/lib" FRESCO_LOG=warn "$work/swish/train_swish"
"$work/prefix/bin/fresco-plugin-check" "$work/swish/libfresco-swish.so"
# the CLI trains a job's custom layer through the op library named by --plugin
if [ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  cat > "$work/swish_job.json" <<'JOB'
{"model": [{"layer": "fc", "out": 32}, {"layer": "custom", "op": "swish"}, {"layer": "fc", "out": 10}],
 "data": {"dataset": "fashion-mnist"}, "epochs": 1, "device": "cpu"}
JOB
  LD_LIBRARY_PATH="$work/prefix/lib" FRESCO_LOG=warn "$work/prefix/bin/fresco" \
      --plugin "$work/swish/libfresco-swish.so" train "$work/swish_job.json" --samples 512 \
      | grep -q "final test accuracy"
fi
PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" pkg-config --libs --cflags fresco | grep -q -- "-lfresco"
# pkg-config's flags point into this prefix (the .pc finds it from its own folder): a program builds with them
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
g++ $flags $(pkg-config --cflags fresco) "$src/tests/install/consumer/main.cpp" $(pkg-config --libs fresco) \
    -o "$work/consumer_pc"
env -u FRESCO_PLUGIN_PATH LD_LIBRARY_PATH="$work/prefix/lib" FRESCO_LOG=warn "$work/consumer_pc"
echo "install test: OK"
